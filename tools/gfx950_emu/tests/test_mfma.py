"""The emulator's MFMA instructions (tools/gfx950_emu/mfma.py), from register images packed from the layouts
documented there."""
import ml_dtypes
import numpy as np
import pytest

import markers
from tiny_kernels import _images, _d32, _d16, _mfma_kernel, _run_mfma

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]


@pytest.mark.parametrize("shape", ["32x32x16", "16x16x32"])
def test_mfma_bf16(tmp_path, shape, rng):
    m, _, k = (int(x) for x in shape.split("x"))
    rows = 64 // (k // 8)                        # lanes sharing a k block: 32 or 16
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, m)).astype(ml_dtypes.bfloat16)
    c = rng.standard_normal((m, m)).astype(np.float32)
    a_img = _images(lambda l, j: l % rows, lambda l, j: 8 * (l // rows) + j, a, 8)
    b_img = _images(lambda l, j: 8 * (l // rows) + j, lambda l, j: l % rows, b, 8)
    d_regs = 16 if m == 32 else 4
    body = _mfma_kernel(f"v_mfma_f32_{shape}_bf16", 4, d_regs, use_agprs=m == 32)
    d, stats = _run_mfma(tmp_path, body, a_img, b_img, c, _d32 if m == 32 else _d16, d_regs)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-6)
    assert stats.instructions[f"v_mfma_f32_{shape}_bf16"] == 1


def _fp8_k(l, j):
    return 32 * (j // 16) + 16 * (l // 32) + j % 16


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_mfma_f8f6f4_32x32x64(tmp_path, fmt, rng):
    dtype = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
    a = (rng.standard_normal((32, 64)) * 4).astype(dtype)
    b = (rng.standard_normal((64, 32)) * 4).astype(dtype)
    c = rng.standard_normal((32, 32)).astype(np.float32)
    a_img = _images(lambda l, j: l % 32, _fp8_k, a, 32)
    b_img = _images(_fp8_k, lambda l, j: l % 32, b, 32)
    mods = "" if fmt == "e4m3" else "cbsz:1 blgp:1"
    body = _mfma_kernel("v_mfma_f32_32x32x64_f8f6f4", 8, 16, use_agprs=True, mods=mods)
    d, _ = _run_mfma(tmp_path, body, a_img, b_img, c, _d32, 16)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-5)


def test_mfma_scale_f32_32x32x64_f8f6f4(tmp_path, rng):
    """E8M0 scales: byte 1 of the A-scale VGPR, byte 2 of the B-scale VGPR (op_sel)."""
    a = (rng.standard_normal((32, 64)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((64, 32)) * 4).astype(ml_dtypes.float8_e4m3fn)
    c = rng.standard_normal((32, 32)).astype(np.float32)
    ea = rng.integers(120, 135, (2, 32))       # [block, row]
    eb = rng.integers(120, 135, (2, 32))       # [block, column]
    a_img = _images(lambda l, j: l % 32, _fp8_k, a, 32)
    b_img = _images(_fp8_k, lambda l, j: l % 32, b, 32)
    body = _mfma_kernel("v_mfma_f32_32x32x64_f8f6f4", 8, 16, use_agprs=True)
    # lane l holds the scales of block l // 32, row / column l % 32; A's in byte 1 of
    # v100, B's in byte 2 of v101 (loaded from after the C image)
    scale_img = np.stack([ea.reshape(-1) << 8, eb.reshape(-1) << 16], axis=1)
    load_scales = """
  v_lshlrev_b32 v4, 3, v0
  v_add_u32 v4, 0x1000, v4
  global_load_dwordx2 v[100:101], v4, s[8:9]
  s_waitcnt vmcnt(0)
"""
    body = body.replace("  v_mfma_f32_32x32x64_f8f6f4 a[0:15], v[10:17], v[30:37], a[0:15] \n",
                        load_scales +
                        "  v_mfma_scale_f32_32x32x64_f8f6f4 a[0:15], v[10:17], v[30:37], a[0:15], "
                        "v100, v101 op_sel:[1,0,0] op_sel_hi:[0,1,0]\n")
    assert "v_mfma_scale" in body
    d, stats = _run_mfma(tmp_path, body, a_img, b_img, c, _d32, 16, scale_img)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    ref = c.astype(np.float64)
    for blk in range(2):
        ks = slice(32 * blk, 32 * blk + 32)
        ref = ref + np.exp2(ea[blk] - 127.0)[:, None] * np.exp2(eb[blk] - 127.0)[None, :] * (af[:, ks] @ bf[ks])
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-5)
    assert stats.instructions["v_mfma_scale_f32_32x32x64_f8f6f4"] == 1
