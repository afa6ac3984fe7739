"""flashprefill_merge_state on a GPU (fp.merge_state, CuPy arrays through gpu_arrays.py; torch where installed):
against the float64 reference.merge_state_reference, every output poisoned first and every element checked, padding
beside strided outputs untouched; in place; rows that saw no key, NaN and +inf rows; and end to end, attention over
two sets of keys merged against attention over all of them.

Bounds. bf16 out: relative L2 within 1.5x that of rounding the exact merge to bf16 (the float32 math costs ~1e-6,
rounding ~1e-3). float32 out: within 2x that of the same formula computed in numpy float32 (both dominated by the
rounding of lse to float32, which moves every weight by up to |lse| 2^-24), plus 2^-21 of |w_a out_a| + |w_b out_b|
(expf's 2 ulps, CUDA's documented bound, beyond numpy's correctly rounded exp). lse: 4 float32 ulps of |lse| + 1."""
import ml_dtypes
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
from flashprefill.reference import attention_reference, error_report, merge_state_reference, relative_l2

pytestmark = pytest.mark.gpu

# (batch, seqlen_q, heads_q, dim_v)
SHAPES = {
    "seqlen 1": (1, 1, 1, 8),
    "rows not a multiple of a CTA's": (2, 77, 3, 128),
    "mistral heads": (1, 1000, 32, 128),
    "dim 64": (1, 300, 4, 64),
    "dim 8: 256 rows a CTA": (1, 600, 2, 8),
    "dim 2056: rows longer than a CTA": (1, 3, 2, 2056),
}
DTYPES = [("bfloat16", "bfloat16"), ("float32", "float32"), ("bfloat16", "float32"), ("float32", "bfloat16")]
DTYPE_IDS = [f"{a}-{b}" for a, b in DTYPES]
SENTINEL = 1000.0  # a finite poison, exact in bf16, where NaN is an expected output


def _device(host, dtype):
    return ga.to_device(ga.to_bf16(host) if dtype == "bfloat16" else host.astype(np.float32))


def _rounded(x, dtype):
    """float64 host values rounded to `dtype` and back."""
    return ga.to_f64(ga.to_bf16(x)) if dtype == "bfloat16" else x.astype(np.float32).astype(np.float64)


def _state(rng, shape, dtype, pad=0):
    """(out, lse) of one part: out N(0, 1) as `dtype`, a view of rows padded by `pad` elements; lse ~ N(5, 4)."""
    batch, seqlen, heads, dim = shape
    out = _device(rng.standard_normal((batch, seqlen, heads, dim + pad)), dtype)[..., :dim]
    return out, ga.to_device(rng.normal(5.0, 4.0, (batch, heads, seqlen)).astype(np.float32))


def _poisoned(shape, dtype, pad=0, value=np.nan):
    """An output filled with `value`, a view of rows padded by `pad` elements; (view, whole buffer)."""
    buffer = ga.full((*shape[:-1], shape[-1] + pad), value, ga.BF16 if dtype == "bfloat16" else np.float32)
    return buffer[..., :shape[-1]], buffer


def _float32_model(out_a, lse_a, out_b, lse_b):
    """The merge in numpy float32 (finite lse only)."""
    la, lb = lse_a.astype(np.float32), lse_b.astype(np.float32)
    hi, lo = np.maximum(la, lb), np.minimum(la, lb)
    lse = hi + np.log1p(np.exp(lo - hi))
    wa, wb = (np.exp(part - lse).transpose(0, 2, 1)[..., None] for part in (la, lb))
    return wa * out_a.astype(np.float32) + wb * out_b.astype(np.float32)


def _check(out, lse, host, out_dtype):
    """out and lse (host float64) against the exact merge of `host`, the float64 (out_a, lse_a, out_b, lse_b)."""
    assert np.isfinite(out).all() and np.isfinite(lse).all(), "NaN left: not every element was written"
    exact_out, exact_lse = merge_state_reference(*host)
    if out_dtype == "float32":
        out_a, lse_a, out_b, lse_b = host
        terms = sum(np.abs(np.exp(part - exact_lse).transpose(0, 2, 1)[..., None] * x)
                    for x, part in ((out_a, lse_a), (out_b, lse_b)))
        bound = 2.0 * relative_l2(_float32_model(*host), exact_out) + \
            2.0**-21 * float(np.linalg.norm(terms.ravel()) / np.linalg.norm(exact_out.ravel()))
    else:
        bound = 1.5 * relative_l2(_rounded(exact_out, "bfloat16"), exact_out)
    assert relative_l2(out, exact_out) <= bound, f"bound {bound:.3e}; " + error_report(out, exact_out)
    lse_error = np.abs(lse - exact_lse) / (np.abs(exact_lse) + 1)
    assert lse_error.max() <= 2.0**-22, f"lse off by {lse_error.max():.3e} of |lse| + 1"


@pytest.mark.parametrize("padded", [False, True], ids=["contiguous", "padded rows"])
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_matches_the_reference(rng, shape, dtypes, padded):
    in_dtype, out_dtype = dtypes
    pad = 8 if padded else 0
    (out_a, lse_a), (out_b, lse_b) = _state(rng, shape, in_dtype, pad), _state(rng, shape, in_dtype, 2 * pad)
    out, buffer = _poisoned(shape, out_dtype, pad)
    lse = ga.full(lse_a.shape, np.nan, np.float32)
    result = fp.merge_state(out_a, lse_a, out_b, lse_b, out=out, lse_out=lse)
    assert result[0] is out and result[1] is lse
    ga.synchronize()
    _check(ga.host_f64(out), ga.host_f64(lse), [ga.host_f64(x) for x in (out_a, lse_a, out_b, lse_b)], out_dtype)
    if padded:
        assert np.isnan(ga.host_f64(buffer)[..., shape[-1]:]).all(), "merge_state wrote past the rows"


@pytest.mark.parametrize("into", ["a", "b"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_in_place(rng, dtype, into):
    shape = (2, 333, 8, 128)
    (out_a, lse_a), (out_b, lse_b) = _state(rng, shape, dtype), _state(rng, shape, dtype)
    host = [ga.host_f64(x) for x in (out_a, lse_a, out_b, lse_b)]
    out, lse = (out_a, lse_a) if into == "a" else (out_b, lse_b)
    result = fp.merge_state(out_a, lse_a, out_b, lse_b, out=out, lse_out=lse)
    assert result[0] is out and result[1] is lse
    ga.synchronize()
    _check(ga.host_f64(out), ga.host_f64(lse), host, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_default_outputs(rng, dtype):
    shape = (1, 50, 4, 64)
    (out_a, lse_a), (out_b, lse_b) = _state(rng, shape, dtype), _state(rng, shape, dtype)
    out, lse = fp.merge_state(out_a, lse_a, out_b, lse_b)
    assert out.dtype == out_a.dtype and out.shape == shape and lse.dtype == np.float32 and lse.shape == (1, 4, 50)
    ga.synchronize()
    host = [ga.host_f64(x) for x in (out_a, lse_a, out_b, lse_b)]
    _check(ga.host_f64(out), ga.host_f64(lse), host, dtype)


def test_last_error_cleared_by_a_success(rng):
    from flashprefill import _lib
    (out_a, lse_a), (out_b, lse_b) = (_state(rng, (1, 10, 2, 64), "bfloat16") for _ in range(2))
    library = _lib.lib()
    assert library.flashprefill_merge_state(None, None) == fp.Status.ERROR_INVALID_ARGUMENT
    assert library.flashprefill_last_error() == b"params is NULL"
    fp.merge_state(out_a, lse_a, out_b, lse_b)
    assert library.flashprefill_last_error() == b""


@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_rows_that_are_not_finite(rng, dtypes):
    """Per query row, every head: 0 a saw no key; 1 b saw none; 2 neither; 3 lse_a NaN; 4 lse_b +inf; 5 both +inf;
    6 a NaN in out_a's column 3; 7 a saw no key but holds a NaN in column 2 (weight 0 times NaN is NaN); the rest
    finite. Outputs poisoned with a finite value, so that an expected NaN proves the element written."""
    in_dtype, out_dtype = dtypes
    shape = (2, 40, 4, 64)
    host = {}
    for part in ("a", "b"):
        out, lse = _state(rng, shape, in_dtype)
        host[f"out_{part}"], host[f"lse_{part}"] = ga.host_f64(out), ga.host_f64(lse)
    host["lse_a"][:, :, [0, 2, 7]] = -np.inf
    host["lse_b"][:, :, [1, 2]] = -np.inf
    host["out_a"][:, [0, 2, 7]] = host["out_b"][:, [1, 2]] = 0.0
    host["lse_a"][:, :, 3], host["lse_b"][:, :, 4] = np.nan, np.inf
    host["lse_a"][:, :, 5] = host["lse_b"][:, :, 5] = np.inf
    host["out_a"][:, 6, :, 3] = host["out_a"][:, 7, :, 2] = np.nan
    args = [_device(host[name], in_dtype) if name.startswith("out") else ga.to_device(host[name].astype(np.float32))
            for name in ("out_a", "lse_a", "out_b", "lse_b")]
    out, _ = _poisoned(shape, out_dtype, value=SENTINEL)
    lse = ga.full((2, 4, 40), SENTINEL, np.float32)
    fp.merge_state(*args, out=out, lse_out=lse)
    ga.synchronize()
    out, lse = ga.host_f64(out), ga.host_f64(lse)
    exact_out, exact_lse = merge_state_reference(host["out_a"], host["lse_a"], host["out_b"], host["lse_b"])
    np.testing.assert_array_equal(np.isnan(out), np.isnan(exact_out))
    np.testing.assert_array_equal(lse[:, :, :3], exact_lse[:, :, :3])  # -inf and the other part's lse exactly
    assert np.isnan(lse[:, :, 3:6]).all() and np.isfinite(lse[:, :, 6:]).all()
    np.testing.assert_array_equal(out[:, :3], _rounded(exact_out[:, :3], out_dtype))  # the other part, exactly
    finite = np.isfinite(exact_out)
    tolerance = (2.0**-8 if out_dtype == "bfloat16" else 0.0) * np.abs(exact_out) + \
        2.0**-17 * (np.abs(np.nan_to_num(host["out_a"])) + np.abs(host["out_b"]))
    assert (np.abs(out - exact_out)[finite] <= tolerance[finite]).all(), error_report(out[finite], exact_out[finite])


# (batch, n keys, prefix s, seqlen_q, heads_q, heads_kv, dim_qk, dim_v, causal)
END_TO_END = {
    "cascade: prefix 512, suffix 512": (1, 1024, 512, 512, 8, 2, 128, 128, True),
    "suffix longer than the queries": (2, 700, 300, 200, 4, 4, 128, 128, True),
    "one-token prefix": (1, 600, 1, 599, 4, 1, 128, 128, True),
    "mla 192/128": (1, 512, 200, 312, 4, 4, 192, 128, True),
    "context parallel halves": (1, 1000, 500, 1000, 8, 2, 128, 128, False),
}


@pytest.mark.parametrize("case", END_TO_END.values(), ids=END_TO_END.keys())
def test_attention_over_two_key_sets_merges_to_the_whole(rng, case):
    """q: the last seqlen_q of n tokens. Part a: keys [0, s), all seen (causal=False); part b: keys [s, n) with the
    causal mask, which bottom-right alignment puts right: query i sees b's key j - s <= i + (n - s - seqlen_q), i.e.
    key j <= i + n - seqlen_q, as attention over [0, n) does. Merged: within the attention's own error over all keys
    (1.25x) plus the merge's rounding to bf16; lse within the attention's own 1e-3."""
    batch, n, s, seqlen_q, heads_q, heads_kv, dim_qk, dim_v, causal = case
    q, k, v = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for shape in (
        (batch, seqlen_q, heads_q, dim_qk), (batch, n, heads_kv, dim_qk), (batch, n, heads_kv, dim_v)))
    dq, dk, dv = (ga.to_device(x) for x in (q, k, v))
    out_a, lse_a = fp.attention(dq, dk[:, :s], dv[:, :s], causal=False, return_lse=True)
    out_b, lse_b = fp.attention(dq, dk[:, s:], dv[:, s:], causal=causal, return_lse=True)
    out, _ = _poisoned(out_a.shape, "bfloat16")
    lse = ga.full(lse_a.shape, np.nan, np.float32)
    fp.merge_state(out_a, lse_a, out_b, lse_b, out=out, lse_out=lse)
    whole = fp.attention(dq, dk, dv, causal=causal)
    ga.synchronize()
    exact_out, exact_lse = attention_reference(q, k, v, causal=causal, return_lse=True)
    out = ga.host_f64(out)
    assert np.isfinite(out).all(), "NaN left: not every element was written"
    whole_error = relative_l2(ga.host_f64(whole), exact_out)
    bound = 1.25 * whole_error + relative_l2(_rounded(exact_out, "bfloat16"), exact_out)
    print(f"merged {relative_l2(out, exact_out):.3e}, attention over all keys {whole_error:.3e}")
    assert relative_l2(out, exact_out) <= bound, f"bound {bound:.3e}; " + error_report(out, exact_out)
    np.testing.assert_allclose(ga.host_f64(lse), exact_lse, rtol=0, atol=1e-3)


def test_torch_inputs(rng):
    torch = markers.torch_or_skip(markers.NO_TORCH_INPUTS)
    shape = (2, 100, 4, 128)
    parts = [(torch.randn(shape, device="cuda").to(torch.bfloat16),
              torch.randn(shape[0], shape[2], shape[1], device="cuda") * 4 + 5) for _ in range(2)]
    (out_a, lse_a), (out_b, lse_b) = parts
    out, lse = fp.merge_state(out_a, lse_a, out_b, lse_b)
    assert out.dtype == torch.bfloat16 and out.device == out_a.device and lse.dtype == torch.float32
    torch.cuda.synchronize()
    host = [x.float().cpu().numpy().astype(np.float64) for x in (out_a, lse_a, out_b, lse_b)]
    _check(out.float().cpu().numpy().astype(np.float64), lse.cpu().numpy().astype(np.float64), host, "bfloat16")
