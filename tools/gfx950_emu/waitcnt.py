"""A model of the s_waitcnt counters that flags registers used before their load landed.

In the emulator every memory access completes when it issues, but the kernel is only
correct on hardware if it waits (s_waitcnt) before touching a register a load writes.
Each wave keeps the outstanding operations per counter, oldest first:

- vmcnt: global loads and stores (vector memory; they return in issue order);
- lgkmcnt: LDS operations (in order) and scalar memory loads (s_load_*, which may return
  out of order, so one is only known complete after `lgkmcnt(0)`).

`s_waitcnt vmcnt(N)` retires the oldest operations until at most N remain; the same for
lgkmcnt, except that scalar loads are retired only by lgkmcnt(0). While an operation is
outstanding, reading or writing any register it loads raises EmulatorError naming both
instructions. Stores have no destination; they only count.

With enforce=False such a use is recorded in `early_uses` (load, use) instead: hand-scheduled code
may rely on a load's latency rather than a wait (AMD's aiter kernels read some LDS loads after a
stretch of MFMAs with no lgkmcnt wait); the emulator's loads complete at issue, so it then runs on.
"""
import re
from collections import deque

from .errors import EmulatorError, at

_COUNTER_RE = re.compile(r"(vmcnt|expcnt|lgkmcnt)\((\d+)\)")


class PendingOp:
    """One outstanding memory operation: its instruction and destination registers."""

    def __init__(self, ins, regs, out_of_order: bool):
        self.ins = ins
        self.regs = regs
        self.out_of_order = out_of_order


class WaitCounters:
    """Outstanding vm / lgkm operations of one wave and the registers they will write."""

    def __init__(self, enforce: bool = True):
        self.queues = {"vmcnt": deque(), "lgkmcnt": deque()}
        self.pending = {}   # (file, index) -> PendingOp
        self.enforce = enforce
        self.early_uses = []    # (load Instruction, use Instruction, counter) when not enforced

    def issue(self, counter: str, ins, regs=(), out_of_order: bool = False):
        """Record a memory op on `counter` that loads `regs` ((file, index) pairs)."""
        op = PendingOp(ins, tuple(regs), out_of_order)
        self.queues[counter].append(op)
        for r in op.regs:
            self.pending[r] = op

    def check(self, regs, ins, verb: str):
        """EmulatorError if any of regs is still being loaded by an outstanding op."""
        for r in regs:
            op = self.pending.get(r)
            if op is not None and not self.enforce:
                counter = next(name for name, queue in self.queues.items() if op in queue)
                self.early_uses.append((op.ins, ins, counter))
                for reg in op.regs:
                    if self.pending.get(reg) is op:
                        del self.pending[reg]
            elif op is not None:
                raise EmulatorError(
                    f"{r[0]}{r[1]} {verb} by {at(ins)} before an s_waitcnt for the load "
                    f"{at(op.ins)} that writes it")

    def wait(self, ins):
        """Apply `s_waitcnt` with the counters its text names (others: no wait)."""
        for name, value in _COUNTER_RE.findall(ins.raw):
            if name in self.queues:
                self._retire(self.queues[name], int(value))

    def _retire(self, queue: deque, limit: int):
        keep = deque()
        while len(queue) + len(keep) > limit and queue:
            op = queue.popleft()
            if op.out_of_order and limit > 0:
                keep.append(op)
                continue
            for r in op.regs:
                if self.pending.get(r) is op:
                    del self.pending[r]
        queue.extendleft(reversed(keep))
