"""Emulator semantics that AMD's aiter kernels needed (tests/test_gfx950_aiter_emulated.py runs those kernels):
buffer loads and stores through a V# with range checking, buffer loads into LDS, DPP (v_mov, v_mul_f32, v_mul_i32_i24),
v_mov_b64, v_permlane16_swap_b32, SOPK, a few VALU forms, the unified VGPR/AGPR file (and its aliasing refused),
local label symbols, v_mfma_f32_16x16x128_f8f6f4. Each on a tiny kernel assembled with clang-22, as tiny_kernels.py
does."""
import ml_dtypes
import numpy as np
import pytest

import markers
from tiny_kernels import LOAD_V2_V3, EmulatorError, _d16, _images, _mfma_kernel, _run_mfma, run, store_rows

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]

# s[12:15] = a raw V# over arg1 with num_records = s16: base from s[6:7], stride 0, dword 3 as AMD's kernels set it
_RSRC = """
  s_mov_b32 s12, s6
  s_and_b32 s13, s7, 0xffff
  s_mov_b32 s14, s16
  s_mov_b32 s15, 0x20000
"""


def test_buffer_load_range_check_counts_soffset(tmp_path, rng):
    """dwordx4 at lane * 16 + soffset 32 over 1000 bytes: dwords past byte 1000 (offset with soffset) read 0."""
    src = rng.integers(1, 2**32, 64 * 4 + 64, dtype=np.uint64).astype(np.uint32)
    body = "  s_movk_i32 s16, 1000\n" + _RSRC + """
  v_lshlrev_b32 v2, 4, v0
  s_mov_b32 s17, 32
  buffer_load_dwordx4 v[20:23], v2, s[12:15], s17 offen
  s_waitcnt vmcnt(0)
""" + store_rows(["v20", "v21", "v22", "v23"])
    out, _ = run(tmp_path, body, np.zeros((4, 64), np.uint32), (src,))
    byte = 32 + 16 * np.arange(64)[None, :] + 4 * np.arange(4)[:, None]      # [dword, lane]
    want = np.where(byte + 4 <= 1000, src[np.minimum(byte // 4, src.size - 1)], 0)
    np.testing.assert_array_equal(out, want)
    assert (out == 0).any() and (out != 0).any()


def test_buffer_store_drops_out_of_range_dwords(tmp_path):
    """Stores past num_records (here 128 bytes, offset:64 per lane 4 bytes) leave memory untouched."""
    body = "  s_movk_i32 s16, 128\n" + _RSRC + """
  v_add_u32 v3, 7, v0
  buffer_store_dword v3, v1, s[12:15], 0 offen offset:64
  s_waitcnt vmcnt(0)
"""
    dst = np.full(128, 0xDEAD, np.uint32)
    body_read = body + """
  global_load_dword v4, v1, s[6:7]
  s_waitcnt vmcnt(0)
""" + store_rows(["v4"])
    out, _ = run(tmp_path, body_read, np.zeros((1, 64), np.uint32), (dst,))
    lane = np.arange(64)
    # word w of arg1 is written by lane w - 16 while 64 + 4 * lane + 4 <= 128, i.e. lanes 0..15
    want = np.where((lane >= 16) & (lane < 32), lane - 16 + 7, 0xDEAD)
    np.testing.assert_array_equal(out[0], want)


def test_buffer_load_dwordx4_to_lds(tmp_path, rng):
    """`lds`: lane l's 16 bytes land at M0 + offset:N + 16 l; no VGPR is written."""
    src = rng.integers(0, 2**32, 64 * 4 + 8, dtype=np.uint64).astype(np.uint32)
    body = "  s_movk_i32 s16, 4096\n" + _RSRC + """
  v_lshlrev_b32 v2, 4, v0
  v_mov_b32 v20, 5
  s_movk_i32 m0, 0x100
  buffer_load_dwordx4 v2, s[12:15], 0 offen offset:32 lds
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 v3, 2, v0
  ds_read_b32 v21, v3 offset:288
  ds_read_b32 v22, v3 offset:544
  s_waitcnt lgkmcnt(0)
""" + store_rows(["v20", "v21", "v22"])
    out, _ = run(tmp_path, body, np.zeros((3, 64), np.uint32), (src,), lds=2048)
    lds_words = src.reshape(-1)[8:8 + 128]        # global bytes 32.. land at LDS 0x100 + 32 = 288
    np.testing.assert_array_equal(out[0], 5)
    np.testing.assert_array_equal(out[1], lds_words[:64])
    np.testing.assert_array_equal(out[2], lds_words[64:128])


def test_dpp_mov_and_mul(tmp_path, rng):
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    body = LOAD_V2_V3 + """
  v_mov_b32 v10, 0
  v_mov_b32_dpp v10, v2 quad_perm:[2,3,0,1] row_mask:0xf bank_mask:0xf
  v_mov_b32 v11, 0
  v_mov_b32_dpp v11, v2 row_newbcast:5 row_mask:0x5 bank_mask:0xf
  v_mul_f32_dpp v12, v2, v3 row_newbcast:0 row_mask:0xf bank_mask:0x3
""" + store_rows(["v10", "v11", "v12"])
    out, _ = run(tmp_path, body, np.zeros((3, 64), np.uint32), (x, y))
    lane = np.arange(64)
    np.testing.assert_array_equal(out[0].view(np.float32), x[lane - lane % 4 + np.array([2, 3, 0, 1])[lane % 4]])
    bcast = x[lane - lane % 16 + 5]
    np.testing.assert_array_equal(out[1].view(np.float32), np.where((lane // 16) % 2 == 0, bcast, 0))
    written = lane % 16 < 8                       # bank_mask 0x3: lanes 0-7 of each row
    mul = (x[lane - lane % 16] * y).astype(np.float32)
    np.testing.assert_array_equal(out[2][written].view(np.float32), mul[written])


def test_dpp_mul_i32_i24_and_mov_b64(tmp_path, rng):
    """AMD's fp8 fmha forward: v_mul_i32_i24_dpp broadcasts a quad's lane; v_mov_b64 copies a pair or a constant."""
    x = rng.integers(-2**23, 2**23, 64).astype(np.int32) | (rng.integers(0, 256, 64) << 24).astype(np.int32)
    y = rng.integers(-2**23, 2**23, 64).astype(np.int32)
    body = LOAD_V2_V3 + """
  v_mov_b32 v10, 0x5a5a
  v_mul_i32_i24_dpp v10, v2, v3 quad_perm:[3,3,3,3] row_mask:0xf bank_mask:0xe
  v_mov_b64 v[12:13], v[2:3]
  v_mov_b64 v[14:15], -7
""" + store_rows(["v10", "v12", "v13", "v14", "v15"])
    out, _ = run(tmp_path, body, np.zeros((5, 64), np.uint32), (x, y))
    lane = np.arange(64)
    x24 = ((x.astype(np.int64) & 0xFFFFFF) ^ 0x800000) - 0x800000
    product = (x24[lane - lane % 4 + 3] * y) & 0xFFFFFFFF
    np.testing.assert_array_equal(out[0], np.where(lane % 16 >= 4, product, 0x5A5A))   # bank_mask 0xe: not lanes 0-3
    np.testing.assert_array_equal(out[1:3], np.stack([x, y]).view(np.uint32))
    np.testing.assert_array_equal(out[3:5], np.full((2, 64), [[0xFFFFFFF9], [0xFFFFFFFF]]))


def test_permlane16_swap(tmp_path):
    """vdst's odd 16-lane rows trade places with vsrc's even rows."""
    body = """
  v_add_u32 v10, 100, v0
  v_add_u32 v11, 200, v0
  v_permlane16_swap_b32 v10, v11
  s_nop 1
""" + store_rows(["v10", "v11"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32))
    lane = np.arange(64)
    odd = (lane // 16) % 2 == 1
    np.testing.assert_array_equal(out[0], np.where(odd, 200 + lane - 16, 100 + lane))
    np.testing.assert_array_equal(out[1], np.where(odd, 200 + lane, 100 + lane + 16))


def test_sopk_and_valu_forms(tmp_path):
    body = """
  s_movk_i32 s10, 0xfff0             // -16
  s_addk_i32 s10, 0x13               // 3
  s_cmpk_eq_u32 s10, 3
  s_cselect_b32 s11, 1, 0
  s_cmpk_lt_i32 s10, 0xffff          // 3 < -1: no
  s_cselect_b32 s12, 1, 0
  v_sub_u32 v2, 5, v0                // 5 - lane
  v_mul_i32_i24 v3, v2, -3           // signed 24-bit
  v_add_i32 v4, v2, s10
  v_sub_i32 v5, v2, 64
  v_readlane_b32 s13, v2, 9
  v_mov_b32 v6, s11
  v_mov_b32 v7, s12
  v_mov_b32 v8, s13
  v_cvt_f32_u32 v12, 4
  v_rcp_iflag_f32 v12, v12
  v_nop
""" + store_rows(["v3", "v4", "v5", "v6", "v7", "v8", "v12"])
    out, _ = run(tmp_path, body, np.zeros((7, 64), np.uint32))
    lane = np.arange(64)
    i32 = out.view(np.int32)
    np.testing.assert_array_equal(i32[0], (5 - lane) * -3)
    np.testing.assert_array_equal(i32[1], 5 - lane + 3)
    np.testing.assert_array_equal(i32[2], 5 - lane - 64)
    np.testing.assert_array_equal(out[3:6, 0], [1, 0, (5 - 9) & 0xFFFFFFFF])
    np.testing.assert_array_equal(out[6].view(np.float32), 0.25)


def test_cvt_pk_fp8_f32_op_sel_keeps_other_half(tmp_path, rng):
    x = (rng.standard_normal((4, 64)) * 8).astype(np.float32)
    body = """
  v_lshlrev_b32 v6, 4, v0
  global_load_dwordx4 v[2:5], v6, s[6:7]
  s_waitcnt vmcnt(0)
  v_mov_b32 v10, 0x5a5a5a5a
  v_cvt_pk_fp8_f32 v10, v2, v3
  v_mov_b32 v11, 0x5a5a5a5a
  v_cvt_pk_fp8_f32 v11, v4, v5 op_sel:[0,0,1]
""" + store_rows(["v10", "v11"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32), (x.T.copy(),))   # lane l's 4 floats at 16 l
    f8 = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(np.uint32)
    np.testing.assert_array_equal(out[0], 0x5A5A0000 | f8[0] | f8[1] << 8)
    np.testing.assert_array_equal(out[1], 0x00005A5A | f8[2] << 16 | f8[3] << 24)


def test_vgprs_above_accum_offset_without_agprs(tmp_path):
    """The unified file: with accum_offset 32, a kernel that uses no AGPRs may use v32-v39 (AMD's fmha hd128 does)."""
    body = """
  v_add_u32 v32, 77, v0
  v_mov_b32 v39, v32
""" + store_rows(["v39"])
    out, _ = run(tmp_path, body, np.zeros((1, 64), np.uint32), vgprs=32, agprs=8)
    np.testing.assert_array_equal(out[0], 77 + np.arange(64))


@pytest.mark.parametrize("order", ["agpr first", "vgpr first"])
def test_one_register_as_vgpr_and_agpr_is_an_error(tmp_path, order):
    """v33 is a1 when accum_offset is 32: using both is refused, whichever comes first."""
    uses = ["  v_accvgpr_write_b32 a1, v0", "  v_mov_b32 v33, 0"]
    body = "\n".join(uses if order == "agpr first" else uses[::-1])
    with pytest.raises(EmulatorError, match=r"unified register 33, used by this wave both as a VGPR and as an AGPR"):
        run(tmp_path, body, np.zeros(1, np.uint32), vgprs=32, agprs=8)


def test_branch_to_a_local_label_symbol(tmp_path):
    """A label the assembler keeps as a local symbol (no .L prefix) is a branch target, not a new function."""
    body = """
  s_mov_b32 s10, 0
  v_mov_b32 v10, 0
again:
  v_add_u32 v10, 3, v10
  s_add_u32 s10, s10, 1
  s_cmp_lt_u32 s10, 5
  s_cbranch_scc1 again
""" + store_rows(["v10"])
    out, _ = run(tmp_path, body, np.zeros((1, 64), np.uint32))
    np.testing.assert_array_equal(out[0], 15)


def _k16x128(l, j):
    return 64 * (j // 16) + 16 * (l // 16) + j % 16


def test_mfma_f8f6f4_16x16x128(tmp_path, rng):
    a = (rng.standard_normal((16, 128)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((128, 16)) * 4).astype(ml_dtypes.float8_e4m3fn)
    c = rng.standard_normal((16, 16)).astype(np.float32)
    a_img = _images(lambda l, j: l % 16, _k16x128, a, 32)
    b_img = _images(_k16x128, lambda l, j: l % 16, b, 32)
    body = _mfma_kernel("v_mfma_f32_16x16x128_f8f6f4", 8, 4, use_agprs=False)
    d, stats = _run_mfma(tmp_path, body, a_img, b_img, c, _d16, 4)
    np.testing.assert_allclose(d, a.astype(np.float64) @ b.astype(np.float64) + c, rtol=1e-6, atol=1e-5)
    assert stats.instructions["v_mfma_f32_16x16x128_f8f6f4"] == 1

