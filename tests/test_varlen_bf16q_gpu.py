"""A bf16 q against an fp8 k and v (attention_varlen, Hopper): the kernel rounds q to e4m3 itself (one power of two
per 64 query rows), after rotating it by the signs k was rotated with where given. Checked against the float64
reference of the unrounded q and k's and v's codes, and held to the error of the same kernels fed q's codes with one
per-tensor factor (what a separate pass over q gives): with a few outlier rows in q, the per-64-row scale is no worse
(the per-tensor one rounds the other rows into the subnormals). Fresh inputs every run, with
channels of uneven size (RoPE-like) and a few outlier rows; out poisoned with NaN, every element written and finite.
"""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
from flashprefill import prepare, reference

cp = pytest.importorskip("cupy", reason=markers.NO_CUPY)
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng()
LENGTHS = [1, 127, 300, 0, 77, 600]
HEADS_Q, HEADS_KV, DIM = 8, 2, 128


def _inputs(seed):
    rng = np.random.default_rng(seed)
    total = sum(LENGTHS)
    q = rng.standard_normal((total, HEADS_Q, DIM)) * np.exp2(rng.uniform(-2, 2, DIM))
    # outlier rows, 2^10 larger: one factor for all of q pushes the other rows' codes into e4m3's subnormals, one
    # per 64 rows does that only to the rows beside an outlier
    q[rng.integers(0, total, 3)] *= 1024
    k = rng.standard_normal((total, HEADS_KV, DIM)) * np.exp2(rng.uniform(-2, 2, DIM))
    v = rng.standard_normal((total, HEADS_KV, DIM))
    return q, k, v


def _per_tensor_codes(x):
    """e4m3 codes of x with one factor: (codes, factor)."""
    factor = float(np.abs(x).max()) / 448
    return ga.to_e4m3(x / factor), factor


def _reference(q, k, v, cu):
    """float64 out (total, heads_q, dim) of each sequence; q's rows of no sequence 0 (none here)."""
    out = np.zeros((q.shape[0], HEADS_Q, DIM))
    for b in range(len(cu) - 1):
        s = slice(cu[b], cu[b + 1])
        if cu[b + 1] > cu[b]:
            out[s] = reference.attention_reference(q[None, s], k[None, s], v[None, s], causal=True)[0]
    return out


@pytest.mark.parametrize("scores", ["default", "fp32"])  # float16 scores at 192 keys a tile; float32 at 128
@pytest.mark.parametrize("rotate", [False, True])
def test_bf16_q_against_fp8_k_v(rotate, scores):
    seed = int(RNG.integers(1 << 31))
    q, k, v = _inputs(seed)
    cu = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int32)
    signs = np.where(np.random.default_rng(seed + 1).random(DIM) < 0.5, -1.0, 1.0).astype(np.float32)
    q_bf16 = ga.to_bf16(q)
    q_used = ga.to_float(q_bf16, np.float64)  # the values the kernel reads
    if rotate:  # k rotated as the quantizer does; q's rotation by the kernel leaves q.k unchanged
        k = prepare.transform(k[None], signs)[0].astype(np.float64)
        q_used = prepare.transform(q_used[None], signs)[0].astype(np.float64)
    k_codes, k_factor = _per_tensor_codes(k)
    v_codes, v_factor = _per_tensor_codes(v)
    k_used, v_used = ga.to_float(k_codes, np.float64) * k_factor, ga.to_float(v_codes, np.float64) * v_factor
    ref = _reference(q_used, np.repeat(k_used, HEADS_Q // HEADS_KV, 1), np.repeat(v_used, HEADS_Q // HEADS_KV, 1),
                     cu)
    common = dict(cu_seqlens_q=cp.asarray(cu), cu_seqlens_k=cp.asarray(cu), max_seqlen_q=max(LENGTHS),
                  max_seqlen_k=max(LENGTHS), k_descale=cp.asarray([k_factor], np.float32),
                  v_descale=cp.asarray([v_factor], np.float32), scores=scores, check=True)
    kd, vd = ga.to_device(k_codes), ga.to_device(v_codes)

    out = ga.poisoned_bf16((q.shape[0], HEADS_Q, DIM))
    fp.attention_varlen(ga.to_device(q_bf16), kd, vd, out=out,
                        q_rotation_signs=cp.asarray(signs) if rotate else None, **common)
    got = ga.host_f64(out)
    assert np.isfinite(got).all(), f"seed={seed}: rows not written or not finite"
    error = reference.relative_l2(got, ref)

    q_codes, q_factor = _per_tensor_codes(q_used)  # the separate pass: q rounded with one factor
    out_fp8 = ga.poisoned_bf16((q.shape[0], HEADS_Q, DIM))
    fp.attention_varlen(ga.to_device(q_codes), kd, vd, out=out_fp8, q_descale=cp.asarray([q_factor], np.float32),
                        **common)
    error_fp8 = reference.relative_l2(ga.host_f64(out_fp8), ref)
    assert error <= 1.05 * error_fp8, f"seed={seed}: bf16 q {error:.3e}, per-tensor fp8 q {error_fp8:.3e}"


def test_bf16_q_is_a_varlen_form():
    """An equal-length call with a bf16 q and fp8 k, v is refused (TypeError: the dtypes differ)."""
    q = ga.to_device(ga.to_bf16(np.ones((1, 128, HEADS_Q, DIM))))
    k = ga.to_device(ga.to_e4m3(np.ones((1, 128, HEADS_KV, DIM))))
    with pytest.raises(TypeError, match="all bfloat16 or all float8_e4m3fn"):
        fp.attention(q, k, k)
