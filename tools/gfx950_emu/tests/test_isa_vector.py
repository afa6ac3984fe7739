"""The emulator's vector integer and float ALU (tools/gfx950_emu/isa_vector.py), each on a tiny hand-written
kernel."""
import ml_dtypes
import numpy as np
import pytest

import markers
from tiny_kernels import LOAD_V2_V3, EmulatorError, run, store_rows

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]


def test_vector_int(tmp_path, rng):
    a, b = rng.integers(0, 2**32, (2, 64), dtype=np.uint64).astype(np.uint32)
    body = LOAD_V2_V3 + """
  v_add_u32 v10, v2, v3
  v_sub_u32 v11, v2, v3
  v_mul_lo_u32 v12, v2, v3
  v_mul_u32_u24 v13, v2, v3
  v_lshlrev_b32 v14, 5, v2
  v_lshrrev_b32 v15, 7, v2
  v_lshl_add_u32 v16, v2, 3, v3
  v_and_b32 v17, v2, v3
  v_or_b32 v18, v2, v3
  v_xor_b32 v19, 0x12345678, v2
  v_mov_b32 v20, -7
  v_max_i32 v21, v2, v3
  v_bfe_u32 v22, v2, 3, 5
  v_mad_u32_u24 v23, v2, v3, v2
"""
    out, _ = run(tmp_path, body + store_rows([f"v{i}" for i in range(10, 24)]),
                 np.zeros((14, 64), np.uint32), (a, b))
    A, B = a.astype(np.uint64), b.astype(np.uint64)
    m24 = np.uint64(0xFFFFFF)
    expect = [A + B, A - B, A * B, (A & m24) * (B & m24), A << np.uint64(5), A >> np.uint64(7),
              (A << np.uint64(3)) + B, A & B, A | B, A ^ np.uint64(0x12345678),
              np.full(64, 2**32 - 7, np.uint64),
              np.maximum(a.view(np.int32), b.view(np.int32)).view(np.uint32),
              (A >> np.uint64(3)) & np.uint64(31), (A & m24) * (B & m24) + A]
    for row, e in zip(out, expect):
        np.testing.assert_array_equal(row, np.asarray(e).astype(np.uint64).astype(np.uint32))


def test_carry_chain_and_mad_u64(tmp_path, rng):
    a, b = rng.integers(0, 2**32, (2, 64), dtype=np.uint64).astype(np.uint32)
    body = LOAD_V2_V3 + """
  v_add_co_u32 v10, vcc, v2, v3          // 64-bit (a | a<<32) + (b | 0)
  v_addc_co_u32 v11, vcc, v2, 0, vcc
  v_mov_b32 v4, 7
  v_mov_b32 v5, 0xffffffff
  v_mad_u64_u32 v[12:13], s[10:11], v2, v3, v[4:5]
  v_mov_b32 v14, s10
  v_mov_b32 v15, s11
"""
    out, _ = run(tmp_path, body + store_rows([f"v{i}" for i in range(10, 16)]),
                 np.zeros((6, 64), np.uint32), (a, b))
    A, B = [x.astype(object) for x in (a, b)]
    s = [(int(x) | int(x) << 32) + int(y) for x, y in zip(A, B)]
    np.testing.assert_array_equal(out[0], [v & 0xFFFFFFFF for v in s])
    np.testing.assert_array_equal(out[1], [(v >> 32) & 0xFFFFFFFF for v in s])
    m = [int(x) * int(y) + 0xFFFFFFFF00000007 for x, y in zip(A, B)]
    np.testing.assert_array_equal(out[2], [v & 0xFFFFFFFF for v in m])
    np.testing.assert_array_equal(out[3], [(v >> 32) & 0xFFFFFFFF for v in m])
    carry = sum(1 << i for i, v in enumerate(m) if v >> 64)
    assert (out[4, 0], out[5, 0]) == (carry & 0xFFFFFFFF, carry >> 32)


# ---- vector float ALU --------------------------------------------------------------------------
def test_vector_float(tmp_path, rng):
    x = rng.standard_normal(64).astype(np.float32) * 4
    y = rng.standard_normal(64).astype(np.float32)
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_mov_b32 s12, 0x3e000000
  s_waitcnt vmcnt(0)
  v_add_f32 v10, v2, v3
  v_sub_f32 v11, v2, v3
  v_mul_f32 v12, s12, v2
  v_fma_f32 v13, v2, v3, 0.5
  v_max_f32 v14, v2, v3
  v_min_f32 v15, v2, v3
  v_exp_f32 v16, v2
  v_log_f32 v17, |v2|
  v_rcp_f32 v18, v2
  v_add_f32 v19, -v2, |v3|
  v_mul_f32 v20, 0x40490fdb, v2
  v_cvt_f32_i32 v21, -5
  v_mov_b32 v4, 0xfffffff0
  v_cvt_f32_u32 v22, v4
"""
    out, _ = run(tmp_path, body + store_rows([f"v{i}" for i in range(10, 23)]),
                 np.zeros((13, 64), np.float32), (x, y))
    f32 = np.float32
    expect = [x + y, x - y, f32(0.125) * x,
              (x.astype(np.float64) * y + 0.5).astype(f32), np.maximum(x, y), np.minimum(x, y),
              np.exp2(x), np.log2(np.abs(x)), f32(1) / x, -x + np.abs(y),
              f32(np.pi) * x, np.full(64, -5, f32), np.full(64, 4294967280, f32)]
    for row, e in zip(out, expect):
        np.testing.assert_array_equal(row, np.asarray(e, f32))


@pytest.mark.parametrize("denorm_mode", [0, 3])
def test_denormals_follow_the_descriptor_mode(tmp_path, denorm_mode):
    """FLOAT_DENORM_MODE_32 = 0 flushes f32 denormal inputs and results; 3 keeps them."""
    body = """
  v_mov_b32 v2, 0x00400000            // denormal 2^-127
  v_mul_f32 v10, 1.0, v2              // denormal input
  v_mov_b32 v3, 0x00800000            // 2^-126, the smallest normal
  v_mul_f32 v11, 0.5, v3              // denormal result
""" + store_rows(["v10", "v11"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32), denorm_mode=denorm_mode)
    expect = 0 if denorm_mode == 0 else 0x00400000
    np.testing.assert_array_equal(out, expect)


def test_float_max_and_nan(tmp_path, rng):
    """Our reading of the ISA: v_max_f32 and v_max3_f32 (IEEE mode) return the other operand for a NaN;
    v_maximum3_f32 (IEEE 754-2019 maximum, the forward kernels' row max) returns NaN."""
    x = rng.standard_normal(64).astype(np.float32)
    x[rng.choice(64, 16, replace=False)] = np.nan
    y = rng.standard_normal(64).astype(np.float32)
    body = LOAD_V2_V3 + """
  v_max_f32 v10, v2, v3
  v_max3_f32 v11, v3, v2, -1.0
  v_maximum3_f32 v12, v3, v2, -1.0
"""
    out, _ = run(tmp_path, body + store_rows(["v10", "v11", "v12"]), np.zeros((3, 64), np.float32), (x, y))
    np.testing.assert_array_equal(out[0], np.fmax(x, y))
    np.testing.assert_array_equal(out[1], np.fmax(np.fmax(y, x), np.float32(-1)))
    np.testing.assert_array_equal(out[2], np.maximum(np.maximum(y, x), np.float32(-1)))
    assert np.isnan(out[2]).sum() == 16 and not np.isnan(out[:2]).any()


def test_packed_f32_op_sel(tmp_path, rng):
    """v_pk_mul/add/fma_f32 on register pairs: op_sel_hi:[1,0] gives both halves the low half of source 1 (the
    broadcast compilers emit), op_sel picks the high half for the low result."""
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    body = LOAD_V2_V3 + """
  v_mov_b32 v4, 0x3e000000
  v_mov_b32 v5, 0x7fc00000
  v_pk_mul_f32 v[10:11], v[2:3], v[4:5] op_sel_hi:[1,0]
  v_pk_add_f32 v[12:13], v[2:3], v[2:3] op_sel:[1,0]
  v_pk_fma_f32 v[14:15], v[2:3], v[2:3], v[4:5]
""" + store_rows([f"v{i}" for i in range(10, 16)])
    out, _ = run(tmp_path, body, np.zeros((6, 64), np.float32), (x, y))
    f32 = np.float32
    expect = [x * f32(0.125), y * f32(0.125), y + x, y + y,
              (x.astype(np.float64) * x + 0.125).astype(f32), np.full(64, np.nan, f32)]
    for row, e in zip(out[:5], expect[:5]):
        np.testing.assert_array_equal(row, e)
    assert np.isnan(out[5]).all()  # y * y + NaN


def test_packed_f32_neg(tmp_path, rng):
    """neg_lo / neg_hi negate what a source gives the low / high result: one v_pk_add_f32 is a Hadamard butterfly
    (a + b, a - b) of a pair, whichever halves the op_sels pick."""
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    body = LOAD_V2_V3 + """
  v_pk_add_f32 v[10:11], v[2:3], v[2:3] op_sel:[0,1] op_sel_hi:[0,1] neg_hi:[0,1]
  v_pk_add_f32 v[12:13], v[2:3], v[2:3] op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0] neg_hi:[0,1]
""" + store_rows([f"v{i}" for i in range(10, 14)])
    out, _ = run(tmp_path, body, np.zeros((4, 64), np.float32), (x, y))
    for row, e in zip(out, [x + y, x - y, x - y, x - y]):
        np.testing.assert_array_equal(row, e)


def test_cvt_pk_f16_clamp_keeps_subnormals(tmp_path, rng):
    """v_cvt_pk_f16_f32: round to nearest even into float16, subnormals kept (FLOAT_DENORM_MODE_16_64 = 3, the
    default); clamp saturates to [0, 1] and turns NaN into 0 (DX10 clamp, the default): the exp-free code path."""
    codes = np.arange(64, dtype=np.float32) * 2 - 3  # -3 .. 123 code steps of 2^-24
    x = (codes + 0.5) * np.float32(2.0**-24)  # ties: round to even
    y = np.array([-1.0, np.nan, 2.0, 0.25] * 16, np.float32)
    body = LOAD_V2_V3 + """
  v_cvt_pk_f16_f32 v10, v2, v3 clamp
  v_cvt_pk_f16_f32 v11, v2, v2
""" + store_rows(["v10", "v11"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32), (x, y))
    lo = out[0] & 0x7FFF  # the sign of a clamped -0 is not pinned (the kernels read the low byte only)
    even = np.where(codes + 0.5 < 0, 0, np.round(codes + 0.5))  # numpy rounds half to even
    np.testing.assert_array_equal(lo, even)
    np.testing.assert_array_equal(out[0] >> 16, np.array([0, 0, 0x3C00, 0x3400] * 16))  # -1, NaN, 2 -> 0, 0, 1
    np.testing.assert_array_equal(out[1] & 0xFFFF, x.astype(np.float16).view(np.uint16))


def test_cvt_pk_bf16_rounds_to_nearest_even(tmp_path, rng):
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0xBF808001], np.uint32)  # halfway cases
    x[:4] = ties.view(np.float32)
    y[:2] = [np.inf, -0.0]
    body = LOAD_V2_V3 + """
  v_cvt_pk_bf16_f32 v10, v2, v3
""" + store_rows(["v10"])
    out, _ = run(tmp_path, body, np.zeros((1, 64), np.uint32), (x, y))
    lo = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    hi = y.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(out[0], lo.astype(np.uint32) | (hi.astype(np.uint32) << 16))
    assert [hex(v & 0xFFFF) for v in out[0, :4]] == ["0x3f80", "0x3f82", "0x3f81", "0xbf81"]


def test_permlane32_swap_refuses_partial_exec(tmp_path):
    """Its EXEC semantics are not modelled, so a swap with lanes off is an error, not a guess."""
    body = """
  s_mov_b64 exec, 0xffff
  v_permlane32_swap_b32 v12, v13
  s_mov_b64 exec, -1
""" + store_rows(["v12"])
    with pytest.raises(EmulatorError, match="EXEC not all ones"):
        run(tmp_path, body, np.zeros((1, 64), np.uint32))


def test_perm_readfirstlane_permlane32_accvgpr(tmp_path):
    body = """
  v_mov_b32 v2, 0x44332211
  v_mov_b32 v3, 0x88776655
  s_mov_b32 s10, 0x0c0d0700        // bytes: sel 0 -> 0x55, 7 -> 0x44, 13 -> 0xff, 12 -> 0x00
  v_perm_b32 v10, v2, v3, s10
  v_add_u32 v4, 100, v0
  s_mov_b64 exec, 0xf0
  v_readfirstlane_b32 s11, v4      // lane 4 -> 104
  s_mov_b64 exec, -1
  v_mov_b32 v11, s11
  v_mov_b32 v12, v0
  v_add_u32 v13, 1000, v0
  v_permlane32_swap_b32 v12, v13
  v_accvgpr_write_b32 a3, v4
  v_accvgpr_read_b32 v14, a3
""" + store_rows(["v10", "v11", "v12", "v13", "v14"])
    out, _ = run(tmp_path, body, np.zeros((5, 64), np.uint32), agprs=8)
    lane = np.arange(64)
    np.testing.assert_array_equal(out[0], 0x00FF4455)
    np.testing.assert_array_equal(out[1], 104)
    np.testing.assert_array_equal(out[2], np.where(lane < 32, lane, 1000 + lane - 32))
    np.testing.assert_array_equal(out[3], np.where(lane < 32, lane + 32, 1000 + lane))
    np.testing.assert_array_equal(out[4], 100 + lane)
