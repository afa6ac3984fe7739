"""The s_waitcnt counters: a memory operation completes at the latest point its counter allows.

A memory instruction issues an operation on a counter (WaitCounters.issue); what it loads is
not written at issue but kept in the operation (PendingOp.defer) and written when the wave's
s_waitcnt first guarantees completion; an LDS access it makes is likewise only retired then
(lds_order.py). Which operations a wait guarantees, gfx9 / CDNA rules (LLVM's AMDGPUUsage,
"Memory Model GFX942": vector memory and LDS completion is reported to a wave in execution
order, scalar memory completion out of order):

- vmcnt (global loads and stores, loads to LDS): in issue order, so `vmcnt(N)` retires the
  oldest until N remain;
- lgkmcnt (LDS operations in order, scalar loads in any order): `lgkmcnt(N)` leaves at most N
  outstanding, which may be any scalar loads plus the youngest LDS operations, so it retires
  the oldest LDS operations until N remain and a scalar load only at `lgkmcnt(0)`;
- expcnt: exports and GDS, which these kernels do not issue. A vector memory store needs no
  counter before its data VGPRs are overwritten: gfx9 reads them as the store issues, except
  that a store of more than 64 bits may still read them for STORE_DATA_WAIT_STATES wait
  states after issue on gfx940 and later (LLVM's GCNHazardRecognizer::checkVALUHazards, the
  hazard the ISA guides list under "Manually inserted wait states": VMEM store of more than
  64 bits followed by a VALU write of its data VGPRs). A VALU write within them is an error;
  run.py counts a wave's wait states (`issued`: one per instruction, N + 1 per s_nop N).

While an operation is outstanding, reading a register it loads, or writing it other than by a
later load on the same in-order counter, is an EmulatorError naming the register, the wave and
both instructions (text and address). Registers are tracked as bitmasks per file so that the
check on every operand is one shift.

With enforce=False such a read or write is recorded in `early_uses` (load, use, counter) and the
load completes there instead: hand-scheduled code may rely on a load's latency rather than a wait
(AMD's aiter kernels read some LDS loads after a stretch of MFMAs with no lgkmcnt wait).
"""
import re
from collections import deque

from .errors import EmulatorError, at

COUNTER_RE = re.compile(r"(vmcnt|expcnt|lgkmcnt)\((\d+)\)")
COUNTERS = ("vmcnt", "lgkmcnt", "expcnt")
STORE_DATA_WAIT_STATES = 2


class PendingOp:
    """One outstanding memory operation: its instruction, counter, the registers it loads
    ((file, index) pairs), the writes it makes at completion and the LDS accesses it retires."""

    def __init__(self, ins, counter: str, out_of_order: bool):
        self.ins = ins
        self.counter = counter
        self.out_of_order = out_of_order
        self.regs = ()
        self.writes = []        # (register array, first index, values, bits): applied at completion
        self.lds_retires = []   # (LdsOrder, access id): retired at completion

    def defer(self, array, first: int, values, bits):
        """At completion: array[first:first + len(values)] takes `values` where `bits` are set."""
        self.writes.append((array, first, values, bits))

    def complete(self):
        for array, first, values, bits in self.writes:
            block = array[first:first + len(values)]
            block[:] = (block & ~bits) | (values & bits)
        for order, access in self.lds_retires:
            order.retire(access)


class WaitCounters:
    """Outstanding operations of one wave per counter, oldest first, and the registers they load."""

    def __init__(self, wave_id: int = 0, enforce: bool = True):
        self.wave_id = wave_id
        self.enforce = enforce
        self.early_uses = []                    # (load Instruction, use Instruction, counter) when not enforced
        self.queues = {c: deque() for c in COUNTERS}
        self.busy = {"v": 0, "a": 0, "s": 0}   # file -> bitmask of registers an outstanding op loads
        self.owner = {}                         # (file, index) -> the youngest op loading it
        self.issued = 0                         # wait states the wave has issued
        self.held = []                          # (file, bitmask, issued count it ends at, store)

    def issue(self, counter: str, ins, regs=(), out_of_order: bool = False) -> PendingOp:
        """Record an operation on `counter`; `regs`: (file, index) pairs it loads. Returns it, for
        PendingOp.defer and WaitCounters.claim."""
        op = PendingOp(ins, counter, out_of_order)
        self.queues[counter].append(op)
        if regs:
            self.claim(op, regs)
        return op

    def claim(self, op: PendingOp, regs):
        """Mark `regs` as loaded by op. A register an outstanding load already writes may only be
        loaded again through the same in-order counter (both land in issue order)."""
        for r in regs:
            prior = self.owner.get(r)
            if prior is not None and prior is not op and (
                    prior.counter != op.counter or prior.out_of_order or op.out_of_order):
                raise EmulatorError(
                    f"{r[0]}{r[1]} loaded by {at(op.ins)} in wave {self.wave_id} while the load "
                    f"{at(prior.ins)} ({prior.counter}) that writes it is outstanding: they may land "
                    "in either order")
            self.owner[r] = op
            self.busy[r[0]] |= 1 << r[1]
        op.regs = tuple(op.regs) + tuple(regs)

    def check(self, kind: str, base: int, count: int, ins, verb: str):
        """EmulatorError if a register of kind[base:base + count] is loaded by an outstanding op."""
        if not (self.busy.get(kind, 0) >> base) & ((1 << count) - 1):
            return
        for i in range(base, base + count):
            op = self.owner.get((kind, i))
            if op is not None and not self.enforce:
                self.early_uses.append((op.ins, ins, op.counter))
                self.queues[op.counter].remove(op)
                self._complete(op)
            elif op is not None:
                raise EmulatorError(
                    f"{kind}{i} {verb} by {at(ins)} in wave {self.wave_id} before an s_waitcnt "
                    f"guarantees the load {at(op.ins)} that writes it ({op.counter})")

    def hold_store_data(self, ins, kind: str, base: int, count: int):
        """A store of more than 64 bits issued now reads kind[base:base + count] for a while."""
        self.held.append((kind, ((1 << count) - 1) << base, self.issued + 1 + STORE_DATA_WAIT_STATES, ins))

    def check_store_data(self, kind: str, base: int, count: int, ins):
        """EmulatorError if a VALU write of kind[base:base + count] comes too soon after a store reading it."""
        self.held = [h for h in self.held if h[2] > self.issued]
        for file, mask, until, store in self.held:
            if file == kind and (mask >> base) & ((1 << count) - 1):
                raise EmulatorError(
                    f"{at(ins)} in wave {self.wave_id} writes data VGPRs of the store {at(store)} "
                    f"{STORE_DATA_WAIT_STATES - (until - self.issued)} wait states after it; a store of "
                    f"more than 64 bits needs {STORE_DATA_WAIT_STATES}")

    def wait(self, ins):
        """Apply `s_waitcnt` with the counters its text names (others: no wait)."""
        for name, value in COUNTER_RE.findall(ins.raw):
            self._retire(self.queues[name], int(value))

    def _retire(self, queue: deque, limit: int):
        in_order = sum(not op.out_of_order for op in queue)
        keep = deque()
        while queue and (limit == 0 or in_order > limit):
            op = queue.popleft()
            if op.out_of_order and limit > 0:
                keep.append(op)
                continue
            in_order -= not op.out_of_order
            self._complete(op)
        queue.extendleft(reversed(keep))

    def _complete(self, op: PendingOp):
        op.complete()
        for r in op.regs:
            if self.owner.get(r) is op:
                del self.owner[r]
                self.busy[r[0]] &= ~(1 << r[1])

    def drop_lds_reads(self):
        """At s_endpgm: the wave's LDS reads still in flight deliver to no one, so they stop
        counting as reads that a later write of another wave could overtake."""
        for queue in self.queues.values():
            for op in queue:
                for order, access in op.lds_retires:
                    order.forget_read(access)
