"""Which LDS accesses of a workgroup's waves are ordered, and the races between those that are not.

A wave's own LDS accesses take effect in its program order (LLVM's AMDGPUUsage, "Memory Model
GFX942": LDS operations are performed in one global order and complete in execution order), so
a wave may read back what it wrote without waiting; but a load straight to LDS (on vmcnt) may
land out of that order (LLVM's memory model inserts vmcnt(0) for it), so against one of those
the wave's own accesses too must wait for completion. Between waves, an access A of wave X is
ordered before an access B of wave Y only when X's s_waitcnt covering A (lgkmcnt; vmcnt for a
load to LDS) has passed and then an s_barrier was released that X reached (or ended before)
and Y passed before B. Any byte that two waves touch, one of them writing, without that order
is a race and an EmulatorError naming both instructions and waves and the LDS address:

- a read of a byte whose last write (of another wave) is not ordered before it;
- a write of a byte whose last write, or last read by any other wave, is not ordered before it.

Bookkeeping, vectorized per access: each access gets an id; per LDS byte the id of its last
write, per wave and byte the id of that wave's last read; per id the wave, the instruction and
`done_at`, the barrier generation (barriers released so far) in which the access completed, or
NEVER while outstanding. An access is ordered before a later one of another wave iff its
done_at is below the current generation. Id 0 stands for the contents at launch.
"""
import numpy as np

from .errors import EmulatorError, at

NEVER = np.iinfo(np.int64).max


class LdsOrder:
    """Happens-before of the LDS accesses of one workgroup's `waves` waves over `size` bytes."""

    def __init__(self, size: int, waves: int):
        self.generation = 0
        self.last_write = np.zeros(max(size, 1), np.int32)
        self.last_read = np.zeros((waves, max(size, 1)), np.int32)
        self.done_at = np.full(256, NEVER, np.int64)
        self.wave = np.full(256, -1, np.int64)
        self.in_lds_order = np.ones(256, bool)   # per id: issued on lgkmcnt (in the wave's LDS order)
        self.done_at[0] = -1
        self.info = [(None, "", False)]   # per id: (instruction, counter, is a read)

    def barrier(self):
        """An s_barrier was released."""
        self.generation += 1

    def _new(self, wave_id, ins, counter, is_read) -> int:
        access = len(self.info)
        if access == self.done_at.size:
            self.done_at = np.concatenate([self.done_at, np.full(access, NEVER, np.int64)])
            self.wave = np.concatenate([self.wave, np.full(access, -1, np.int64)])
            self.in_lds_order = np.concatenate([self.in_lds_order, np.ones(access, bool)])
        self.wave[access] = wave_id
        self.in_lds_order[access] = counter == "lgkmcnt"
        self.info.append((ins, counter, is_read))
        return access

    def retire(self, access: int):
        """The wave's s_waitcnt guarantees the access complete."""
        self.done_at[access] = self.generation

    def forget_read(self, access: int):
        """A read whose wave ended: it delivers to no one, so no write can overtake it."""
        if self.info[access][2]:
            self.done_at[access] = -1

    def _unordered(self, ids, wave_id, in_lds_order):
        """bool mask: accesses `ids` not ordered before a new access of wave_id (`in_lds_order`: on lgkmcnt)."""
        done_at, own = self.done_at[ids], self.wave[ids] == wave_id
        bad = (done_at >= self.generation) & ~own
        if not (in_lds_order and self.in_lds_order[ids[own]].all()):
            bad |= own & ~(self.in_lds_order[ids] & in_lds_order) & (done_at == NEVER)
        return bad

    def _race(self, kind, wave_id, ins, byte, other):
        other_ins, counter, _ = self.info[other]
        why = ("its wave has not yet passed an s_waitcnt " + counter + " covering it"
               if self.done_at[other] == NEVER else "no s_barrier since its wave's s_waitcnt covering it")
        raise EmulatorError(
            f"LDS race at byte 0x{byte:x}: {at(ins)} in wave {wave_id} {kind} "
            f"{at(other_ins)} in wave {int(self.wave[other])} ({why})")

    def read(self, wave_id: int, ins, counter: str, byte_addrs: np.ndarray) -> int:
        """Check and record a read of `byte_addrs` (int64, any shape); returns its access id."""
        writes = self.last_write[byte_addrs]
        bad = self._unordered(writes, wave_id, counter == "lgkmcnt")
        if bad.any():
            j = np.flatnonzero(bad.ravel())[0]
            self._race("reads what is written by", wave_id, ins, int(byte_addrs.ravel()[j]), int(writes.ravel()[j]))
        access = self._new(wave_id, ins, counter, True)
        self.last_read[wave_id, byte_addrs] = access
        return access

    def write(self, wave_id: int, ins, counter: str, byte_addrs: np.ndarray) -> int:
        """Check and record a write of `byte_addrs`; returns its access id."""
        flat = byte_addrs.ravel()
        in_lds_order = counter == "lgkmcnt"
        writes = self.last_write[flat]
        bad = self._unordered(writes, wave_id, in_lds_order)
        if bad.any():
            j = np.flatnonzero(bad)[0]
            self._race("overwrites what is written by", wave_id, ins, int(flat[j]), int(writes[j]))
        reads = self.last_read[:, flat]
        bad = self.done_at[reads] >= self.generation
        own = reads[wave_id]
        bad[wave_id] = ~(self.in_lds_order[own] & in_lds_order) & (self.done_at[own] == NEVER)
        if bad.any():
            w, j = np.argwhere(bad)[0]
            self._race("overwrites what is still read by", wave_id, ins, int(flat[j]), int(reads[w, j]))
        access = self._new(wave_id, ins, counter, False)
        self.last_write[flat] = access
        return access
