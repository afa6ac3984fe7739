"""Global memory (byte-addressed allocations) and per-workgroup LDS.

LDS starts with the bytes a seeded generator gives (its contents at launch are undefined on
hardware) and carries the ordering model of its accesses (lds_order.py).

GlobalMemory hands out allocations at 256-byte-aligned addresses separated by 64 KiB
guard gaps, so an access that runs off the end of one buffer lands in no allocation and
is reported (with the instruction) instead of silently reading a neighbour. Accesses are
vectorised over lanes: `gather(addrs, nbytes)` reads `nbytes` at each address,
`scatter` writes them; every byte of every access must lie inside one allocation.
"""
import bisect

import numpy as np

from .errors import EmulatorError
from .lds_order import LdsOrder

_BASE = 0x10_0000_0000
_ALIGN = 256
_GUARD = 64 * 1024


class GlobalMemory:
    """A set of allocations in a flat 64-bit address space (what the kernel sees as global)."""

    def __init__(self):
        self._bases = []
        self._buffers = []
        self._next = _BASE

    def alloc(self, nbytes: int) -> int:
        """A zero-filled allocation of nbytes; returns its address."""
        addr = self._next
        self._bases.append(addr)
        self._buffers.append(np.zeros(max(int(nbytes), 1), np.uint8))
        self._next = (addr + int(nbytes) + _GUARD + _ALIGN - 1) // _ALIGN * _ALIGN
        return addr

    def alloc_array(self, array) -> int:
        """An allocation holding a copy of array's bytes (C order); returns its address."""
        data = np.ascontiguousarray(array)
        addr = self.alloc(data.nbytes)
        self.write(addr, data)
        return addr

    def alloc_bytes(self, data: bytes) -> int:
        """An allocation holding `data`; returns its address."""
        return self.alloc_array(np.frombuffer(bytes(data), np.uint8))

    def _locate(self, addr: int, nbytes: int, what: str):
        i = bisect.bisect_right(self._bases, addr) - 1
        if i < 0 or addr + nbytes > self._bases[i] + self._buffers[i].size:
            raise EmulatorError(f"{what}: global access of {nbytes} bytes at 0x{addr:x} "
                                "is outside every allocation")
        return self._buffers[i], addr - self._bases[i]

    def read(self, addr: int, dtype, shape) -> np.ndarray:
        """A copy of the array of `dtype` and `shape` stored at addr."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        buf, off = self._locate(addr, count * dtype.itemsize, "read")
        return buf[off:off + count * dtype.itemsize].view(dtype).reshape(shape).copy()

    def write(self, addr: int, array):
        """Store array's bytes at addr."""
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        buf, off = self._locate(addr, data.size, "write")
        buf[off:off + data.size] = data

    def _groups(self, addrs: np.ndarray, nbytes: int, what: str):
        """(lane selection, buffer, byte offsets) per allocation that addrs touch."""
        addrs = addrs.astype(np.uint64)
        which = np.searchsorted(np.array(self._bases, np.uint64), addrs, side="right") - 1
        for i in np.unique(which).tolist():
            sel = which == i
            if i < 0 or int(addrs[sel].max()) + nbytes > self._bases[i] + self._buffers[i].size:
                bad = [int(a) for a in addrs[sel]
                       if i < 0 or a + nbytes > self._bases[i] + self._buffers[i].size][0]
                raise EmulatorError(f"{what}: global access of {nbytes} bytes at 0x{bad:x} "
                                    "is outside every allocation")
            yield sel, self._buffers[i], (addrs[sel] - np.uint64(self._bases[i])).astype(np.int64)

    def gather(self, addrs: np.ndarray, nbytes: int, what: str) -> np.ndarray:
        """Bytes [len(addrs), nbytes] read at each address of addrs (uint64)."""
        out = np.empty((addrs.size, nbytes), np.uint8)
        for sel, buf, offs in self._groups(addrs, nbytes, what):
            out[sel] = buf[offs[:, None] + np.arange(nbytes)]
        return out

    def scatter(self, addrs: np.ndarray, data: np.ndarray, what: str):
        """Write data[i] (uint8 rows) at addrs[i]; where lanes overlap the last lane wins."""
        nbytes = data.shape[1]
        for sel, buf, offs in self._groups(addrs, nbytes, what):
            buf[offs[:, None] + np.arange(nbytes)] = data[sel]


class LocalMemory:
    """One workgroup's LDS: `size` bytes, addressed from 0, shared by `waves` waves; `rng` (a numpy
    Generator) fills it, zeros without one."""

    def __init__(self, size: int, waves: int = 1, rng=None):
        self.size = size
        self.data = np.zeros(max(size, 1), np.uint8) if rng is None else \
            rng.integers(0, 256, max(size, 1), dtype=np.uint8)
        self.order = LdsOrder(size, waves)

    def _check(self, addrs: np.ndarray, nbytes: int, what: str):
        if addrs.size and (int(addrs.max()) + nbytes > self.size or int(addrs.min()) < 0):
            bad = [int(a) for a in addrs if a + nbytes > self.size or a < 0][0]
            raise EmulatorError(f"{what}: LDS access of {nbytes} bytes at 0x{bad:x} is "
                                f"outside the workgroup's {self.size} bytes of LDS")

    def gather(self, addrs: np.ndarray, nbytes: int, what: str) -> np.ndarray:
        """Bytes [len(addrs), nbytes] read at each LDS address."""
        addrs = addrs.astype(np.int64)
        self._check(addrs, nbytes, what)
        return self.data[addrs[:, None] + np.arange(nbytes)]

    def scatter(self, addrs: np.ndarray, data: np.ndarray, what: str):
        """Write data[i] at LDS address addrs[i]; where lanes overlap the last lane wins."""
        addrs = addrs.astype(np.int64)
        self._check(addrs, data.shape[1], what)
        self.data[addrs[:, None] + np.arange(data.shape[1])] = data
