"""Vector ALU instructions (VOP1/VOP2/VOP3/VOPC), lane-parallel over numpy arrays.

Integer ops work on uint32 lanes (wrapping); float ops on float32 lanes with numpy's
IEEE round-to-nearest-even, which is what the hardware does for add/sub/mul. Choices and
approximations, all deliberate:

- v_fma_f32 / v_fmac_f32: computed as float64(a) * float64(b) + float64(c), rounded to
  float32. The product is exact in float64, the sum is rounded twice (to float64, then to
  float32), which can differ from a true fused result by one ulp in rare halfway cases.
- v_exp_f32 = numpy float32 exp2, v_log_f32 = float32 log2, v_rcp_f32 = float32 1/x
  (correctly rounded). The hardware instructions are approximations (about 1 ulp; the
  ISA guide does not promise correct rounding), so results may differ from hardware in
  the last bit; kernels must not depend on exact transcendental bits.
- v_max_f32 / v_min_f32 follow IEEE mode (the kernels' default): a NaN input yields the
  other operand (numpy fmax/fmin). v_maximum3_f32 (gfx950, IEEE 754-2019 maximum) propagates a NaN input
  (numpy maximum; -0 and +0 compare equal here, the ISA orders -0 below +0).
- Denormals: kept or flushed per the descriptor's FLOAT_DENORM_MODE_32 (state.py).
- VOPC and carry-out writes set bits only for active lanes; inactive lanes' bits are 0.
- v_permlane32_swap_b32 swaps vdst of lanes 32-63 with vsrc of lanes 0-31 (CDNA4 ISA
  "V_PERMLANE32_SWAP_B32"); v_permlane16_swap_b32 swaps vdst of lanes 16-31 / 48-63 with vsrc of lanes
  0-15 / 32-47 (the odd 16-lane rows of vdst with the even rows of vsrc). Both are emulated only with EXEC all
  ones (an error otherwise), as the kernels run them.
"""
import ml_dtypes
import numpy as np

from .errors import EmulatorError, at
from .isa import semantics
from .state import LANES, bits_to_mask, flush_denormals, mask_to_bits

U32 = np.uint32
_SIGN = U32(0x80000000)


def _u(wave, ins, i):
    return wave.read_lanes(ins.ops[i], ins)


def _f(wave, ins, i):
    return wave.read_f32(ins.ops[i], ins)


def _lane_mask_operand(wave, ins, i):
    """A 64-bit SGPR pair (vcc or s[n:n+1]) read as bool[64]."""
    return bits_to_mask(wave.read_scalar(ins.ops[i], ins, 64))


def _write_lane_mask(wave, ins, op, mask):
    """Write bool[64] to an SGPR pair: active lanes' bits, zeros elsewhere."""
    wave.write_scalar(op, mask_to_bits(mask & wave.exec_mask()), ins)


# ---- integer VOP1/VOP2/VOP3 ----------------------------------------------------------------
def _int_op(nsrc, fn):
    def run(wave, ins, ctx):
        srcs = [_u(wave, ins, 1 + i).astype(np.uint64) for i in range(nsrc)]
        wave.write_lanes(ins.ops[0], fn(*srcs) & np.uint64(0xFFFFFFFF), ins)
    return run


def _i32(x):
    return x.astype(np.uint32).view(np.int32).astype(np.int64)


def _i24(x):
    """Bits 23:0 as a signed 24-bit integer (int64)."""
    low = (x & np.uint64(0xFFFFFF)).astype(np.int64)
    return np.where(low & 0x800000, low - 0x1000000, low)


_INT_OPS = {
    "v_mov_b32": (1, lambda a: a),
    "v_not_b32": (1, lambda a: ~a),
    "v_add_u32": (2, lambda a, b: a + b),
    "v_sub_u32": (2, lambda a, b: a - b),
    "v_subrev_u32": (2, lambda a, b: b - a),
    "v_mul_lo_u32": (2, lambda a, b: a * b),
    "v_mul_hi_u32": (2, lambda a, b: (a * b) >> np.uint64(32)),
    "v_mul_u32_u24": (2, lambda a, b: (a & np.uint64(0xFFFFFF)) * (b & np.uint64(0xFFFFFF))),
    "v_mad_u32_u24": (3, lambda a, b, c: (a & np.uint64(0xFFFFFF)) * (b & np.uint64(0xFFFFFF)) + c),
    "v_mul_i32_i24": (2, lambda a, b: (_i24(a) * _i24(b)).astype(np.uint64)),
    "v_add_i32": (2, lambda a, b: a + b),       # VOP3 without clamp: wraps like v_add_u32
    "v_sub_i32": (2, lambda a, b: a - b),
    "v_lshlrev_b32": (2, lambda a, b: b << (a & np.uint64(31))),
    "v_lshrrev_b32": (2, lambda a, b: b >> (a & np.uint64(31))),
    "v_ashrrev_i32": (2, lambda a, b: (_i32(b) >> _i32(a & np.uint64(31))).astype(np.uint64)),
    "v_and_b32": (2, lambda a, b: a & b),
    "v_or_b32": (2, lambda a, b: a | b),
    "v_xor_b32": (2, lambda a, b: a ^ b),
    "v_max_u32": (2, np.maximum),
    "v_min_u32": (2, np.minimum),
    "v_max_i32": (2, lambda a, b: np.maximum(_i32(a), _i32(b)).astype(np.uint64)),
    "v_min_i32": (2, lambda a, b: np.minimum(_i32(a), _i32(b)).astype(np.uint64)),
    "v_lshl_add_u32": (3, lambda a, b, c: (a << (b & np.uint64(31))) + c),
    "v_add_lshl_u32": (3, lambda a, b, c: ((a + b) & np.uint64(0xFFFFFFFF)) << (c & np.uint64(31))),
    "v_lshl_or_b32": (3, lambda a, b, c: (a << (b & np.uint64(31))) | c),
    "v_and_or_b32": (3, lambda a, b, c: (a & b) | c),
    "v_bfe_u32": (3, lambda a, b, c: (a >> (b & np.uint64(31))) & ((np.uint64(1) << (c & np.uint64(31))) - np.uint64(1))),
    "v_add3_u32": (3, lambda a, b, c: a + b + c),
}
for _name, (_n, _fn) in _INT_OPS.items():
    semantics(_name)(_int_op(_n, _fn))


@semantics("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32")
def v_add_sub_co(wave, ins, ctx):
    """D = S0 +/- S1; the carry (or borrow) of each active lane goes to the SGPR pair operand."""
    a = _u(wave, ins, 2).astype(np.int64)
    b = _u(wave, ins, 3).astype(np.int64)
    if ins.mnemonic == "v_subrev_co_u32":
        a, b = b, a
    r = a + b if ins.mnemonic == "v_add_co_u32" else a - b
    _write_lane_mask(wave, ins, ins.ops[1], (r > 0xFFFFFFFF) | (r < 0))
    wave.write_lanes(ins.ops[0], r & 0xFFFFFFFF, ins)


@semantics("v_addc_co_u32", "v_subb_co_u32")
def v_addc_subb(wave, ins, ctx):
    """D = S0 + S1 + carry-in (S2 lane mask), or S0 - S1 - borrow-in; carry/borrow out."""
    a = _u(wave, ins, 2).astype(np.int64)
    b = _u(wave, ins, 3).astype(np.int64)
    cin = _lane_mask_operand(wave, ins, 4).astype(np.int64)
    r = a + b + cin if ins.mnemonic == "v_addc_co_u32" else a - b - cin
    _write_lane_mask(wave, ins, ins.ops[1], (r > 0xFFFFFFFF) | (r < 0))
    wave.write_lanes(ins.ops[0], r & 0xFFFFFFFF, ins)


@semantics("v_mov_b64")
def v_mov_b64(wave, ins, ctx):
    """D[63:0] = S0[63:0] (a VGPR pair, an SGPR pair or an inline constant)."""
    value = wave.read_lanes64(ins.ops[1], ins)
    wave.write_lanes(ins.ops[0], np.stack([value & np.uint64(0xFFFFFFFF), value >> np.uint64(32)]), ins)


@semantics("v_mad_u64_u32")
def v_mad_u64_u32(wave, ins, ctx):
    """D[63:0] = S0 * S1 + S2[63:0] (unsigned); the carry out of bit 64 to the SGPR pair."""
    a = _u(wave, ins, 2).astype(object)
    b = _u(wave, ins, 3).astype(object)
    c = wave.read_lanes64(ins.ops[4], ins).astype(object)
    full = a * b + c
    carry = np.array([int(x) >> 64 for x in full], bool)
    low = np.array([int(x) & 0xFFFFFFFFFFFFFFFF for x in full], np.uint64)
    _write_lane_mask(wave, ins, ins.ops[1], carry)
    wave.write_lanes(ins.ops[0], np.stack([low & np.uint64(0xFFFFFFFF), low >> np.uint64(32)]), ins)


@semantics("v_cndmask_b32")
def v_cndmask_b32(wave, ins, ctx):
    """D = S2[lane] ? S1 : S0 (S2: vcc or an SGPR pair); VOP3 abs/neg act on the sign bit."""
    def src(i):
        x, op = _u(wave, ins, i), ins.ops[i]
        x = x & ~_SIGN if op.abs else x
        return x ^ _SIGN if op.neg else x
    sel = _lane_mask_operand(wave, ins, 3)
    wave.write_lanes(ins.ops[0], np.where(sel, src(2), src(1)), ins)


@semantics("v_readfirstlane_b32")
def v_readfirstlane_b32(wave, ins, ctx):
    """SGPR D = S0 of the lowest active lane (lane 0 when EXEC is 0)."""
    lanes = np.flatnonzero(wave.exec_mask())
    lane = int(lanes[0]) if lanes.size else 0
    wave.write_scalar(ins.ops[0], int(_u(wave, ins, 1)[lane]), ins)


@semantics("v_readlane_b32")
def v_readlane_b32(wave, ins, ctx):
    """SGPR D = S0 of the lane S1 names (SGPR or constant, modulo 64), whether that lane is active or not."""
    lane = wave.read_scalar(ins.ops[2], ins) % LANES
    wave.write_scalar(ins.ops[0], int(_u(wave, ins, 1)[lane]), ins)


@semantics("v_nop")
def v_nop(wave, ins, ctx):
    """No operation."""


@semantics("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32")
def v_accvgpr_move(wave, ins, ctx):
    """Copy between the VGPR and AGPR files (D = S0, EXEC-masked)."""
    wave.write_lanes(ins.ops[0], _u(wave, ins, 1), ins)


@semantics("v_permlane32_swap_b32", "v_permlane16_swap_b32")
def v_permlane_swap_b32(wave, ins, ctx):
    """Swap vdst's odd rows with vsrc's even rows, rows of 32 (permlane32) or 16 lanes (permlane16); both
    registers are written. The kernels run it with every lane on; anything else is refused rather than guessed."""
    if not wave.exec_mask().all():
        raise EmulatorError(f"{at(ins)}: {ins.mnemonic} with EXEC not all ones (unmodelled)")
    row = 32 if ins.mnemonic == "v_permlane32_swap_b32" else 16
    d = _u(wave, ins, 0).reshape(-1, 2, row)        # [pair of rows, even/odd, lane in row]
    s = _u(wave, ins, 1).reshape(-1, 2, row)
    new_d = np.stack([d[:, 0], s[:, 0]], axis=1).reshape(LANES)
    new_s = np.stack([d[:, 1], s[:, 1]], axis=1).reshape(LANES)
    all_lanes = np.ones(LANES, bool)
    wave.write_lanes(ins.ops[0], new_d, ins, mask=all_lanes)
    wave.write_lanes(ins.ops[1], new_s, ins, mask=all_lanes)


@semantics("v_perm_b32")
def v_perm_b32(wave, ins, ctx):
    """Byte permute: bytes 0-3 of {S0, S1} are S1's, 4-7 S0's; selector byte k picks
    byte k of D: 0-7 a byte, 8-11 the sign of byte 1/3/5/7 replicated, 12 = 0x00,
    13-255 = 0xFF."""
    s0, s1, sel = _u(wave, ins, 1), _u(wave, ins, 2), _u(wave, ins, 3)
    pool = np.stack([s1, s0]).T.copy().view(np.uint8)      # [64, 8] little-endian bytes
    sign = np.where(pool[:, [1, 3, 5, 7]] & 0x80, 0xFF, 0x00)
    table = np.concatenate([pool, sign, np.zeros((LANES, 1), np.uint8),
                            np.full((LANES, 1), 0xFF, np.uint8)], axis=1).astype(np.uint8)
    sel_bytes = np.minimum(sel.view(np.uint8).reshape(LANES, 4), 13)
    out = np.take_along_axis(table, sel_bytes.astype(np.int64), axis=1)
    wave.write_lanes(ins.ops[0], out.copy().view(np.uint32).reshape(LANES), ins)


# ---- conversions -----------------------------------------------------------------------
@semantics("v_cvt_f32_i32", "v_cvt_f32_u32")
def v_cvt_f32_int(wave, ins, ctx):
    """D.f32 = float(S0 as signed / unsigned int), rounded to nearest even."""
    x = _u(wave, ins, 1)
    x = x.view(np.int32) if ins.mnemonic == "v_cvt_f32_i32" else x
    wave.write_f32(ins.ops[0], x.astype(np.float64).astype(np.float32), ins)


@semantics("v_cvt_i32_f32", "v_cvt_u32_f32")
def v_cvt_int_f32(wave, ins, ctx):
    """D = S0.f32 truncated toward zero, saturated to the int range; NaN -> 0."""
    x = np.nan_to_num(_f(wave, ins, 1).astype(np.float64), nan=0.0)
    lo, hi = (-2.0 ** 31, 2.0 ** 31 - 1) if ins.mnemonic == "v_cvt_i32_f32" else (0.0, 2.0 ** 32 - 1)
    wave.write_lanes(ins.ops[0], np.clip(np.trunc(x), lo, hi).astype(np.int64) & 0xFFFFFFFF, ins)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint32 holding 16 bits), round to nearest even; NaN
    stays NaN (quieted)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    nan = np.isnan(x)
    quiet = (b >> np.uint64(16)) | np.uint64(0x40)
    return np.where(nan, quiet, rounded).astype(np.uint32) & U32(0xFFFF)


@semantics("v_cvt_pk_bf16_f32")
def v_cvt_pk_bf16_f32(wave, ins, ctx):
    """D[15:0] = bf16(S0), D[31:16] = bf16(S1), round to nearest even (gfx950)."""
    lo = f32_to_bf16_bits(_f(wave, ins, 1))
    hi = f32_to_bf16_bits(_f(wave, ins, 2))
    wave.write_lanes(ins.ops[0], lo | (hi << U32(16)), ins)


@semantics("v_cvt_pk_f16_f32", mods=("clamp",))
def v_cvt_pk_f16_f32(wave, ins, ctx):
    """D[15:0] = f16(S0), D[31:16] = f16(S1) (gfx950), round to nearest even; output denormals kept or flushed
    per the descriptor's FLOAT_DENORM_MODE_16_64. `clamp` saturates each half to [0, 1], NaN to 0 in DX10
    clamp mode (the only mode emulated with it)."""
    halves = []
    for i in (1, 2):
        x = _f(wave, ins, i)
        with np.errstate(all="ignore"):
            h = x.astype(np.float16)  # numpy: round to nearest even, subnormals kept
        if wave.flush_out_16:
            h = np.where(np.abs(h) < np.float16(2.0 ** -14), np.copysign(np.float16(0), h), h)
        if ins.mods.get("clamp"):
            if not wave.dx10_clamp:
                raise EmulatorError(f"clamp outside DX10 clamp mode is not emulated: {at(ins)}")
            h = np.where(np.isnan(h), np.float16(0), np.clip(h, np.float16(0), np.float16(1)))
        halves.append(h.astype(np.float16).view(np.uint16).astype(U32))
    wave.write_lanes(ins.ops[0], halves[0] | (halves[1] << U32(16)), ins)


_E4M3_TO_F32 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)


@semantics("v_cvt_pk_f32_fp8")
def v_cvt_pk_f32_fp8(wave, ins, ctx):
    """D[0] = f32(S0 byte 0), D[1] = f32(S0 byte 1), the bytes read as OCP e4m3 (gfx950's fp8; exact)."""
    x = _u(wave, ins, 1)
    lo = _E4M3_TO_F32[x & U32(0xFF)]
    hi = _E4M3_TO_F32[(x >> U32(8)) & U32(0xFF)]
    wave.write_lanes(ins.ops[0], np.stack([lo.view(U32), hi.view(U32)]), ins)


@semantics("v_cvt_pk_fp8_f32", mods=("op_sel",))
def v_cvt_pk_fp8_f32(wave, ins, ctx):
    """D.u16[w] = {e4m3(S1), e4m3(S0)} (S0 in the low byte), round to nearest even, no saturation (out of range
    gives NaN); w = op_sel[2] (the destination's), the other half of D kept. OCP e4m3 is gfx950's fp8."""
    half = ins.mods.get("op_sel", (0, 0, 0))[2]
    with np.errstate(all="ignore"):
        lo, hi = (_f(wave, ins, i).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(U32) for i in (1, 2))
    packed = lo | (hi << U32(8))
    keep = _u(wave, ins, 0) & (U32(0xFFFF0000) if half == 0 else U32(0xFFFF))
    wave.write_lanes(ins.ops[0], keep | (packed << U32(16 * half)), ins)


# ---- float arithmetic ------------------------------------------------------------------
def _float_op(nsrc, fn):
    def run(wave, ins, ctx):
        srcs = [_f(wave, ins, 1 + i) for i in range(nsrc)]
        with np.errstate(all="ignore"):
            result = fn(*srcs)
        wave.write_f32(ins.ops[0], result, ins)
    return run


def _fma(a, b, c):
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


_FLOAT_OPS = {
    "v_add_f32": (2, np.add),
    "v_sub_f32": (2, np.subtract),
    "v_subrev_f32": (2, lambda a, b: b - a),
    "v_mul_f32": (2, np.multiply),
    "v_max_f32": (2, np.fmax),
    "v_min_f32": (2, np.fmin),
    "v_fma_f32": (3, _fma),
    "v_max3_f32": (3, lambda a, b, c: np.fmax(np.fmax(a, b), c)),
    "v_min3_f32": (3, lambda a, b, c: np.fmin(np.fmin(a, b), c)),
    "v_maximum3_f32": (3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_exp_f32": (1, np.exp2),
    "v_log_f32": (1, np.log2),
    "v_rcp_f32": (1, lambda a: np.float32(1) / a),
    "v_rcp_iflag_f32": (1, lambda a: np.float32(1) / a),   # v_rcp_f32 that raises no integer-divide flag
    "v_sqrt_f32": (1, np.sqrt),
}
for _name, (_n, _fn) in _FLOAT_OPS.items():
    semantics(_name)(_float_op(_n, _fn))


# ---- packed float32 (VOP3P): two float32 lanes per 64-bit register pair ---------------------------------
def _packed_f32_op(nsrc, fn):
    """D.f32[0] = fn(sources' halves op_sel picks), D.f32[1] = fn(those op_sel_hi picks); op_sel[i] / op_sel_hi[i]
    = 1 picks the high 32 bits of source i (defaults 0 / 1, as the assembler's); neg_lo[i] / neg_hi[i] = 1 negates
    what source i gives D.f32[0] / D.f32[1] (its sign bit flipped, as the VOP3P NEG fields do: exact)."""
    def run(wave, ins, ctx):
        sel = ins.mods.get("op_sel", (0,) * nsrc)
        sel_hi = ins.mods.get("op_sel_hi", (1,) * nsrc)
        neg = (ins.mods.get("neg_lo", (0,) * nsrc), ins.mods.get("neg_hi", (0,) * nsrc))
        halves = ([], [])
        for i in range(nsrc):
            op = ins.ops[1 + i]
            if op.neg or op.abs:
                raise EmulatorError(f"neg/abs on a packed source is not emulated: {at(ins)}")
            x = wave.read_lanes64(op, ins)
            parts = [(x & np.uint64(0xFFFFFFFF)).astype(U32).view(np.float32),
                     (x >> np.uint64(32)).astype(U32).view(np.float32)]
            if wave.flush_in:
                parts = [flush_denormals(p) for p in parts]
            for half, pick in enumerate((sel[i], sel_hi[i])):
                halves[half].append(-parts[pick] if neg[half][i] else parts[pick])
        with np.errstate(all="ignore"):
            result = [np.asarray(fn(*h), np.float32) for h in halves]
        if wave.flush_out:
            result = [flush_denormals(r) for r in result]
        wave.write_lanes(ins.ops[0], np.stack([r.view(U32) for r in result]), ins)
    return run


for _name, (_n, _fn) in {"v_pk_add_f32": (2, np.add), "v_pk_mul_f32": (2, np.multiply),
                         "v_pk_fma_f32": (3, _fma)}.items():
    semantics(_name, mods=("op_sel", "op_sel_hi", "neg_lo", "neg_hi"))(_packed_f32_op(_n, _fn))


@semantics("v_fmac_f32")
def v_fmac_f32(wave, ins, ctx):
    """D = S0 * S1 + D (fused; see the module note on rounding)."""
    a, b, d = _f(wave, ins, 1), _f(wave, ins, 2), wave.read_f32(ins.ops[0], ins)
    wave.write_f32(ins.ops[0], _fma(a, b, d), ins)


# ---- comparisons (VOPC; VOP3 form writes any SGPR pair) -----------------------------------
_INT_PREDICATES = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                   "eq": np.equal, "ne": np.not_equal}
_FLOAT_PREDICATES = dict(
    lt=np.less, le=np.less_equal, gt=np.greater, ge=np.greater_equal, eq=np.equal,
    lg=lambda a, b: (a < b) | (a > b), o=lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    u=lambda a, b: np.isnan(a) | np.isnan(b), neq=lambda a, b: ~(a == b),
    nlt=lambda a, b: ~(a < b), nle=lambda a, b: ~(a <= b), ngt=lambda a, b: ~(a > b),
    nge=lambda a, b: ~(a >= b), nlg=lambda a, b: ~((a < b) | (a > b)),
)


def _v_cmp(pred, kind):
    def run(wave, ins, ctx):
        if kind == "f32":
            a, b = _f(wave, ins, 1), _f(wave, ins, 2)
        else:
            a, b = _u(wave, ins, 1), _u(wave, ins, 2)
            if kind == "i32":
                a, b = a.view(np.int32), b.view(np.int32)
        _write_lane_mask(wave, ins, ins.ops[0], pred(a, b))
    return run


for _op, _pred in _INT_PREDICATES.items():
    for _kind in ("i32", "u32"):
        semantics(f"v_cmp_{_op}_{_kind}")(_v_cmp(_pred, _kind))
for _op, _pred in _FLOAT_PREDICATES.items():
    semantics(f"v_cmp_{_op}_f32")(_v_cmp(_pred, "f32"))

