"""DPP (data-parallel primitives) forms of VOP1/VOP2 instructions: `v_<op>_dpp` with src0 read across lanes.

Each lane reads src0 from the lane the DPP control names (CDNA3/4 ISA, "DPP"), rows being 16-lane groups:
- quad_perm:[a,b,c,d]: lane i reads lane 4 * (i // 4) + perm[i % 4];
- row_newbcast:n (gfx90a+): every lane of a row reads lane n of its row;
- row_shl:n / row_shr:n: lane i reads lane i + n / i - n of its row (invalid past the row's end).
A lane whose source lane is invalid or inactive reads 0 with `bound_ctrl:1`, otherwise it is not written.
row_mask bit r enables row r, bank_mask bit b the lanes 4b..4b+3 of every row; lanes they disable (and inactive
lanes) are not written. `fi` (fetch inactive) is not emulated (an error).
"""
import numpy as np

from .errors import EmulatorError, at
from .isa import semantics
from .isa_vector import _i24
from .state import LANES, flush_denormals

_LANE = np.arange(LANES)
_DPP_MODS = ("quad_perm", "row_newbcast", "row_shl", "row_shr", "row_mask", "bank_mask", "bound_ctrl")


def _source_lanes(ins):
    """int[64]: the lane each lane reads src0 from (-1 where the control names no lane)."""
    mods = ins.mods
    row_start, in_row = _LANE - _LANE % 16, _LANE % 16
    if "quad_perm" in mods:
        return _LANE - _LANE % 4 + np.array(mods["quad_perm"])[_LANE % 4]
    if "row_newbcast" in mods:
        return row_start + mods["row_newbcast"]
    for key, sign in (("row_shl", 1), ("row_shr", -1)):
        if key in mods:
            src = in_row + sign * mods[key]
            return np.where((src >= 0) & (src < 16), row_start + src, -1)
    raise EmulatorError(f"DPP control not emulated: {at(ins)}")


def dpp_src0(wave, ins):
    """(uint32[64] src0 as each lane reads it, bool[64] lanes to write)."""
    active = wave.exec_mask()
    src_lane = _source_lanes(ins)
    valid = (src_lane >= 0) & active[np.clip(src_lane, 0, LANES - 1)]
    values = wave.read_lanes(ins.ops[1], ins)[np.clip(src_lane, 0, LANES - 1)]
    write = active & ((ins.mods.get("row_mask", 0xF) >> (_LANE // 16)) & 1).astype(bool)
    write &= ((ins.mods.get("bank_mask", 0xF) >> (_LANE % 16 // 4)) & 1).astype(bool)
    if ins.mods.get("bound_ctrl"):
        values = np.where(valid, values, np.uint32(0))
    else:
        write &= valid
    return values, write


@semantics("v_mov_b32_dpp", mods=_DPP_MODS)
def v_mov_b32_dpp(wave, ins, ctx):
    """D = src0 from the DPP source lane."""
    values, write = dpp_src0(wave, ins)
    wave.write_lanes(ins.ops[0], values, ins, mask=write)


@semantics("v_mul_i32_i24_dpp", mods=_DPP_MODS)
def v_mul_i32_i24_dpp(wave, ins, ctx):
    """D = the low 32 bits of src0 (from the DPP source lane) * src1, each its low 24 bits as a signed integer."""
    values, write = dpp_src0(wave, ins)
    a, b = (_i24(x.astype(np.uint64)) for x in (values, wave.read_lanes(ins.ops[2], ins)))
    wave.write_lanes(ins.ops[0], (a * b).astype(np.uint64) & np.uint64(0xFFFFFFFF), ins, mask=write)


@semantics("v_mul_f32_dpp", mods=_DPP_MODS)
def v_mul_f32_dpp(wave, ins, ctx):
    """D = src0 (from the DPP source lane) * src1 in float32; neg/abs modifiers are refused."""
    if any(op.neg or op.abs for op in ins.ops[1:]):
        raise EmulatorError(f"neg/abs on a DPP source is not emulated: {at(ins)}")
    values, write = dpp_src0(wave, ins)
    a = values.view(np.float32)
    b = wave.read_lanes(ins.ops[2], ins).view(np.float32)
    if wave.flush_in:
        a, b = flush_denormals(a), flush_denormals(b)
    with np.errstate(all="ignore"):
        product = (a * b).astype(np.float32)
    if wave.flush_out:
        product = flush_denormals(product)
    wave.write_lanes(ins.ops[0], product.view(np.uint32), ins, mask=write)
