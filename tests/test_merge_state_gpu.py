"""flashprefill_merge_state on a GPU (fp.merge_state, CuPy arrays through gpu_arrays.py; torch where installed):
against the float64 reference.merge_state_reference, every output poisoned first and every element checked, padding
beside strided outputs untouched; in place; rows that saw no key, NaN and +inf rows; and end to end, attention over
two sets of keys merged against attention over all of them.

Bounds: tools/merge_state_bounds.py (the hardware check's too)."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
from flashprefill.reference import attention_reference, error_report, relative_l2

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
from merge_state_bounds import (DTYPE_PAIR_IDS, DTYPE_PAIRS, check_merge, check_nonfinite,  # noqa: E402
                                nonfinite_parts, rounded)

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
SENTINEL = 1000.0  # a finite poison, exact in bf16, where NaN is an expected output


def _device(host, dtype):
    return ga.to_device(ga.to_bf16(host) if dtype == "bfloat16" else host.astype(np.float32))


def _state(rng, shape, dtype, pad=0):
    """(out, lse) of one part: out N(0, 1) as `dtype`, a view of rows padded by `pad` elements; lse ~ N(5, 4)."""
    batch, seqlen, heads, dim = shape
    out = _device(rng.standard_normal((batch, seqlen, heads, dim + pad)), dtype)[..., :dim]
    return out, ga.to_device(rng.normal(5.0, 4.0, (batch, heads, seqlen)).astype(np.float32))


def _poisoned(shape, dtype, pad=0, value=np.nan):
    """An output filled with `value`, a view of rows padded by `pad` elements; (view, whole buffer)."""
    buffer = ga.full((*shape[:-1], shape[-1] + pad), value, ga.BF16 if dtype == "bfloat16" else np.float32)
    return buffer[..., :shape[-1]], buffer


@pytest.mark.parametrize("padded", [False, True], ids=["contiguous", "padded rows"])
@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=DTYPE_PAIR_IDS)
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
    check_merge(ga.host_f64(out), ga.host_f64(lse), [ga.host_f64(x) for x in (out_a, lse_a, out_b, lse_b)], out_dtype)
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
    check_merge(ga.host_f64(out), ga.host_f64(lse), host, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_default_outputs(rng, dtype):
    shape = (1, 50, 4, 64)
    (out_a, lse_a), (out_b, lse_b) = _state(rng, shape, dtype), _state(rng, shape, dtype)
    out, lse = fp.merge_state(out_a, lse_a, out_b, lse_b)
    assert out.dtype == out_a.dtype and out.shape == shape and lse.dtype == np.float32 and lse.shape == (1, 4, 50)
    ga.synchronize()
    host = [ga.host_f64(x) for x in (out_a, lse_a, out_b, lse_b)]
    check_merge(ga.host_f64(out), ga.host_f64(lse), host, dtype)


def test_last_error_cleared_by_a_success(rng):
    from flashprefill import _lib
    (out_a, lse_a), (out_b, lse_b) = (_state(rng, (1, 10, 2, 64), "bfloat16") for _ in range(2))
    library = _lib.lib()
    assert library.flashprefill_merge_state(None, None) == fp.Status.ERROR_INVALID_ARGUMENT
    assert library.flashprefill_last_error() == b"params is NULL"
    fp.merge_state(out_a, lse_a, out_b, lse_b)
    assert library.flashprefill_last_error() == b""


@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=DTYPE_PAIR_IDS)
def test_rows_that_are_not_finite(rng, dtypes):
    """The rows of merge_state_bounds.nonfinite_parts. Outputs poisoned with a finite value, so that an expected NaN
    proves the element written."""
    in_dtype, out_dtype = dtypes
    shape = (2, 40, 4, 64)
    host = nonfinite_parts(rng, shape, in_dtype)
    args = [_device(host[name], in_dtype) if name.startswith("out") else ga.to_device(host[name].astype(np.float32))
            for name in ("out_a", "lse_a", "out_b", "lse_b")]
    out, _ = _poisoned(shape, out_dtype, value=SENTINEL)
    lse = ga.full((2, 4, 40), SENTINEL, np.float32)
    fp.merge_state(*args, out=out, lse_out=lse)
    ga.synchronize()
    check_nonfinite(ga.host_f64(out), ga.host_f64(lse), host, out_dtype)


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
    bound = 1.25 * whole_error + relative_l2(rounded(exact_out, "bfloat16"), exact_out)
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
    check_merge(out.float().cpu().numpy().astype(np.float64), lse.cpu().numpy().astype(np.float64), host, "bfloat16")
