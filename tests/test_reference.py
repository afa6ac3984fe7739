"""The float64 reference attention against a triple-loop version, and the error metrics."""
import math

import ml_dtypes
import numpy as np
import pytest

from flashprefill import reference
from flashprefill.reference import attention_reference, error_report, relative_l2


def naive_attention(q, k, v, causal, softmax_scale):
    """Triple loop over (batch, head, query) with Python sums: out (b, sq, hq, dv) and natural-log LSE (b, hq, sq)."""
    batch, seqlen_q, heads_q, dim_qk = q.shape
    _, seqlen_k, heads_kv, dim_v = v.shape
    out = np.zeros((batch, seqlen_q, heads_q, dim_v))
    lse = np.full((batch, heads_q, seqlen_q), -np.inf)
    for b in range(batch):
        for h in range(heads_q):
            kv_head = h // (heads_q // heads_kv)
            for i in range(seqlen_q):
                visible = [j for j in range(seqlen_k) if not causal or j <= i + seqlen_k - seqlen_q]
                if not visible:
                    continue
                scores = {j: softmax_scale * sum(float(q[b, i, h, d]) * float(k[b, j, kv_head, d])
                                                 for d in range(dim_qk)) for j in visible}
                top = max(scores.values())
                weights = {j: math.exp(s - top) for j, s in scores.items()}
                total = sum(weights.values())
                lse[b, h, i] = top + math.log(total)
                for e in range(dim_v):
                    out[b, i, h, e] = sum(w * float(v[b, j, kv_head, e]) for j, w in weights.items()) / total
    return out, lse


def random_qkv(rng, batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim_qk, dim_v):
    q = rng.standard_normal((batch, seqlen_q, heads_q, dim_qk))
    k = rng.standard_normal((batch, seqlen_k, heads_kv, dim_qk))
    v = rng.standard_normal((batch, seqlen_k, heads_kv, dim_v))
    return q, k, v


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (3, 3), (17, 17), (1, 17), (3, 17), (17, 3)])
def test_matches_naive_loops(rng_seed, seqlen_q, seqlen_k, causal):
    rng, seed = rng_seed
    q, k, v = random_qkv(rng, 2, seqlen_q, seqlen_k, heads_q=4, heads_kv=2, dim_qk=5, dim_v=3)
    scale = 0.7
    out, lse = attention_reference(q, k, v, causal=causal, softmax_scale=scale, return_lse=True)
    want_out, want_lse = naive_attention(q, k, v, causal, scale)
    assert out.shape == (2, seqlen_q, 4, 3) and lse.shape == (2, 4, seqlen_q)
    assert out.dtype == np.float64 and lse.dtype == np.float64
    assert np.allclose(out, want_out, rtol=1e-12, atol=1e-12), f"seed={seed} {error_report(out, want_out)}"
    assert np.array_equal(np.isinf(lse), np.isinf(want_lse)), f"seed={seed}"
    seen = np.isfinite(want_lse)
    assert np.allclose(lse[seen], want_lse[seen], rtol=1e-12, atol=1e-12), f"seed={seed}"


def test_causal_rows_without_keys_are_zero(rng_seed):
    rng, seed = rng_seed
    q, k, v = random_qkv(rng, 1, 5, 2, 2, 1, 4, 4)
    out, lse = attention_reference(q, k, v, causal=True, return_lse=True)
    # seqlen_k - seqlen_q = -3: query i sees keys j <= i - 3, so rows 0..2 see nothing.
    assert np.all(out[:, :3] == 0) and np.all(lse[:, :, :3] == -np.inf), f"seed={seed}"
    assert np.all(np.isfinite(lse[:, :, 3:])), f"seed={seed}"


def test_default_scale_and_uniform_keys(rng_seed):
    rng, seed = rng_seed
    q, k, v = random_qkv(rng, 1, 6, 6, 2, 2, 16, 8)
    explicit = attention_reference(q, k, v, softmax_scale=16**-0.5)
    assert np.array_equal(attention_reference(q, k, v), explicit), f"seed={seed}"
    # identical keys: causal attention is the running mean of v, and LSE = scale·q·k + log(visible count)
    k_same = np.broadcast_to(k[:, :1], k.shape)
    out, lse = attention_reference(q, k_same, v, return_lse=True)
    running_mean = np.cumsum(v, axis=1) / np.arange(1, 7)[None, :, None, None]
    assert np.allclose(out, running_mean, atol=1e-12), f"seed={seed}"
    want_lse = np.einsum("bqhd,bhd->bhq", q, k[:, 0]) / 4 + np.log(np.arange(1, 7))
    assert np.allclose(lse, want_lse, atol=1e-12), f"seed={seed}"


def test_low_precision_dtypes_are_converted(rng_seed):
    rng, seed = rng_seed
    q, k, v = random_qkv(rng, 1, 9, 9, 4, 1, 8, 8)
    for dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.float16, np.float32):
        q_low, k_low, v_low = (x.astype(dtype) for x in (q, k, v))
        want = attention_reference(*(x.astype(np.float64) for x in (q_low, k_low, v_low)))
        assert np.array_equal(attention_reference(q_low, k_low, v_low), want), f"seed={seed} {dtype}"


def test_query_chunking_does_not_change_the_result(rng_seed, monkeypatch):
    rng, seed = rng_seed
    q, k, v = random_qkv(rng, 2, 13, 21, 4, 2, 8, 6)
    whole, whole_lse = attention_reference(q, k, v, return_lse=True)
    monkeypatch.setattr(reference, "QUERY_ROWS_PER_CHUNK", 4)
    chunked, chunked_lse = attention_reference(q, k, v, return_lse=True)
    assert np.allclose(chunked, whole, rtol=1e-14, atol=1e-14), f"seed={seed}"
    assert np.allclose(chunked_lse, whole_lse, rtol=1e-14, atol=1e-14), f"seed={seed}"


def test_rejects_inconsistent_shapes():
    q = np.zeros((1, 4, 3, 8))
    with pytest.raises(ValueError, match="multiple"):
        attention_reference(q, np.zeros((1, 4, 2, 8)), np.zeros((1, 4, 2, 8)))
    with pytest.raises(ValueError, match="shape"):
        attention_reference(q, np.zeros((1, 4, 3, 7)), np.zeros((1, 4, 3, 8)))


def test_relative_l2_and_report():
    ref = np.array([[3.0, 4.0], [0.0, 0.0]])
    out = ref + np.array([[0.0, 0.0], [0.0, 0.5]])
    assert relative_l2(ref, ref) == 0.0
    assert relative_l2(out, ref) == pytest.approx(0.1)
    assert relative_l2(out, np.zeros_like(ref)) == pytest.approx(np.linalg.norm(out))
    report = error_report(out, ref)
    assert "relative_l2=1.000e-01" in report and "max_abs=5.000e-01" in report and "(1, 1)" in report
    for bad in (np.nan, np.inf, -np.inf):
        broken = out.copy()
        broken[0, 1] = bad
        assert relative_l2(broken, ref) == float("inf")
        assert not relative_l2(broken, ref) < 1e300
        assert "(0, 1)" in error_report(broken, ref) and "non-finite in out: 1" in error_report(broken, ref)


def _sees(i, j, seqlen_q, seqlen_k, causal):
    return not causal or j <= i + seqlen_k - seqlen_q


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("tensor", ["q", "k", "v"])
def test_non_finite_inputs_reach_what_they_reach(rng_seed, tensor, causal, bad):
    """The rule of the docstring: one non-finite element makes its reach NaN (q: its row; k: every row that sees its
    key, all dims; v: those rows, its dim only; lse as out but untouched by v), where ±inf in q or k reaches a row
    through IEEE scores (a score of +inf or NaN makes the row NaN, one of -inf drops the key); every element that
    does not read it is the reference of the inputs with that element zeroed, bit for bit."""
    rng, seed = rng_seed
    seqlen_q, seqlen_k, heads_q, heads_kv = 7, 11, 4, 2
    q, k, v = random_qkv(rng, 2, seqlen_q, seqlen_k, heads_q, heads_kv, dim_qk=6, dim_v=5)
    x = {"q": q, "k": k, "v": v}[tensor]
    b, row, head, d = (int(rng.integers(n)) for n in x.shape)
    x[b, row, head, d] = 0.0
    clean, clean_lse = attention_reference(q, k, v, causal=causal, return_lse=True)
    x[b, row, head, d] = bad
    out, lse = attention_reference(q, k, v, causal=causal, return_lse=True)
    want = np.zeros(out.shape, dtype=bool)
    want_lse = np.zeros(lse.shape, dtype=bool)
    touched = np.zeros(out.shape, dtype=bool)  # rows that read the element and stay finite
    heads = [head] if tensor == "q" else [h for h in range(heads_q) if h // (heads_q // heads_kv) == head]
    rows = [row] if tensor == "q" else [i for i in range(seqlen_q) if _sees(i, row, seqlen_q, seqlen_k, causal)]
    for h in heads:
        for i in rows:
            if tensor == "v":
                want[b, i, h, d] = True
                continue
            keys = [j for j in range(seqlen_k) if _sees(i, j, seqlen_q, seqlen_k, causal)]
            with np.errstate(invalid="ignore"):
                scores = q[b, i, h] @ k[b, keys, h // (heads_q // heads_kv)].T
            if np.isnan(scores).any() or (scores == np.inf).any():
                want[b, i, h, :] = want_lse[b, h, i] = True
            elif (scores == -np.inf).all():  # no key of positive weight: 0 / 0, lse -inf
                want[b, i, h, :] = True
                assert lse[b, h, i] == -np.inf, f"seed={seed}"
            else:  # scores of -inf are keys of probability 0
                touched[b, i, h, :] = True
    assert np.array_equal(np.isnan(out), want), f"seed={seed}"
    assert np.array_equal(np.isnan(lse), want_lse), f"seed={seed}"
    assert np.isfinite(out[touched]).all(), f"seed={seed}"
    same = ~want & ~touched
    same_lse = ~want_lse & ~(touched | want).any(axis=3).transpose(0, 2, 1)
    assert np.array_equal(out[same], clean[same]) and np.array_equal(lse[same_lse], clean_lse[same_lse])


def test_nan_in_a_masked_key_reaches_nothing(rng_seed):
    rng, seed = rng_seed
    q, k, v = random_qkv(rng, 1, 8, 8, 2, 1, 4, 4)
    k[0, 7, 0, 1] = v[0, 7, 0, 2] = np.nan  # the last key: only the last query sees it
    out, lse = attention_reference(q, k, v, return_lse=True)
    assert np.isnan(out[0, 7]).all() and np.isnan(lse[0, :, 7]).all(), f"seed={seed}"
    assert np.isfinite(out[0, :7]).all() and np.isfinite(lse[0, :, :7]).all(), f"seed={seed}"


@pytest.mark.parametrize("shapes", [((1, 4, 2, 0), (1, 4, 2, 0), (1, 4, 2, 8)), ((1, 0, 2, 8),) * 3,
                                    ((1, 4, 2, 8), (1, 4, 2, 8), (1, 4, 2, 0)), ((4, 2, 8),) * 3])
def test_rejects_empty_or_not_4d(shapes):
    with pytest.raises(ValueError, match="must be 4-d .* every extent > 0"):
        attention_reference(*(np.ones(s) for s in shapes))


def test_relative_l2_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"shape \(2, 3\), ref \(3,\)"):
        relative_l2(np.ones((2, 3)), np.ones(3))
