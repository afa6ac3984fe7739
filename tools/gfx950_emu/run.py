"""Dispatch a kernel over a grid: entry register state, LDS, waves and s_barrier.

Entry state of each wave (AMDHSA ABI, as the descriptor enables it; anything else the
descriptor asks for is refused by KernelDescriptor.check_supported):
- s[0:1] = kernarg segment address (the only user SGPRs), then one SGPR per enabled
  workgroup id, x, y, z in that order (s2, s3, s4 when all three are enabled);
- v0 = workitem id: x in bits 0-9 (y and z, bits 10-19 / 20-29, are 0: workgroups are
  one-dimensional here);
- EXEC = the wave's lanes that exist (the last wave of a workgroup whose size is not a
  multiple of 64 is partial); every other register, and the LDS, holds random bits (they are
  undefined at launch).

Timing-adversarial schedule: a generator seeded by run_kernel's `seed` picks which wave runs
next and for how many instructions (1 to 256, log-uniform), so waves drift apart between
barriers in a different order for every seed; memory results land at the latest point the
wait counters allow (waitcnt.py) and LDS accesses of different waves must be ordered by a
wait and a barrier (lds_order.py). A wave at s_barrier waits until every wave that has not
ended is at the barrier. Workgroups run one after another, each with fresh LDS of the
descriptor's group segment size.
"""
import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .errors import EmulatorError
from .isa import execute
from .lds_banks import LdsBanks
from .memory import LocalMemory
from .operands import SGPR_EXEC
from .state import LANES, WaveState
from . import isa_buffer, isa_dpp, isa_memory, isa_scalar, isa_vector, mfma  # noqa: F401  (register semantics)

MAX_WORKGROUP_SIZE = 1024
LDS_BYTES_PER_CU = 160 * 1024
DEFAULT_MAX_STEPS = 50_000_000
_BURST_LOG2_LIMIT = 9   # a wave runs 2^k instructions in a row, k uniform in 0..8


@dataclass
class ExecContext:
    """What instructions reach beyond the wave: global memory (LDS hangs off each wave), and the LDS bank model
    that LDS instructions report their lanes' addresses to."""
    memory: object
    lds_banks: LdsBanks = field(default_factory=LdsBanks)


@dataclass
class RunStats:
    """Counts of one dispatch: instructions executed per mnemonic (over all waves); lds: the bank-conflict
    model's counts per LDS instruction (lds_banks.py); early_uses: with enforce_waits=False, the register uses
    before the wait for their load, per (load address, use address, counter) (waitcnt.py)."""
    instructions: Counter = field(default_factory=Counter)
    workgroups: int = 0
    waves: int = 0
    lds: LdsBanks = field(default_factory=LdsBanks)
    early_uses: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        """All instructions executed."""
        return sum(self.instructions.values())


def _initial_waves(kernel, workgroup_size, wg_id, kernarg_addr, lds, garbage, enforce_waits):
    kd = kernel.descriptor
    waves = []
    for w in range((workgroup_size + LANES - 1) // LANES):
        wave = WaveState(kd, w, lds, enforce_waits)
        wave.sgpr[:] = garbage.integers(0, 1 << 32, wave.sgpr.shape, dtype=np.uint32)
        wave.vgpr[:] = garbage.integers(0, 1 << 32, wave.vgpr.shape, dtype=np.uint32)
        wave.agpr[:] = garbage.integers(0, 1 << 32, wave.agpr.shape, dtype=np.uint32)
        wave.scc = int(garbage.integers(2))
        wave.sgpr[0] = kernarg_addr & 0xFFFFFFFF
        wave.sgpr[1] = kernarg_addr >> 32
        sgpr = 2
        for dim in range(3):
            if kd.workgroup_id_enable[dim]:
                wave.sgpr[sgpr] = wg_id[dim]
                sgpr += 1
        lanes = min(LANES, workgroup_size - w * LANES)
        exec_bits = (1 << lanes) - 1
        wave.sgpr[SGPR_EXEC] = exec_bits & 0xFFFFFFFF
        wave.sgpr[SGPR_EXEC + 1] = exec_bits >> 32
        wave.vgpr[0] = w * LANES + np.arange(LANES)
        waves.append(wave)
    return waves


class _Lockstep:
    """The schedule of code that relies on latency (enforce_waits=False): the waves one instruction each in
    turn, as they issue on hardware, rather than a random interleaving its missing waits cannot survive."""

    def __init__(self):
        self.turn = -1

    def pick(self, runnable):
        self.turn += 1
        return runnable[self.turn % len(runnable)]

    @staticmethod
    def burst():
        return 1


class _Adversarial:
    """A seeded random interleaving: a random runnable wave runs 2^k instructions in a row, k uniform in
    0.._BURST_LOG2_LIMIT - 1."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def pick(self, runnable):
        return runnable[self.rng.randrange(len(runnable))]

    def burst(self):
        return 1 << self.rng.randrange(_BURST_LOG2_LIMIT)


def _run_workgroup(kernel, waves, ctx, stats, max_steps, schedule):
    """Runs the waves to their ends in the order `schedule` (_Adversarial or _Lockstep) picks; max_steps
    bounds the instructions of the workgroup."""
    instructions = kernel.instructions
    counts = stats.instructions
    order = waves[0].lds.order
    steps = 0
    while True:
        runnable = [w for w in waves if not w.done and not w.at_barrier]
        if not runnable:
            live = [w for w in waves if not w.done]
            if not live:
                return
            for w in live:
                w.at_barrier = False
            order.barrier()
            continue
        wave = schedule.pick(runnable)
        for _ in range(schedule.burst()):
            if not 0 <= wave.pc < len(instructions):
                raise EmulatorError(f"wave {wave.wave_id} ran off the end of {kernel.name}")
            ins = instructions[wave.pc]
            counts[ins.mnemonic] += 1
            wave.pc = execute(wave, ins, ctx)
            wave.waits.issued += 1 + (ins.ops[0].value if ins.mnemonic == "s_nop" else 0)
            steps += 1
            if wave.done:
                wave.waits.drop_lds_reads()
                break
            if wave.at_barrier:
                break
        if steps > max_steps:
            raise EmulatorError(f"{kernel.name}: more than {max_steps} instructions in one workgroup "
                                "(an endless loop?)")


def run_kernel(code_object, name, grid, workgroup_size, kernarg: bytes, memory,
               max_steps: int = DEFAULT_MAX_STEPS, seed: int = 0, enforce_waits: bool = True) -> RunStats:
    """Run kernel `name` of `code_object` over `grid` (x, y, z workgroups) of
    `workgroup_size` work-items, with `kernarg` bytes as its argument segment, reading and
    writing `memory` (a GlobalMemory). `seed` picks the wave interleaving and the undefined
    contents of registers and LDS at launch. Returns RunStats. EmulatorError on any fault,
    with the seed, workgroup and wave it happened in. enforce_waits=False records a register
    used before its load's wait in RunStats.early_uses and lets the load land there instead of
    failing, runs the waves in lockstep and leaves their LDS accesses unordered by the race model
    (code that relies on latency, such as AMD's aiter kernels: what it checks is their arithmetic)."""
    schedule = _Adversarial(seed) if enforce_waits else _Lockstep()
    return dispatch(code_object, name, grid, workgroup_size, kernarg, memory, seed, enforce_waits,
                    lambda kernel, waves, ctx, stats: _run_workgroup(kernel, waves, ctx, stats, max_steps, schedule))


def dispatch(code_object, name, grid, workgroup_size, kernarg: bytes, memory, seed: int, enforce_waits: bool,
             run_workgroup) -> RunStats:
    """The launch run_kernel describes, each workgroup's waves (fresh LDS, entry state) handed to
    run_workgroup(kernel, waves, ctx, stats), which runs them to their ends (run_kernel's schedules, or
    timing.py's cycle model)."""
    kernel = code_object.kernel(name)
    kd = kernel.descriptor
    kd.check_supported(name)
    if kd.kernarg_bytes and len(kernarg) != kd.kernarg_bytes:
        raise EmulatorError(f"{name}: kernarg is {len(kernarg)} bytes, the descriptor says "
                            f"{kd.kernarg_bytes}")
    if not 0 < workgroup_size <= MAX_WORKGROUP_SIZE:
        raise EmulatorError(f"{name}: workgroup size {workgroup_size} outside 1..1024")
    if kd.lds_bytes > LDS_BYTES_PER_CU:
        raise EmulatorError(f"{name}: {kd.lds_bytes} bytes of LDS exceed {LDS_BYTES_PER_CU}")
    grid = tuple(grid) + (1,) * (3 - len(grid))
    kernarg_addr = memory.alloc_bytes(kernarg)
    stats = RunStats()
    ctx = ExecContext(memory, stats.lds)
    garbage = np.random.default_rng(seed)
    n_waves = (workgroup_size + LANES - 1) // LANES
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                lds = LocalMemory(kd.lds_bytes, n_waves, garbage)
                waves = _initial_waves(kernel, workgroup_size, (x, y, z), kernarg_addr, lds, garbage,
                                       enforce_waits)
                stats.workgroups += 1
                stats.waves += len(waves)
                try:
                    run_workgroup(kernel, waves, ctx, stats)
                except EmulatorError as e:
                    waiting = [w.wave_id for w in waves if not w.done]
                    raise EmulatorError(f"seed {seed}, workgroup ({x}, {y}, {z}), waves not ended "
                                        f"{waiting}: {e}") from e
                for wave in waves:
                    stats.early_uses.update((load.addr, use.addr, counter)
                                            for load, use, counter in wave.waits.early_uses)
    return stats
