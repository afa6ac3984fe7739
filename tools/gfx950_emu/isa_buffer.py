"""Buffer (MUBUF) loads and stores through a buffer resource (V#), with range checking, and loads into LDS.

The V# is 4 SGPRs (CDNA3/4 ISA, "Buffer Resource"): base address bits 47:0 (dword 0 and dword 1 bits 15:0),
stride (dword 1 bits 29:16), cache swizzle / swizzle enable (dword 1 bits 30/31), num_records (dword 2), and in
dword 3 the format fields and ADD_TID_ENABLE (bit 23). Only raw addressing is emulated: swizzle off, ADD_TID_ENABLE
off and no `idxen` (anything else is refused); a nonzero stride then adds stride x index 0, and without idxen the
range check is still by byte offset (AMD's aiter mla kernels set stride 4 with byte counts in num_records).

    address = base + soffset + (offen ? VGPR offset : 0) + offset:N

Range check of a raw buffer, per dword: dword i of a lane's access is in range iff
offset + 4 * (i + 1) <= num_records, where offset = soffset + ((VGPR offset + offset:N) mod 2^32) counts soffset.
Out-of-range dwords load as 0 (into LDS too) and are not stored; they touch no memory (so they need not lie inside
an allocation here). AMD's aiter fmha kernels show it: they bound K and V at seqlen by num_records and step tiles
with soffset, and are right past a sequence end that is not a tile multiple only if soffset counts. AMD's own
simulator (ROCm rocjitsu, "Model GFX9/CDNA buffer range check") states the same rules for CDNA1-4 (soffset and
offset:N counted, per-dword checks, byte-offset checks for a strided buffer without idxen, zeros into LDS); LLVM's
buffer intrinsics document soffset as "excluded from bounds checking", which these kernels contradict.

`lds` loads (buffer_load_dword* ... lds) write no VGPR: lane l's dwords go to LDS at M0 + offset:N + l * bytes,
the same offset:N applied to both addresses (as LLVM's buffer-load-to-LDS intrinsics define it). Every access
completes at issue and is counted on vmcnt (waitcnt.py). Cache-policy modifiers (sc0, sc1, nt) have no effect.
"""
import numpy as np

from .errors import EmulatorError, at
from .isa import semantics
from .operands import SGPR_M0
from .state import LANES

_DWORDS = {"buffer_load_dword": 1, "buffer_load_dwordx2": 2, "buffer_load_dwordx3": 3, "buffer_load_dwordx4": 4,
           "buffer_store_dword": 1, "buffer_store_dwordx2": 2, "buffer_store_dwordx3": 3,
           "buffer_store_dwordx4": 4}
_MODS = ("offen", "offset", "sc0", "sc1", "nt")


class BufferResource:
    """The fields of a raw-buffer V# the emulator uses."""

    def __init__(self, words, ins):
        w0, w1, w2, w3 = (int(w) for w in words)
        self.base = w0 | ((w1 & 0xFFFF) << 32)
        self.num_records = w2
        swizzle, add_tid = w1 >> 31, (w3 >> 23) & 1
        if swizzle or add_tid:
            raise EmulatorError(f"only raw buffer addressing is emulated (V# swizzle {swizzle}, "
                                f"add_tid {add_tid}): {at(ins)}")


def _access(wave, ins, vaddr, srsrc, soffset, dwords):
    """(uint64 [64, dwords] byte addresses, bool [64, dwords] active and in range)."""
    if "idxen" in ins.mods:
        raise EmulatorError(f"idxen is not emulated: {at(ins)}")
    if srsrc.kind != "s" or srsrc.count != 4:
        raise EmulatorError(f"buffer resource must be 4 SGPRs: {at(ins)}")
    words = wave.read_scalar(srsrc, ins, 128)
    rsrc = BufferResource([(words >> (32 * i)) & 0xFFFFFFFF for i in range(4)], ins)
    offset = np.full(LANES, ins.mods.get("offset", 0), np.int64)
    if ins.mods.get("offen"):
        offset = (offset + wave.read_lanes(vaddr, ins).astype(np.int64)) & 0xFFFFFFFF
    offset += wave.read_scalar(soffset, ins)
    dword_offset = offset[:, None] + 4 * np.arange(dwords)[None, :]
    ok = wave.exec_mask()[:, None] & (dword_offset + 4 <= rsrc.num_records)
    return np.uint64(rsrc.base) + dword_offset.astype(np.uint64), ok


def _gather_dwords(ctx, addrs, ok, ins):
    """uint32 [64, dwords]: memory at the in-range addresses, 0 elsewhere."""
    out = np.zeros(addrs.shape, np.uint32)
    if ok.any():
        out[ok] = ctx.memory.gather(addrs[ok], 4, at(ins)).view(np.uint32)[:, 0]
    return out


@semantics(*[m for m in _DWORDS if m.startswith("buffer_load")], mods=_MODS + ("lds",))
def buffer_load(wave, ins, ctx):
    """VGPRs (or LDS, with `lds`) = the dwords at each active lane's address, 0 where out of range (vmcnt)."""
    dwords = _DWORDS[ins.mnemonic]
    if ins.mods.get("lds"):
        vaddr, srsrc, soffset = ins.ops
        addrs, ok = _access(wave, ins, vaddr, srsrc, soffset, dwords)
        data = _gather_dwords(ctx, addrs, ok, ins)
        active = wave.exec_mask()
        lds_base = int(wave.sgpr[SGPR_M0]) + ins.mods.get("offset", 0)
        lds_addrs = lds_base + 4 * dwords * np.arange(LANES)[active]
        op = wave.issue("vmcnt", ins)
        wave.lds_write(op, ins, lds_addrs, data[active].copy().view(np.uint8).reshape(-1, 4 * dwords))
        return
    dst, vaddr, srsrc, soffset = ins.ops
    if dst.count != dwords:
        raise EmulatorError(f"{ins.mnemonic} needs {dwords} destination registers: {at(ins)}")
    addrs, ok = _access(wave, ins, vaddr, srsrc, soffset, dwords)
    wave.defer_vgpr_write(wave.issue("vmcnt", ins), dst, _gather_dwords(ctx, addrs, ok, ins).T, ins)


@semantics(*[m for m in _DWORDS if m.startswith("buffer_store")], mods=_MODS)
def buffer_store(wave, ins, ctx):
    """Memory at each active lane's in-range addresses = the VGPR dwords; out-of-range dwords dropped (vmcnt)."""
    data, vaddr, srsrc, soffset = ins.ops
    dwords = _DWORDS[ins.mnemonic]
    if data.count != dwords:
        raise EmulatorError(f"{ins.mnemonic} needs {dwords} data registers: {at(ins)}")
    addrs, ok = _access(wave, ins, vaddr, srsrc, soffset, dwords)
    values = wave.read_block(data, ins).T          # [64, dwords]
    if ok.any():
        ctx.memory.scatter(addrs[ok], values[ok].copy().view(np.uint8).reshape(-1, 4), at(ins))
    if dwords > 2:
        wave.waits.hold_store_data(ins, data.kind, data.base, data.count)
    wave.issue("vmcnt", ins)
