"""Memory instructions: scalar loads (SMEM), global loads/stores (FLAT global), LDS (DS).

Memory is read (and written) at issue; what a load returns lands in its destination only at
the s_waitcnt that guarantees it (waitcnt.py; the helpers in state.py), and LDS accesses are
checked for races between waves (lds_order.py). Only active lanes access memory.

Addresses:
- s_load_dword*: SGPR pair base + offset (immediate byte offset or SGPR);
- global_*: with `off`, a 64-bit VGPR pair address + offset:N; with an SGPR pair
  (the saddr form), SGPR base + zero-extended 32-bit VGPR offset + offset:N;
- ds_*: 32-bit VGPR byte address + offset:N into the workgroup's LDS.

Sub-dword loads: global_load_ushort zero-extends; global_load_short_d16 writes bits 15:0
and keeps 31:16; global_load_short_d16_hi writes bits 31:16 and keeps 15:0.
Cache-policy modifiers (sc0, sc1, nt) have no functional effect and are accepted.

LDS transposing reads (gfx950), per 16-lane group; `raw[j]` is the 64 bits lane j of the
group reads at its own address, as n = 64 / element_bits elements:
  ds_read_b64_tr_b16 (n = 4): lane i gets element r (r = 0..3) = raw[4 * r + i // 4][i % 4]
  ds_read_b64_tr_b8  (n = 8): lane i gets element r (r = 0..7) = raw[2 * r + i // 8][i % 8]
i.e. the 16 lanes' reads form an n x 16 element tile (row r = the 16 / n lanes
r*16/n .. (r+1)*16/n - 1 side by side) and lane i receives column i. Source: the
description of the LLVM intrinsics llvm.amdgcn.ds.read.tr16.b64 / tr8.b64 in Modular's
Mojo docs ("each 16-lane row loads a 4x16 tile ... each lane gets a column";
"two interleaved 8x8 byte transposes") -- the CDNA4 ISA guide text itself was not
available here, so this mapping is an inference to be confirmed on hardware. All 16
lanes of a group must be active.
"""
import numpy as np

from .errors import EmulatorError, at
from .isa import semantics
from .state import LANES

_CACHE_MODS = ("sc0", "sc1", "nt")


# ---- scalar memory -----------------------------------------------------------------------
@semantics("s_load_dword", "s_load_dwordx2", "s_load_dwordx4", "s_load_dwordx8",
           "s_load_dwordx16", mods=("glc",))
def s_load(wave, ins, ctx):
    """SGPRs D = the dwords at S_base + offset (lgkmcnt, may return out of order)."""
    dst, base, off = ins.ops
    addr = wave.read_scalar(base, ins, 64) + wave.read_scalar(off, ins)
    data = ctx.memory.gather(np.array([addr], np.uint64), 4 * dst.count, at(ins))
    op = wave.issue("lgkmcnt", ins, out_of_order=True)
    wave.defer_sgpr_write(op, dst, int.from_bytes(data.tobytes(), "little"), ins)


# ---- global memory -----------------------------------------------------------------------
def _global_addrs(wave, ins, vaddr, saddr):
    offset = np.uint64(ins.mods.get("offset", 0) & 0xFFFFFFFFFFFFFFFF)
    if saddr.kind == "off":
        if vaddr.count != 2:
            raise EmulatorError(f"global address without saddr needs a VGPR pair: {at(ins)}")
        return wave.read_lanes64(vaddr, ins) + offset
    base = np.uint64(wave.read_scalar(saddr, ins, 64))
    return base + wave.read_lanes(vaddr, ins).astype(np.uint64) + offset


_LOADS = {  # mnemonic: (bytes, how the loaded bytes become the destination dword(s))
    "global_load_dword": (4, "full"), "global_load_dwordx2": (8, "full"),
    "global_load_dwordx3": (12, "full"), "global_load_dwordx4": (16, "full"),
    "global_load_ushort": (2, "zext"), "global_load_ubyte": (1, "zext"),
    "global_load_short_d16": (2, "lo16"), "global_load_short_d16_hi": (2, "hi16"),
    "global_load_ubyte_d16": (1, "lo16"), "global_load_ubyte_d16_hi": (1, "hi16"),
    "global_load_sbyte": (1, "sext"),
}


@semantics(*_LOADS, mods=("offset",) + _CACHE_MODS)
def global_load(wave, ins, ctx):
    """VGPR D = memory at each active lane's address (vmcnt)."""
    dst, vaddr, saddr = ins.ops
    nbytes, mode = _LOADS[ins.mnemonic]
    mask = wave.exec_mask()
    addrs = _global_addrs(wave, ins, vaddr, saddr)[mask]
    raw = ctx.memory.gather(addrs, nbytes, at(ins))
    out = np.zeros((dst.count, LANES), np.uint32)
    bits = 0xFFFFFFFF
    if mode == "full":
        out[:, mask] = raw.view(np.uint32).T
    else:
        value = np.zeros((raw.shape[0], 4), np.uint8)
        value[:, :nbytes] = raw
        value = value.view(np.uint32)[:, 0]
        if mode == "sext":
            value = value.astype(np.uint8).view(np.int8).astype(np.int32).view(np.uint32)
        elif mode == "lo16":
            bits = 0xFFFF
        elif mode == "hi16":
            value, bits = value << np.uint32(16), 0xFFFF0000
        out[0, mask] = value
    op = wave.issue("vmcnt", ins)
    wave.defer_vgpr_write(op, dst, out, ins, mask, bits)


_STORES = {"global_store_dword": 4, "global_store_dwordx2": 8, "global_store_dwordx3": 12,
           "global_store_dwordx4": 16, "global_store_short": 2, "global_store_byte": 1,
           "global_store_short_d16_hi": -2}


@semantics(*_STORES, mods=("offset",) + _CACHE_MODS)
def global_store(wave, ins, ctx):
    """Memory at each active lane's address = VGPR data (the low bytes for short/byte;
    bits 31:16 for short_d16_hi) (vmcnt)."""
    vaddr, data, saddr = ins.ops
    nbytes = _STORES[ins.mnemonic]
    mask = wave.exec_mask()
    addrs = _global_addrs(wave, ins, vaddr, saddr)[mask]
    block = wave.read_block(data, ins)[:, mask]
    if nbytes == -2:
        block, nbytes = block >> np.uint32(16), 2
    if addrs.size:   # EXEC 0: issued, writing nothing
        raw = block.T.copy().view(np.uint8).reshape(addrs.size, -1)[:, :nbytes]
        ctx.memory.scatter(addrs, np.ascontiguousarray(raw), at(ins))
    wave.issue("vmcnt", ins)   # its data VGPRs are read at issue, wider ones a little later (waitcnt.py)
    if nbytes > 8:
        wave.waits.hold_store_data(ins, data.kind, data.base, data.count)


# ---- LDS -----------------------------------------------------------------------------------
def _lds_addrs(wave, ins, op, ctx=None, nbytes=0):
    """Each lane's LDS byte address; with ctx, reported to its bank model (lds_banks.py) for `nbytes` a lane."""
    addrs = wave.read_lanes(op, ins).astype(np.int64) + ins.mods.get("offset", 0)
    if ctx is not None:
        ctx.lds_banks.record(ins, addrs, wave.exec_mask(), nbytes)
    return addrs


_DS_READS = {"ds_read_b32": 4, "ds_read_b64": 8, "ds_read_b96": 12, "ds_read_b128": 16}
_DS_WRITES = {"ds_write_b32": 4, "ds_write_b64": 8, "ds_write_b96": 12, "ds_write_b128": 16}


@semantics(*_DS_READS, mods=("offset",))
def ds_read(wave, ins, ctx):
    """VGPR D = LDS bytes at each active lane's address (lgkmcnt)."""
    dst, vaddr = ins.ops
    mask = wave.exec_mask()
    nbytes = _DS_READS[ins.mnemonic]
    op = wave.issue("lgkmcnt", ins)
    raw = wave.lds_read(op, ins, _lds_addrs(wave, ins, vaddr, ctx, nbytes)[mask], nbytes)
    out = np.zeros((dst.count, LANES), np.uint32)
    out[:, mask] = raw.view(np.uint32).T
    wave.defer_vgpr_write(op, dst, out, ins, mask)


_DS_READS_D16 = {  # mnemonic: (bytes, half): one byte or short, zero-extended, into bits 15:0 or 31:16
    "ds_read_u8_d16": (1, 0), "ds_read_u8_d16_hi": (1, 1), "ds_read_u16_d16": (2, 0), "ds_read_u16_d16_hi": (2, 1),
}


@semantics(*_DS_READS_D16, mods=("offset",))
def ds_read_d16(wave, ins, ctx):
    """VGPR D bits 15:0 (or 31:16 for _hi) = LDS byte / short at each active lane's address, zero-extended;
    the other half kept (lgkmcnt)."""
    dst, vaddr = ins.ops
    nbytes, high = _DS_READS_D16[ins.mnemonic]
    mask = wave.exec_mask()
    op = wave.issue("lgkmcnt", ins)
    raw = wave.lds_read(op, ins, _lds_addrs(wave, ins, vaddr, ctx, nbytes)[mask], nbytes)
    value = np.zeros((raw.shape[0], 4), np.uint8)
    value[:, :nbytes] = raw
    out = np.zeros((1, LANES), np.uint32)
    out[0, mask] = value.view(np.uint32)[:, 0] << np.uint32(16 * high)
    wave.defer_vgpr_write(op, dst, out, ins, mask, 0xFFFF << (16 * high))


@semantics(*_DS_WRITES, mods=("offset",))
def ds_write(wave, ins, ctx):
    """LDS at each active lane's address = VGPR data (lgkmcnt)."""
    vaddr, data = ins.ops
    mask = wave.exec_mask()
    block = wave.read_block(data, ins)[:, mask]
    raw = block.T.copy().view(np.uint8).reshape(int(mask.sum()), -1)
    op = wave.issue("lgkmcnt", ins)
    wave.lds_write(op, ins, _lds_addrs(wave, ins, vaddr, ctx, raw.shape[1])[mask], raw)


@semantics("ds_bpermute_b32", mods=("offset",))
def ds_bpermute_b32(wave, ins, ctx):
    """D[lane] = S_data[((addr[lane] + offset) / 4) % 64]: a backward lane permute through
    the LDS crossbar (no LDS memory is touched). A source lane that is inactive gives 0."""
    dst, vaddr, data = ins.ops
    src_lane = (_lds_addrs(wave, ins, vaddr) // 4) % LANES
    values = np.where(wave.exec_mask()[src_lane], wave.read_lanes(data, ins)[src_lane], 0)
    wave.defer_vgpr_write(wave.issue("lgkmcnt", ins), dst, values, ins)


@semantics("ds_read_b64_tr_b16", "ds_read_b64_tr_b8", mods=("offset",))
def ds_read_b64_tr(wave, ins, ctx):
    """Transposing 64-bit LDS read (see the module docstring for the lane mapping)."""
    dst, vaddr = ins.ops
    mask = wave.exec_mask()
    if not all(g.all() or not g.any() for g in mask.reshape(4, 16)):
        raise EmulatorError(f"{ins.mnemonic} needs whole 16-lane groups active: {at(ins)}")
    n = 4 if ins.mnemonic.endswith("b16") else 8
    elem = np.uint16 if n == 4 else np.uint8
    raw = np.zeros((LANES, 8), np.uint8)
    op = wave.issue("lgkmcnt", ins)
    raw[mask] = wave.lds_read(op, ins, _lds_addrs(wave, ins, vaddr, ctx, 8)[mask], 8)
    elems = raw.view(elem).reshape(4, 16, n)              # [group, lane j, element]
    lane = np.arange(16)[:, None]
    r = np.arange(n)[None, :]
    out = elems[:, (16 // n) * r + lane // n, lane % n]   # [group, lane i, element r]
    wave.defer_vgpr_write(op, dst, out.reshape(LANES, n).copy().view(np.uint32).T, ins, mask)
