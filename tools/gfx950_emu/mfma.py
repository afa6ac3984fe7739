"""MFMA semantics (CDNA4 ISA, "Matrix Arithmetic Instructions"): D = A x B + C.

A is M x K, B is K x N, C and D are M x N (float32). Operands are spread over the 64
lanes; `lane` below is the lane index, `j` the element index within a lane's operand
registers (element j of a 16-bit type is halfword j of the little-endian register block,
of an 8-bit type byte j), `g` the index of a D/C register in its range.

v_mfma_f32_32x32x16_bf16 (A, B: 4 VGPRs = 8 bf16 per lane; C, D: 16 registers)
  A[m][k]: m = lane % 32, k = 8 * (lane // 32) + j         (j = 0..7)
  B[k][n]: n = lane % 32, k = 8 * (lane // 32) + j
  D[m][n]: n = lane % 32, m = 8 * (g // 4) + 4 * (lane // 32) + g % 4   (g = 0..15)
v_mfma_f32_16x16x32_bf16 (A, B: 4 VGPRs = 8 bf16; C, D: 4 registers)
  A[m][k]: m = lane % 16, k = 8 * (lane // 16) + j         (j = 0..7)
  B[k][n]: n = lane % 16, k = 8 * (lane // 16) + j
  D[m][n]: n = lane % 16, m = 4 * (lane // 16) + g          (g = 0..3)
v_mfma_f32_32x32x64_f8f6f4 and v_mfma_scale_f32_32x32x64_f8f6f4 with fp8/bf8 operands
(A, B: 8 VGPRs = 32 bytes per lane; C, D: 16 registers, D layout as 32x32x16)
  A[m][k]: m = lane % 32, k = 32 * (j // 16) + 16 * (lane // 32) + j % 16   (j = 0..31)
  B[k][n]: n = lane % 32, same k
v_mfma_f32_16x16x128_f8f6f4 with fp8/bf8 operands (A, B: 8 VGPRs = 32 bytes per lane; C, D: 4 registers,
D layout as 16x16x32)
  A[m][k]: m = lane % 16, k = 64 * (j // 16) + 16 * (lane // 16) + j % 16   (j = 0..31)
  B[k][n]: n = lane % 16, same k
  cbsz selects A's format, blgp B's: 0 = fp8 E4M3 (OCP, "fn": no inf, NaN = S.1111.111),
  1 = bf8 E5M2 (OCP). The fp6/fp4 formats (2, 3, 4) change the register count and are
  refused.
  Scale form: `..., vScaleA, vScaleB op_sel:[sa0,sb0,0] op_sel_hi:[sa1,sb1,0]`; the byte
  (op_sel[i] + 2 * op_sel_hi[i]) of each lane's scale VGPR is an E8M0 exponent e
  (value 2^(e - 127); e = 255 is NaN). Lane l holds A's scale for row l % 32 and K block
  l // 32 (K block b = k in [32 b, 32 b + 32)), and B's for column l % 32, block l // 32.
  D = sum over blocks b of scaleA[m][b] * scaleB[b][n] * (A_b x B_b) + C.

Sources. The D layouts and the fp8 32x32x64 A/B layouts are those of AMD's ROCm blog
"Matrix Core Programming on AMD CDNA3 and CDNA4 architecture" (Salykov et al., 2025,
section 5, examples 5.3-5.4: lane l loads A row l % 32 at k = (l / 32) * 16 + i * 32 + j,
and writes C[l % 32 + (l / 32) * 4 * 32 + r * 32 + i * 32 * 8] = c_reg[i * 4 + r]), which
follows the CDNA4 ISA guide's layout tables and AMD's matrix instruction calculator. The
calculator snapshot available here (ROCm/amd_matrix_instruction_calculator @ 2ef9189)
stops at CDNA3, so the bf16 double-rate layouts (32x32x16, 16x16x32) are taken to extend
CDNA3's 32x32x8 / 16x16x16 bf16 layouts to 8 contiguous k per lane, as compilers use them
(e.g. FlyDSL's 32x32x16 A fragment: row lane % 32, columns 8 * (lane / 32) .. + 7). The
scale-operand lane mapping is an assumption (see the blog's figure 9); kernels whose
scales are uniform across rows and blocks do not depend on it. Note that any permutation
of k applied to both A and B gives the same product, so only the row/column ownership,
the D layout and (for the scale form) the K-block membership are observable.

Numerics: products and sums are formed in float64 and D is rounded to float32 once, so
results can differ from hardware (which has its own internal accumulation order and
precision) in the last bits of float32; denormal inputs are kept.
"""
import ml_dtypes
import numpy as np

from .errors import EmulatorError, at
from .isa import semantics
from .state import LANES

_LANE = np.arange(LANES)
_FP8_FORMATS = {0: ml_dtypes.float8_e4m3fn, 1: ml_dtypes.float8_e5m2}


class Layout:
    """Index maps of one MFMA shape: a_m/a_k/b_n/b_k [64, elems], d_m/d_n [regs, 64]."""

    def __init__(self, m, n, k, a_m, a_k, d_m, d_n):
        self.m, self.n, self.k = m, n, k
        self.a_m, self.a_k = a_m, a_k
        self.b_n, self.b_k = a_m, a_k          # B mirrors A with n in place of m
        self.d_m, self.d_n = d_m, d_n


def _layout_32x32(k_of):
    """32x32 shape: lane l owns A row / B column l % 32; k_of [64, elems] gives k."""
    g = np.arange(16)[:, None]
    return Layout(32, 32, int(k_of.max()) + 1,
                  np.broadcast_to(_LANE[:, None] % 32, k_of.shape), k_of,
                  8 * (g // 4) + 4 * (_LANE[None, :] // 32) + g % 4,
                  np.broadcast_to(_LANE[None, :] % 32, (16, LANES)))


def _layout_16x16(k_of):
    """16x16 shape: lane l owns A row / B column l % 16; k_of [64, elems] gives k."""
    g = np.arange(4)[:, None]
    return Layout(16, 16, int(k_of.max()) + 1,
                  np.broadcast_to(_LANE[:, None] % 16, k_of.shape), k_of,
                  4 * (_LANE[None, :] // 16) + g, np.broadcast_to(_LANE[None, :] % 16, (4, LANES)))


_J8 = np.arange(8)[None, :]
_J32 = np.arange(32)[None, :]
LAYOUT_32x32x16_BF16 = _layout_32x32(8 * (_LANE[:, None] // 32) + _J8)
LAYOUT_16x16x32_BF16 = _layout_16x16(8 * (_LANE[:, None] // 16) + _J8)
LAYOUT_32x32x64_F8 = _layout_32x32(32 * (_J32 // 16) + 16 * (_LANE[:, None] // 32) + _J32 % 16)
LAYOUT_16x16x128_F8 = _layout_16x16(64 * (_J32 // 16) + 16 * (_LANE[:, None] // 16) + _J32 % 16)


def _bf16_values(block):
    """[regs, 64] uint32 -> float64 [64, 2 * regs] (halfword j of each lane)."""
    halves = block.T.copy().view(np.uint16).astype(np.uint32) << np.uint32(16)
    return halves.view(np.float32).astype(np.float64)


def _fp8_values(block, fmt, ins):
    """[regs, 64] uint32 -> float64 [64, 4 * regs] (byte j of each lane) in format fmt."""
    if fmt not in _FP8_FORMATS:
        raise EmulatorError(f"f8f6f4 operand format {fmt} (fp6/fp4) is not emulated: {at(ins)}")
    return block.T.copy().view(np.uint8).view(_FP8_FORMATS[fmt]).astype(np.float64)


def _scatter(layout_m, layout_k, values, shape):
    out = np.zeros(shape)
    out[layout_m, layout_k] = values
    return out


def _accumulator(wave, ins, op, layout):
    """C as a float64 M x N matrix (an inline constant fills it)."""
    if op.kind == "imm":
        return np.full((layout.m, layout.n), np.float64(np.uint32(op.value).view(np.float32)))
    c = wave.read_block(op, ins).view(np.float32).astype(np.float64)
    return _scatter(layout.d_m, layout.d_n, c, (layout.m, layout.n))


def _write_result(wave, ins, layout, d):
    wave.write_lanes(ins.ops[0], d[layout.d_m, layout.d_n].astype(np.float32).view(np.uint32), ins)


def _check_registers(ins, a_regs, b_regs, d_regs):
    dst, a, b = ins.ops[:3]
    if (a.count, b.count, dst.count) != (a_regs, b_regs, d_regs):
        raise EmulatorError(f"register counts {a.count}/{b.count}/{dst.count} do not match "
                            f"{ins.mnemonic}: {at(ins)}")


def _bf16_mfma(layout, d_regs):
    def run(wave, ins, ctx):
        _check_registers(ins, 4, 4, d_regs)
        a = _bf16_values(wave.read_block(ins.ops[1], ins))
        b = _bf16_values(wave.read_block(ins.ops[2], ins))
        am = _scatter(layout.a_m, layout.a_k, a, (layout.m, layout.k))
        bm = _scatter(layout.b_n, layout.b_k, b, (layout.n, layout.k)).T
        with np.errstate(invalid="ignore"):  # 0 x inf is NaN, as IEEE arithmetic has it: no warning
            _write_result(wave, ins, layout, am @ bm + _accumulator(wave, ins, ins.ops[3], layout))
    return run


semantics("v_mfma_f32_32x32x16_bf16")(_bf16_mfma(LAYOUT_32x32x16_BF16, 16))
semantics("v_mfma_f32_16x16x32_bf16")(_bf16_mfma(LAYOUT_16x16x32_BF16, 4))


def _fp8_operands(wave, ins, layout):
    _check_registers(ins, 8, 8, layout.d_m.shape[0])
    a = _fp8_values(wave.read_block(ins.ops[1], ins), ins.mods.get("cbsz", 0), ins)
    b = _fp8_values(wave.read_block(ins.ops[2], ins), ins.mods.get("blgp", 0), ins)
    am = _scatter(layout.a_m, layout.a_k, a, (layout.m, layout.k))
    bm = _scatter(layout.b_n, layout.b_k, b, (layout.n, layout.k)).T
    return am, bm


def _fp8_mfma(layout):
    def run(wave, ins, ctx):
        """D = A x B + C with fp8/bf8 A and B (formats from cbsz / blgp)."""
        am, bm = _fp8_operands(wave, ins, layout)
        _write_result(wave, ins, layout, am @ bm + _accumulator(wave, ins, ins.ops[3], layout))
    return run


semantics("v_mfma_f32_32x32x64_f8f6f4", mods=("cbsz", "blgp"))(_fp8_mfma(LAYOUT_32x32x64_F8))
semantics("v_mfma_f32_16x16x128_f8f6f4", mods=("cbsz", "blgp"))(_fp8_mfma(LAYOUT_16x16x128_F8))


def _e8m0_scales(wave, ins, operand_index, select):
    """float64 [64]: 2^(e - 127) of byte `select` of each lane's scale VGPR (255 -> NaN)."""
    e = (wave.read_lanes(ins.ops[operand_index], ins) >> np.uint32(8 * select)) & np.uint32(0xFF)
    return np.where(e == 255, np.nan, np.exp2(e.astype(np.float64) - 127))


@semantics("v_mfma_scale_f32_32x32x64_f8f6f4", mods=("cbsz", "blgp", "op_sel", "op_sel_hi"))
def v_mfma_scale_f32_32x32x64_f8f6f4(wave, ins, ctx):
    """D = sum_b scaleA[:, b] * scaleB[b, :] * (A_b x B_b) + C over the two 32-wide K blocks."""
    layout = LAYOUT_32x32x64_F8
    am, bm = _fp8_operands(wave, ins, layout)
    op_sel = ins.mods.get("op_sel", (0, 0, 0))
    op_sel_hi = ins.mods.get("op_sel_hi", (0, 0, 0))
    scale_a = _e8m0_scales(wave, ins, 4, op_sel[0] + 2 * op_sel_hi[0]).reshape(2, 32)
    scale_b = _e8m0_scales(wave, ins, 5, op_sel[1] + 2 * op_sel_hi[1]).reshape(2, 32)
    d = _accumulator(wave, ins, ins.ops[3], layout)
    for blk in range(2):
        ks = slice(32 * blk, 32 * blk + 32)
        d = d + scale_a[blk][:, None] * scale_b[blk][None, :] * (am[:, ks] @ bm[ks, :])
    _write_result(wave, ins, layout, d)
