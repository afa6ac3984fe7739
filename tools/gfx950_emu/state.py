"""The architectural state of one wave64 and typed access to its operands.

Register files (all uint32 bit patterns):
- SGPRs: 128 entries indexed by their hardware operand number: s0-s101, VCC at 106-107,
  M0 at 124, EXEC at 126-127 (operands.py maps the names), so `s[a:b]`, `vcc` and `exec`
  are all plain ranges;
- VGPRs v0-v255 and AGPRs a0-a255 as views of one unified file [768, 64 lanes], as the
  hardware's unified 512-entry file: v_i is entry i, a_i entry accum_offset + i, so a VGPR
  at or above accum_offset is the same register as an AGPR (kernels without AGPRs use the
  whole allocation as VGPRs, e.g. AMD's aiter fmha hd128). A register at or beyond the
  descriptor's allocation (arch + acc VGPRs, granule-rounded) is an error, and so is one
  entry reached both as a VGPR and as an AGPR in a wave (legal, but never what a kernel means);
- SCC as an int; PC as an instruction index.

Vector writes honour EXEC (inactive lanes keep their value). Floating-point reads apply
the VOP3 neg/abs modifiers, and the descriptor's FLOAT_DENORM_MODE_32: inputs flushed to
±0 unless the mode preserves input denormals, results likewise for outputs.

Memory instructions complete at the latest point the wait counters allow (waitcnt.py). A
semantics function for a memory instruction issues one operation and hands it what it loads:

    op = wave.issue("vmcnt", ins)                          # or "lgkmcnt"; out_of_order=True for SMEM
    wave.defer_vgpr_write(op, dst, values, ins, lanes)     # VGPR/AGPR dst = values ([count, 64]) at
                                                           # the s_waitcnt that guarantees op;
                                                           # bits=0xFFFF: only bits 15:0 (d16 loads)
    wave.defer_sgpr_write(op, dst, value, ins)             # SGPR dst (an unsigned int), likewise
    data = wave.lds_read(op, ins, addrs, nbytes)           # LDS bytes [lanes, nbytes], race-checked
    wave.lds_write(op, ins, addrs, data)                   # LDS write (a load to LDS: op on vmcnt)

A store only counts: `wave.issue("vmcnt", ins)`. Reading or overwriting a register before the
s_waitcnt that guarantees its load is an EmulatorError; LDS ordering between waves is
lds_order.py's.
"""
import numpy as np

from .errors import EmulatorError, at
from .operands import SGPR_EXEC
from .waitcnt import PendingOp, WaitCounters

LANES = 64
NUM_SGPRS = 128
NUM_VGPRS = 256
_F32_MIN_NORMAL = np.float32(1.17549435e-38)


_MASKS = {}   # lane mask bits -> its read-only bool[64] (EXEC takes few values in a kernel)
_MASKS_LIMIT = 4096


def bits_to_mask(bits: int) -> np.ndarray:
    """64-bit lane mask -> bool[64] (lane i = bit i), read-only."""
    mask = _MASKS.get(bits)
    if mask is None:
        mask = np.unpackbits(np.array([bits], "<u8").view(np.uint8), bitorder="little").astype(bool)
        mask.setflags(write=False)
        if len(_MASKS) < _MASKS_LIMIT:
            _MASKS[bits] = mask
    return mask


def mask_to_bits(mask: np.ndarray) -> int:
    """bool[64] -> 64-bit lane mask."""
    return int(np.packbits(mask.astype(np.uint8), bitorder="little").view("<u8")[0])


def flush_denormals(x: np.ndarray) -> np.ndarray:
    """float32 array with denormals replaced by zeros of the same sign."""
    return np.where(np.abs(x) < _F32_MIN_NORMAL, np.copysign(np.float32(0), x), x).astype(np.float32)


class WaveState:
    """Registers, PC and wait counters of one wave; `wave_id` is its index in the workgroup."""

    def __init__(self, descriptor, wave_id: int, lds, enforce_waits: bool = True):
        self.sgpr = np.zeros(NUM_SGPRS, np.uint32)
        unified = np.zeros((3 * NUM_VGPRS, LANES), np.uint32)
        self.vgpr = unified[:NUM_VGPRS]
        self.agpr = unified[descriptor.accum_offset:descriptor.accum_offset + NUM_VGPRS]
        self.scc = 0
        self.pc = 0
        self.wave_id = wave_id
        self.lds = lds
        self.done = False
        self.at_barrier = False
        self.waits = WaitCounters(wave_id, enforce_waits)
        self.num_vgprs = min(descriptor.vgprs, NUM_VGPRS)
        self.num_agprs = descriptor.agprs
        self.accum_offset = descriptor.accum_offset
        self._aliased_by = {}    # unified entry at or above accum_offset -> the view ('v' / 'a') that used it
        self.flush_in = descriptor.denorm_mode_32 in (0, 2)
        self.flush_out = descriptor.denorm_mode_32 in (0, 1)
        self.flush_out_16 = descriptor.denorm_mode_16_64 in (0, 1)
        self.dx10_clamp = descriptor.dx10_clamp

    # ---- EXEC ---------------------------------------------------------------------
    @property
    def exec_bits(self) -> int:
        return int(self.sgpr[SGPR_EXEC]) | (int(self.sgpr[SGPR_EXEC + 1]) << 32)

    def exec_mask(self) -> np.ndarray:
        """bool[64]: the lanes EXEC enables."""
        return bits_to_mask(self.exec_bits)

    # ---- register bookkeeping -------------------------------------------------------
    def _file(self, op, ins):
        if op.kind == "v":
            if op.base + op.count > self.num_vgprs:
                raise EmulatorError(f"{op.text} in {at(ins)} is beyond the kernel's "
                                    f"{self.num_vgprs} VGPRs")
            if op.base + op.count > self.accum_offset:
                self._claim(range(max(op.base, self.accum_offset), op.base + op.count), "v", op, ins)
            return self.vgpr
        if op.kind == "a":
            if op.base + op.count > self.num_agprs:
                raise EmulatorError(f"{op.text} in {at(ins)} is beyond the kernel's "
                                    f"{self.num_agprs} AGPRs")
            self._claim(range(self.accum_offset + op.base, self.accum_offset + op.base + op.count), "a", op, ins)
            return self.agpr
        raise EmulatorError(f"operand {op.text} of {at(ins)} is not a VGPR/AGPR")

    def _claim(self, entries, view, op, ins):
        """Record unified entries used through `view`; EmulatorError if the other view used one."""
        for e in entries:
            if self._aliased_by.setdefault(e, view) != view:
                raise EmulatorError(f"{op.text} in {at(ins)} is unified register {e}, used by this wave "
                                    f"both as a VGPR and as an AGPR (accum_offset {self.accum_offset})")

    def _track(self, op, ins, verb):
        if op.kind in "vas":
            self.waits.check(op.kind, op.base, op.count, ins, verb)
            if self.waits.held and verb == "written":
                self.waits.check_store_data(op.kind, op.base, op.count, ins)

    # ---- memory operations (deferred completion) -------------------------------------------
    def issue(self, counter: str, ins, out_of_order: bool = False) -> PendingOp:
        """A memory operation of ins on `counter` ('vmcnt' or 'lgkmcnt'); out_of_order for SMEM."""
        return self.waits.issue(counter, ins, out_of_order=out_of_order)

    def defer_vgpr_write(self, op: PendingOp, dst, values, ins, lanes=None, bits: int = 0xFFFFFFFF):
        """VGPR/AGPR range dst takes `values` (uint32 [count, 64] or [64]) in `lanes` (default
        EXEC), only the bits set in `bits`, when op completes."""
        regs = self._file(dst, ins)
        lanes = self.exec_mask() if lanes is None else lanes
        values = np.asarray(values).astype(np.uint32).reshape(-1, LANES)
        lane_bits = np.where(lanes, np.uint32(bits), np.uint32(0))
        self.waits.claim(op, [(dst.kind, dst.base + i) for i in range(values.shape[0])])
        op.defer(regs, dst.base, values, lane_bits)

    def defer_sgpr_write(self, op: PendingOp, dst, value: int, ins):
        """SGPR range dst takes the unsigned int `value` when op completes."""
        if dst.kind != "s":
            raise EmulatorError(f"destination {dst.text} of {at(ins)} is not an SGPR")
        words = np.array([(value >> (32 * i)) & 0xFFFFFFFF for i in range(dst.count)], np.uint32)
        self.waits.claim(op, [("s", dst.base + i) for i in range(dst.count)])
        op.defer(self.sgpr, dst.base, words, np.uint32(0xFFFFFFFF))

    def lds_read(self, op: PendingOp, ins, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        """uint8 [len(addrs), nbytes] read at LDS byte addresses addrs (int64, active lanes only),
        checked against the other waves' writes (lds_order.py) and retired with op."""
        data = self.lds.gather(addrs, nbytes, at(ins))
        if not self.waits.enforce:  # code that relies on latency: not held to the race model
            return data
        access = self.lds.order.read(self.wave_id, ins, op.counter, addrs[:, None] + np.arange(nbytes))
        op.lds_retires.append((self.lds.order, access))
        return data

    def lds_write(self, op: PendingOp, ins, addrs: np.ndarray, data: np.ndarray):
        """Write data[i] (uint8 rows) at LDS address addrs[i], checked against the other waves'
        accesses and retired with op."""
        self.lds.scatter(addrs, data, at(ins))
        if not self.waits.enforce:
            return
        access = self.lds.order.write(self.wave_id, ins, op.counter, addrs[:, None] + np.arange(data.shape[1]))
        op.lds_retires.append((self.lds.order, access))

    # ---- scalar access ----------------------------------------------------------------
    def read_scalar(self, op, ins, bits: int = 32) -> int:
        """An SGPR range, constant or SCC as an unsigned int of `bits` bits."""
        if op.kind == "s":
            self._track(op, ins, "read")
            value = 0
            for i in range(bits // 32):
                value |= int(self.sgpr[op.base + i]) << (32 * i)
            return value
        if op.kind == "imm":
            return op.value64 if bits == 64 else op.value
        if op.kind == "scc":
            return self.scc
        raise EmulatorError(f"operand {op.text} of {at(ins)} is not a scalar source")

    def write_scalar(self, op, value: int, ins):
        """Store an unsigned int into the SGPR range op."""
        if op.kind != "s":
            raise EmulatorError(f"destination {op.text} of {at(ins)} is not an SGPR")
        self._track(op, ins, "written")
        for i in range(op.count):
            self.sgpr[op.base + i] = (value >> (32 * i)) & 0xFFFFFFFF

    # ---- vector access ------------------------------------------------------------------
    def read_lanes(self, op, ins) -> np.ndarray:
        """uint32[64] per-lane value of a 32-bit source (VGPR, AGPR, SGPR or constant)."""
        if op.kind in "va":
            self._track(op, ins, "read")
            return self._file(op, ins)[op.base].copy()
        return np.full(LANES, self.read_scalar(op, ins), np.uint32)

    def read_lanes64(self, op, ins) -> np.ndarray:
        """uint64[64] per-lane value of a 64-bit source."""
        if op.kind in "va":
            regs = self.read_block(op, ins)
            return regs[0].astype(np.uint64) | (regs[1].astype(np.uint64) << np.uint64(32))
        return np.full(LANES, self.read_scalar(op, ins, 64), np.uint64)

    def read_block(self, op, ins) -> np.ndarray:
        """uint32[count, 64]: all registers of a VGPR/AGPR range."""
        self._track(op, ins, "read")
        return self._file(op, ins)[op.base:op.base + op.count].copy()

    def peek_block(self, op, ins) -> np.ndarray:
        """Like read_block without the wait-count check: for a load that completes at issue (write_lanes with
        track=False, then waits.issue(counter, ins, regs)), the form before defer_vgpr_write."""
        return self._file(op, ins)[op.base:op.base + op.count].copy()

    def write_lanes(self, op, values, ins, mask=None, track=True):
        """Store uint32 values ([64] or [count, 64]) into a VGPR/AGPR range, EXEC-masked.

        track=False writes without the wait-count check (a load completing at issue, the form
        before defer_vgpr_write)."""
        regs = self._file(op, ins)
        if track:
            self._track(op, ins, "written")
        mask = self.exec_mask() if mask is None else mask
        values = np.asarray(values).astype(np.uint32).reshape(-1, LANES)
        block = regs[op.base:op.base + values.shape[0]]
        block[:] = np.where(mask, values, block)

    # ---- float views --------------------------------------------------------------------
    def read_f32(self, op, ins) -> np.ndarray:
        """float32[64] source with neg/abs applied and input denormals flushed per mode."""
        x = self.read_lanes(op, ins).view(np.float32)
        if self.flush_in:
            x = flush_denormals(x)
        if op.abs:
            x = np.abs(x)
        if op.neg:
            x = -x
        return x

    def write_f32(self, op, values, ins):
        """Store float32 results, output denormals flushed per mode."""
        values = np.asarray(values, np.float32)
        if self.flush_out:
            values = flush_denormals(values)
        self.write_lanes(op, values.view(np.uint32), ins)
