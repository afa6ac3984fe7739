"""Timing mode, first version: the waves of one workgroup on one CU, issued cycle by cycle, each instruction executed
by the functional emulator at the cycle it issues. What it yields are predictions, never measurements.

The machine (every number from timing_params.PARAMS, each with its source or marked a calibration knob):
- 4 SIMDs; wave w of the workgroup lives on SIMD w % 4. SIMD s is served at the cycles t = s (mod 4), and then
  issues at most one instruction per port (VALU, SALU, SMEM, VMEM, LDS, other) and one per wave; among the waves
  ready for a port, the higher s_setprio first, then the older (lower wave id).
- A wave issues in order: its next instruction waits until its operands are ready (an MFMA's result P + 4 wait
  states after it issued, back-to-back accumulation into the same registers excepted; a transcendental's after
  trans_cycles), its pipe is free (the VALU, busy valu_cycles or trans_cycles per instruction; the SIMD's MFMA
  pipe, busy 4 cycles per pass, passes from tools/gfx950_hazards.py) and, for s_waitcnt, until the counted
  memory operations have completed.
- A memory operation completes latency cycles after its bytes have passed the CU's LDS or VMEM path (bytes per
  cycle, shared by the workgroup's waves), in issue order per counter as the hardware reports them; s_nop N holds
  the wave N + 1 wait states; s_barrier releases barrier_cycles after the last live wave arrives; a taken branch
  holds its wave branch_cycles.
- Code that reads a load's registers without a wait (AMD's kernels rely on latency) is not stalled, as the
  hardware does not interlock: such a read before the modelled completion is counted in `early_reads`, a sign that
  a latency knob is above what the kernel's author counted on.
Not modelled: instruction fetch, LDS bank conflicts, the memory hierarchy beyond one latency and one bandwidth,
other workgroups on the CU, DPP / permlane costs beyond one VALU pass.
"""
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

import gfx950_hazards

from .errors import EmulatorError
from .instruction import is_branch
from .isa import execute
from .run import DEFAULT_MAX_STEPS, RunStats, dispatch
from .state import LANES
from .timing_params import PARAMS
from .waitcnt import COUNTER_RE, COUNTERS

_TRANS = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)_")
_MFMA_SHAPE = re.compile(r"_(\d+)x(\d+)x(\d+)")
_LANE_BYTES = re.compile(r"(?:_b|dwordx|_u|_i)(\d+)")
_NO_PORT = ("s_waitcnt", "s_barrier", "s_nop", "s_setprio", "s_sleep", "s_endpgm")


def port(mnemonic: str) -> str:
    """The issue port of an instruction: valu (MFMAs and transcendentals too), salu, smem, vmem, lds, other."""
    if mnemonic.startswith("v_"):
        return "valu"
    if mnemonic.startswith("ds_"):
        return "lds"
    if mnemonic.startswith(("global_", "buffer_", "flat_", "scratch_")):
        return "vmem"
    if mnemonic.startswith(("s_load", "s_buffer_load", "s_store", "s_buffer_store", "s_dcache")):
        return "smem"
    if is_branch(mnemonic) or mnemonic in _NO_PORT:
        return "other"
    return "salu"


def lane_bytes(mnemonic: str) -> int:
    """Bytes one lane moves for a memory instruction (ds_read_b128: 16, buffer_load_dwordx4: 16, sub-dword: 4)."""
    if "_tr_" in mnemonic:
        return 8    # ds_read_b64_tr_b16 / tr_b8: 64 bits per lane
    sizes = [int(n) for n in _LANE_BYTES.findall(mnemonic)]
    if "dwordx" in mnemonic:
        bytes_ = 4 * sizes[0]
    elif sizes and sizes[0] >= 32:
        bytes_ = sizes[0] // 8
    else:
        bytes_ = 4
    return bytes_ * (2 if re.search(r"(read|write)2", mnemonic) else 1)


def mfma_flops(mnemonic: str) -> int:
    """2 M N K of an MFMA mnemonic."""
    m, n, k = (int(x) for x in _MFMA_SHAPE.search(mnemonic).groups())
    return 2 * m * n * k


def _is_load(mnemonic: str) -> bool:
    return "load" in mnemonic or "ds_read" in mnemonic


@dataclass
class _Wave:
    """A wave's timing state beside its functional WaveState."""
    state: object
    simd: int
    ready_at: int = 0                 # earliest cycle of its next issue (s_nop, branch, barrier)
    held_by: str = "issue"            # what set ready_at: "s_nop", "branch", "s_barrier"
    last_issue: int = 0
    priority: int = 0
    reg_ready: dict = field(default_factory=dict)   # (file, index) -> (cycle, producer key, load or None)
    queues: dict = field(default_factory=lambda: {c: [] for c in COUNTERS})  # [(completion, out of order)]
    ended_at: int = -1
    back_edges: list = field(default_factory=list)  # (cycle, branch target address, MFMA flop so far)
    flops: int = 0


@dataclass
class WorkgroupTiming:
    """One workgroup's prediction: cycles from launch to its last wave's end (stores drained), its waves' loop
    back-edges, MFMA-pipe busy cycles per SIMD, the cycles its waves waited beyond their issue turn by cause
    (stalls) and, for each read of a load's registers before the modelled completion, (load mnemonic, cycles from the
    load's issue to the read): the latency the kernel's author counted on is at most that."""
    cycles: int
    wave_cycles: list                 # per wave: the cycle it ended (its stores drained)
    back_edges: list                  # per wave: [(cycle, target address, MFMA flop so far)]
    xdl_busy: list
    flops: int
    stalls: Counter
    early_reads: list


@dataclass
class TimedRun:
    stats: RunStats
    workgroups: list = field(default_factory=list)

    def tile_intervals(self, workgroup: int = 0, wave: int = 0):
        """[(cycles, MFMA flop)] between the successive back-edges of the wave's busiest loop (the branch target
        it jumps back to most often), the loop over KV tiles in an attention kernel."""
        edges = self.workgroups[workgroup].back_edges[wave]
        if not edges:
            return []
        target = Counter(t for _, t, _ in edges).most_common(1)[0][0]
        loop = [(c, f) for c, t, f in edges if t == target]
        return [(c1 - c0, f1 - f0) for (c0, f0), (c1, f1) in zip(loop, loop[1:])]

    def iteration_cycles(self, workgroup: int = 0, wave: int = 0) -> float:
        """Median cycles of the loop's iterations that ran MFMAs (the steady state of the KV loop)."""
        cycles = [c for c, f in self.tile_intervals(workgroup, wave) if f]
        if not cycles:
            raise EmulatorError("no loop iteration with MFMAs to time")
        return statistics.median(cycles)


class _Cu:
    """The shared state of one CU running one workgroup: pipes and the parameter values."""

    def __init__(self, params):
        self.p = {k: v.value for k, v in PARAMS.items()}
        unknown = set(params or ()) - set(self.p)
        if unknown:
            raise EmulatorError(f"unknown timing parameters {sorted(unknown)}")
        self.p.update(params or {})
        simds = int(self.p["simds_per_cu"])
        self.valu_free = [0] * simds
        self.xdl_free = [0] * simds
        self.xdl_busy = [0] * simds
        self.path_free = {"lds": 0, "vmem": 0}
        self.early_reads = []
        self.stalls = Counter()


def _reg_keys(op):
    return [(op.kind, op.base + i) for i in range(op.count)] if op.kind in "va" else []


def _operand_ready(cu, w, ins, kind):
    """Cycle when the registers ins reads are ready (MFMA / transcendental results; loads are not interlocked)."""
    ready = 0
    for i, op in enumerate(ins.ops):
        if i == 0 and kind in ("valu", "load"):
            continue
        same_c = ins.mnemonic.startswith("v_mfma") and i == 3
        for key in _reg_keys(op):
            entry = w.reg_ready.get(key)
            if entry is None or entry[2] is not None:
                continue
            cycle, producer, _ = entry
            if same_c and producer == (op.kind, op.base, op.count):
                continue            # back-to-back accumulation: the MFMA pipe orders it
            ready = max(ready, cycle)
    return ready


def _wait_ready(w, ins):
    """Cycle when the s_waitcnt's counts hold: in-order operations retire oldest first, scalar loads (out of
    order) only count as done for a count of 0."""
    ready = 0
    for name, limit in COUNTER_RE.findall(ins.raw):
        queue, limit = w.queues[name], int(limit)
        in_order = [c for c, ooo in queue if not ooo]
        must = [c for c, ooo in queue if ooo] if limit == 0 else []
        must += in_order[:max(0, len(in_order) - limit)]
        ready = max([ready] + must)
    return ready


def _earliest(cu, w, ins):
    """(earliest cycle ins can issue on wave w given the pipes and its dependences, the cause binding it)."""
    m = ins.mnemonic
    kind = "valu" if m.startswith("v_") else ("load" if _is_load(m) else "other")
    bounds = [(w.ready_at, w.held_by)]
    if m == "s_waitcnt":
        bounds.append((_wait_ready(w, ins), "s_waitcnt"))
    elif m.startswith("v_mfma"):
        bounds.append((cu.xdl_free[w.simd], "mfma pipe"))
    elif m.startswith("v_"):
        bounds.append((cu.valu_free[w.simd], "valu pipe"))
    bounds.append((_operand_ready(cu, w, ins, kind), "mfma/trans result"))
    return max(bounds, key=lambda b: b[0])


def _note_early_reads(cu, w, ins, now):
    for op in ins.ops[1:] if ins.mnemonic.startswith("v_") else ins.ops:
        for key in _reg_keys(op):
            entry = w.reg_ready.get(key)
            if entry is not None and entry[2] is not None and entry[0] > now:
                load, issued = entry[2]
                cu.early_reads.append((load, now - issued))
                return


def _issue_timing(cu, w, ins, now):
    """The pipes, results and counters ins occupies when it issues at `now`."""
    m, p = ins.mnemonic, cu.p
    _note_early_reads(cu, w, ins, now)
    if m.startswith("v_mfma"):
        passes = gfx950_hazards.mfma_passes(m)
        busy = passes * p["valu_cycles"]
        cu.xdl_free[w.simd] = now + busy
        cu.xdl_busy[w.simd] += busy
        dst = ins.ops[0]
        done = now + (passes + p["mfma_result_extra_passes"] + 1) * p["wait_state_cycles"]
        for key in _reg_keys(dst):
            w.reg_ready[key] = (done, (dst.kind, dst.base, dst.count), None)
        w.flops += mfma_flops(m)
    elif m.startswith("v_"):
        trans = bool(_TRANS.match(m))
        cycles = p["trans_cycles"] if trans else p["valu_cycles"]
        cu.valu_free[w.simd] = now + cycles
        for key in _reg_keys(ins.ops[0]) if ins.ops else ():
            if trans:
                w.reg_ready[key] = (now + cycles, None, None)
            else:
                w.reg_ready.pop(key, None)     # a VALU result is ready for the wave's next issue
    elif port(m) in ("lds", "vmem"):
        path = port(m)
        start = max(now, cu.path_free[path])
        cu.path_free[path] = start + LANES * lane_bytes(m) / p[f"{path}_bytes_per_cycle"]
        done = cu.path_free[path] + p[f"{path}_latency"]
        counter = "vmcnt" if path == "vmem" else "lgkmcnt"
        queue = w.queues[counter]
        in_order = [c for c, ooo in queue if not ooo]
        done = max([done] + in_order[-1:])
        queue.append((done, False))
        if _is_load(m) and ins.ops and not ins.mods.get("lds"):     # a load to LDS writes no VGPR
            for key in _reg_keys(ins.ops[0]):
                w.reg_ready[key] = (done, None, (m, now))
    elif port(m) == "smem":
        w.queues["lgkmcnt"].append((now + p["smem_latency"], True))
    elif m == "s_waitcnt":
        for name in COUNTERS:
            w.queues[name] = [(c, ooo) for c, ooo in w.queues[name] if c > now]
        for key in [k for k, v in w.reg_ready.items() if v[2] is not None and v[0] <= now]:
            del w.reg_ready[key]
    elif m == "s_nop":
        w.ready_at, w.held_by = now + (ins.ops[0].value + 1) * p["wait_state_cycles"], "s_nop"
    elif m == "s_sleep":
        w.ready_at, w.held_by = now + ins.ops[0].value * p["sleep_cycles_per_unit"], "s_sleep"
    elif m == "s_setprio":
        w.priority = ins.ops[0].value


def _run_timed_workgroup(kernel, waves, ctx, stats, max_steps, params):
    """Issues the waves cycle by cycle to their ends; returns the WorkgroupTiming."""
    cu = _Cu(params)
    simds = int(cu.p["simds_per_cu"])
    timed = [_Wave(s, s.wave_id % simds) for s in waves]
    instructions, counts, order = kernel.instructions, stats.instructions, waves[0].lds.order
    now, steps = 0, 0
    while True:
        simd = now % simds
        used_ports = set()
        for w in sorted((w for w in timed if w.simd == simd and not w.state.done and not w.state.at_barrier),
                        key=lambda w: (-w.priority, w.state.wave_id)):
            state = w.state
            if not 0 <= state.pc < len(instructions):
                raise EmulatorError(f"wave {state.wave_id} ran off the end of {kernel.name}")
            ins = instructions[state.pc]
            p = port(ins.mnemonic)
            earliest, cause = _earliest(cu, w, ins)
            if p in used_ports or earliest > now:
                continue
            used_ports.add(p)
            turn = w.last_issue + int(cu.p["valu_cycles"])
            if now > turn:     # waited beyond its next turn: for `cause` until earliest, then for its port
                late = max(0, min(now, int(-(-earliest // 1))) - turn)
                cu.stalls[cause] += late
                cu.stalls["arbitration"] += now - turn - late
            w.last_issue, w.held_by = now, "issue"
            _issue_timing(cu, w, ins, now)
            counts[ins.mnemonic] += 1
            pc = state.pc
            state.pc = execute(state, ins, ctx)
            state.waits.issued += 1 + (ins.ops[0].value if ins.mnemonic == "s_nop" else 0)
            steps += 1
            if state.pc != pc + 1 and is_branch(ins.mnemonic):
                w.ready_at, w.held_by = max(w.ready_at, now + int(cu.p["branch_cycles"])), "branch"
                if state.pc <= pc:
                    w.back_edges.append((now, instructions[state.pc].addr, w.flops))
            if state.done:
                state.waits.drop_lds_reads()
                w.ended_at = max([now] + [c for q in w.queues.values() for c, _ in q])
        live = [w for w in timed if not w.state.done]
        if not live:
            break
        if all(w.state.at_barrier for w in live):
            release = now + int(cu.p["barrier_cycles"])
            for w in live:
                w.state.at_barrier = False
                w.ready_at, w.held_by = max(w.ready_at, release), "s_barrier"
            order.barrier()
        if steps > max_steps:
            raise EmulatorError(f"{kernel.name}: more than {max_steps} instructions in one workgroup")
        now = _next_cycle(cu, timed, instructions, now, simds)
    return WorkgroupTiming(cycles=max(w.ended_at for w in timed), wave_cycles=[w.ended_at for w in timed],
                           back_edges=[w.back_edges for w in timed],
                           xdl_busy=cu.xdl_busy, flops=sum(w.flops for w in timed), stalls=cu.stalls,
                           early_reads=cu.early_reads)


def _next_cycle(cu, timed, instructions, now, simds):
    """The next cycle at which some wave may issue: its earliest, moved to its SIMD's next turn."""
    best = None
    for w in timed:
        if w.state.done or w.state.at_barrier:
            continue
        t = max(now + 1, int(-(-_earliest(cu, w, instructions[w.state.pc])[0] // 1)))
        t += (w.simd - t) % simds
        best = t if best is None else min(best, t)
    if best is None:
        raise EmulatorError("no wave can issue and none is at a barrier (timing model deadlock)")
    return best


def run_timed(code_object, name, grid, workgroup_size, kernarg: bytes, memory, params=None,
              max_steps: int = DEFAULT_MAX_STEPS, seed: int = 0, enforce_waits: bool = True) -> TimedRun:
    """run_kernel (run.py) in timing mode: the same arguments and functional results, the waves interleaved as the
    timing model issues them (each workgroup alone on a CU, from cycle 0). params: {name: value} over
    timing_params.PARAMS (calibration). Returns a TimedRun: the RunStats and a WorkgroupTiming per workgroup."""
    workgroups = []

    def run_workgroup(kernel, waves, ctx, stats):
        workgroups.append(_run_timed_workgroup(kernel, waves, ctx, stats, max_steps, params))
    stats = dispatch(code_object, name, grid, workgroup_size, kernarg, memory, seed, enforce_waits, run_workgroup)
    return TimedRun(stats, workgroups)
