"""A bf16 q against an fp8 k and v (attention_varlen, Hopper): the kernel rounds q to e4m3 itself, one power of two
per 64 rows of a 128-row query tile and head, after rotating it by the signs k was rotated with where given. The test
models those codes (q_codes_model: the rows of a tile past its sequence's end, the next sequence's, count toward the
exponent as in the kernel), then holds the output of the float32-score kernel to the fp8 tests' bound: 1.5x the
rounding floor of P and the output given the inputs the kernel used (test_kernel_gpu.py, varlen_cases.py). The
float16-score kernel (the default) has no floor of its own: it is held to 1.25x the error of the same kernel fed q's
codes with one per-tensor factor (the separate pass a bf16 q would otherwise take; in the runs on the H200 the ratio
stayed at or below 1.11, both carrying the float16 scores' rounding). Fresh inputs every run, channels of
uneven size (RoPE-like); out poisoned with NaN, every element written and finite.
"""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
import varlen_cases as vc
from flashprefill import prepare, reference

cp = pytest.importorskip("cupy", reason=markers.NO_CUPY)
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng()
LENGTHS = [1, 127, 300, 0, 77, 600]
HEADS_Q, HEADS_KV, DIM, TILE_ROWS, GROUP_ROWS = 8, 2, 128, 128, 64
Q_CODE_MAX = {"default": 1.125, "fp32": 448.0}  # float16 scores' bound at dim 128; e4m3's largest


def _per_tensor_codes(x):
    """e4m3 codes of x with one factor: (codes, factor)."""
    factor = float(np.abs(x).max()) / 448
    return ga.to_e4m3(x / factor), factor


def q_codes_model(y, cu, code_max):
    """float64 values of the codes the kernel makes of the rotated q y (total, heads, dim): per sequence, query tile,
    64-row half and head, e the smallest integer with max |y| <= code_max 2^e over the half's rows (past the
    sequence's end too, to the buffer's end), codes = e4m3(y / 2^e)."""
    out = np.zeros_like(y)
    total = y.shape[0]
    _, c = np.frexp(code_max)
    g = code_max / 2.0 ** c
    for b in range(len(cu) - 1):
        for first in range(cu[b], cu[b + 1], GROUP_ROWS):
            rows = slice(first, min(first + GROUP_ROWS, total))
            own = slice(first, min(first + GROUP_ROWS, cu[b + 1]))
            for h in range(y.shape[1]):
                amax = np.abs(y[rows, h]).max()
                e = 0
                if amax > 0:
                    f, k = np.frexp(amax)
                    e = int(k - c + (f > g))
                out[own, h] = ga.to_float(ga.to_e4m3(y[own, h] / 2.0 ** e), np.float64) * 2.0 ** e
    return out


def _inputs(seed, rotate):
    """q's bf16 values, k's and v's codes and factors, cu_seqlens, the rotation's signs, and y: the (rotated) q the
    kernel reads."""
    rng = np.random.default_rng(seed)
    total = sum(LENGTHS)
    q = rng.standard_normal((total, HEADS_Q, DIM)) * np.exp2(rng.uniform(-2, 2, DIM))
    k = rng.standard_normal((total, HEADS_KV, DIM)) * np.exp2(rng.uniform(-2, 2, DIM))
    v = rng.standard_normal((total, HEADS_KV, DIM))
    cu = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int32)
    signs = np.where(rng.random(DIM) < 0.5, -1.0, 1.0).astype(np.float32)
    q_bf16 = ga.to_bf16(q)
    y = ga.to_float(q_bf16, np.float64)
    if rotate:  # k rotated as the quantizer does; the kernel's rotation of q leaves q.k unchanged
        k = prepare.transform(k[None], signs)[0].astype(np.float64)
        y = prepare.transform(y[None], signs)[0].astype(np.float64)
    return q_bf16, _per_tensor_codes(k), _per_tensor_codes(v), cu, signs, y


def _run(q, k, v, cu, scores, q_descale=None, signs=None):
    """attention_varlen into a poisoned out: float64 (total, heads_q, dim), every element written and finite."""
    (k_codes, k_factor), (v_codes, v_factor) = k, v
    out = ga.poisoned_bf16((q.shape[0], HEADS_Q, DIM))
    fp.attention_varlen(ga.to_device(q), ga.to_device(k_codes), ga.to_device(v_codes), cp.asarray(cu), cp.asarray(cu),
                        max(LENGTHS), max(LENGTHS), q_descale=q_descale, k_descale=cp.asarray([k_factor], np.float32),
                        v_descale=cp.asarray([v_factor], np.float32), scores=scores, out=out, check=True,
                        q_rotation_signs=None if signs is None else cp.asarray(signs))
    got = ga.host_f64(out)
    assert np.isfinite(got).all(), "rows not written or not finite"
    return got


def _dequantized(codes_and_factor):
    codes, factor = codes_and_factor
    return ga.to_float(codes, np.float64) * factor


@pytest.mark.parametrize("rotate", [False, True])
def test_bf16_q_float32_scores_within_the_floor(rotate):
    seed = int(RNG.integers(1 << 31))
    q_bf16, k, v, cu, signs, y = _inputs(seed, rotate)
    q_used = q_codes_model(y, cu, Q_CODE_MAX["fp32"])
    k_used, v_used = _dequantized(k), _dequantized(v)
    got = _run(q_bf16, k, v, cu, "fp32", signs=signs if rotate else None)
    for b in range(len(LENGTHS)):
        s = slice(cu[b], cu[b + 1])
        if cu[b + 1] == cu[b]:
            continue
        ref = reference.attention_reference(q_used[None, s], k_used[None, s], v_used[None, s], causal=True)[0]
        floor = reference.relative_l2(vc.p_rounding_floor(q_used[s], k_used[s], v_used[s], True), ref)
        error = reference.relative_l2(got[s], ref)
        assert error <= 1.5 * floor, f"seed={seed}, sequence {b}: {error:.3e} > 1.5x the rounding floor {floor:.3e}"


@pytest.mark.parametrize("rotate", [False, True])
def test_bf16_q_float16_scores_as_a_separate_pass(rotate):
    seed = int(RNG.integers(1 << 31))
    q_bf16, k, v, cu, signs, y = _inputs(seed, rotate)
    ref = np.zeros((y.shape[0], HEADS_Q, DIM))
    k_used, v_used = _dequantized(k), _dequantized(v)
    for b in range(len(LENGTHS)):
        s = slice(cu[b], cu[b + 1])
        if cu[b + 1] > cu[b]:
            ref[s] = reference.attention_reference(y[None, s], k_used[None, s], v_used[None, s], causal=True)[0]
    error = reference.relative_l2(_run(q_bf16, k, v, cu, "default", signs=signs if rotate else None), ref)
    q_codes, q_factor = _per_tensor_codes(y)
    error_pass = reference.relative_l2(_run(q_codes, k, v, cu, "default", q_descale=cp.asarray([q_factor], np.float32)),
                                       ref)
    assert error <= 1.25 * error_pass, f"seed={seed}: bf16 q {error:.3e}, q's codes from a separate pass {error_pass:.3e}"


def test_bf16_q_is_a_varlen_form():
    """An equal-length call with a bf16 q and fp8 k, v is refused (TypeError: the dtypes differ)."""
    q = ga.to_device(ga.to_bf16(np.ones((1, 128, HEADS_Q, DIM))))
    k = ga.to_device(ga.to_e4m3(np.ones((1, 128, HEADS_KV, DIM))))
    with pytest.raises(TypeError, match="all bfloat16 or all float8_e4m3fn"):
        fp.attention(q, k, k)
