"""float64 numpy reference attention and the error metrics the tests report.

Layout everywhere: (batch, seq, heads, dim). Inputs of any float dtype numpy understands (ml_dtypes bfloat16
and float8_e4m3fn included) are converted to float64; device arrays must be copied to the host first.
"""
import numpy as np

QUERY_ROWS_PER_CHUNK = 1024  # float64 scores of 1024 rows × seqlen_k keys: 32 MiB at seqlen_k = 4096


def _as_float64(x):
    return np.asarray(x).astype(np.float64)


def attention_reference(q, k, v, *, causal=True, softmax_scale=None, return_lse=False):
    """Exact softmax(scale·Q·K^T)·V in float64.

    q: (batch, seqlen_q, heads_q, dim_qk); k: (batch, seqlen_k, heads_kv, dim_qk);
    v: (batch, seqlen_k, heads_kv, dim_v); heads_q a multiple of heads_kv, query head h reads kv head
    h // (heads_q // heads_kv). softmax_scale defaults to 1/sqrt(dim_qk).
    causal: query i sees key j iff j <= i + seqlen_k - seqlen_q (mask aligned bottom-right, as FlashAttention);
    a query that sees no key (only possible when seqlen_q > seqlen_k) gets output 0 and LSE -inf.
    Returns out float64 (batch, seqlen_q, heads_q, dim_v) and, with return_lse, the natural-log
    sum_j exp(scale·q·k_j) float64 (batch, heads_q, seqlen_q).

    Non-finite inputs (NaN, ±inf) follow IEEE arithmetic, which is the rule the kernels are held to: nothing a
    non-finite element reaches comes out silently finite and wrong, and nothing it cannot reach changes. A NaN in q's
    row i (of head h) makes out[i, h, :] and lse[h, i] NaN; a NaN in k's row j does that for every query that sees
    key j (the causal mask decides; a masked key reaches nothing) and every query head of its group. ±inf in q or
    k makes scores ±inf or NaN: a row with a score of +inf or NaN is NaN (out and lse), a score of -inf is a key
    with probability 0, as a masked one (a row whose every visible score is -inf: out NaN, 0 / 0, and lse -inf). A NaN or ±inf in v[j, d] makes out[i, h, d] non-finite for the queries
    and heads that see key j, column d only (lse does not read v). The kernels may also turn column d non-finite
    in rows of the same tile that do not see key j (their probability 0 times v's inf or NaN is NaN), never finite
    and wrong.

    Works one (batch, head) and QUERY_ROWS_PER_CHUNK query rows at a time to bound memory.
    """
    q, k, v = _as_float64(q), _as_float64(k), _as_float64(v)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim != 4 or 0 in x.shape:
            raise ValueError(f"{name} must be 4-d (batch, seq, heads, dim) with every extent > 0, got {x.shape}")
    batch, seqlen_q, heads_q, dim_qk = q.shape
    _, seqlen_k, heads_kv, dim_v = v.shape
    if k.shape != (batch, seqlen_k, heads_kv, dim_qk):
        raise ValueError(f"k shape {k.shape} does not match q {q.shape} and v {v.shape}")
    if heads_q % heads_kv:
        raise ValueError(f"heads_q={heads_q} is not a multiple of heads_kv={heads_kv}")
    group = heads_q // heads_kv
    scale = dim_qk**-0.5 if softmax_scale is None else softmax_scale
    bad_v = ~np.isfinite(v)
    finite_v = np.where(bad_v, 0.0, v)
    out = np.zeros((batch, seqlen_q, heads_q, dim_v))
    lse = np.full((batch, heads_q, seqlen_q), -np.inf)
    keys = np.arange(seqlen_k)[None, :]
    for b in range(batch):
        for h in range(heads_q):
            kh, bad_vh = k[b, :, h // group], bad_v[b, :, h // group]
            for start in range(0, seqlen_q, QUERY_ROWS_PER_CHUNK):
                rows = slice(start, min(start + QUERY_ROWS_PER_CHUNK, seqlen_q))
                with np.errstate(invalid="ignore", over="ignore"):
                    scores = scale * (q[b, rows, h] @ kh.T)
                if causal:
                    visible = keys <= np.arange(rows.start, rows.stop)[:, None] + (seqlen_k - seqlen_q)
                    scores = np.where(visible, scores, -np.inf)
                row_max = scores.max(axis=1, keepdims=True)  # NaN where the row sees a NaN score
                seen = row_max != -np.inf
                with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                    p = np.exp(scores - np.where(seen, row_max, 0.0))
                    row_sum = p.sum(axis=1, keepdims=True)
                    pv = p @ finite_v[b, :, h // group]
                    if bad_vh.any():  # v's inf or NaN reaches the rows whose p at its key is not 0
                        reached = ((p != 0).astype(np.float64) @ bad_vh.astype(np.float64)) > 0
                        pv = np.where(reached, np.nan, pv)
                    # a row that sees keys whose scores are all -inf weighs nothing: 0 / 0, NaN (as the kernels)
                    empty = np.where(visible.any(axis=1, keepdims=True), np.nan, 0.0) if causal else np.nan
                    out[b, rows, h] = np.where(seen, pv / np.where(seen, row_sum, 1.0), empty)
                    lse[b, h, rows] = np.where(seen, row_max + np.log(row_sum), -np.inf)[:, 0]
    return (out, lse) if return_lse else out


def relative_l2(out, ref):
    """‖out − ref‖ / ‖ref‖ in float64 (‖out − ref‖ alone when ref is all zero).

    Returns inf when out holds any NaN or inf, so a broken result never passes `relative_l2(...) < tol`.
    out and ref must have the same shape (ValueError otherwise: broadcasting would compare the wrong elements).
    """
    out, ref = _as_float64(out), _as_float64(ref)
    if out.shape != ref.shape:
        raise ValueError(f"out has shape {out.shape}, ref {ref.shape}: relative_l2 compares arrays of one shape")
    if not np.isfinite(out).all():
        return float("inf")
    diff_norm = float(np.linalg.norm((out - ref).ravel()))
    ref_norm = float(np.linalg.norm(ref.ravel()))
    return diff_norm / ref_norm if ref_norm > 0 else diff_norm


def error_report(out, ref):
    """One line for a failing test: relative L2, max abs error and where the worst element is.

    The worst element is the first non-finite one of out if there is any, else the largest |out − ref|.
    """
    out, ref = _as_float64(out), _as_float64(ref)
    finite = np.isfinite(out)
    with np.errstate(invalid="ignore"):
        error = np.abs(out - ref)
    if finite.all():
        worst = np.unravel_index(int(np.argmax(error)), out.shape)
        max_abs = float(error[worst])
    else:
        worst = np.unravel_index(int(np.argmin(finite)), out.shape)
        max_abs = float("inf")
    index = tuple(int(i) for i in worst)
    return (f"relative_l2={relative_l2(out, ref):.3e} max_abs={max_abs:.3e} "
            f"worst at {index}: out={out[worst]:.6g} ref={ref[worst]:.6g} "
            f"(non-finite in out: {int((~finite).sum())})")


def merge_state_reference(out_a, lse_a, out_b, lse_b):
    """Two attention results of the same queries over disjoint keys merged into the result over both, in float64:
    lse = log(exp(lse_a) + exp(lse_b)), out = exp(lse_a − lse)·out_a + exp(lse_b − lse)·out_b.

    out_a, out_b: (batch, seqlen_q, heads_q, dim_v); lse_a, lse_b: (batch, heads_q, seqlen_q), natural log, as
    attention_reference returns them. Returns (out, lse) float64. The rule of flashprefill_merge_state for rows that
    are not finite: a part with lse −inf has weight 0 (the merge is the other part exactly); both −inf give lse −inf
    and out 0·out_a + 0·out_b; an lse of NaN or +inf makes the row NaN (out and lse); out_a's and out_b's elements
    follow IEEE arithmetic (a NaN or inf reaches its own column, even at weight 0).
    """
    out_a, lse_a, out_b, lse_b = (_as_float64(x) for x in (out_a, lse_a, out_b, lse_b))
    if out_a.ndim != 4 or out_b.shape != out_a.shape:
        raise ValueError(f"out_a and out_b must be 4-d (batch, seq, heads, dim) of one shape, got {out_a.shape}, "
                         f"{out_b.shape}")
    batch, seqlen_q, heads_q, _ = out_a.shape
    if lse_a.shape != (batch, heads_q, seqlen_q) or lse_b.shape != lse_a.shape:
        raise ValueError(f"lse_a and lse_b must be (batch, heads_q, seqlen_q) = {(batch, heads_q, seqlen_q)}, got "
                         f"{lse_a.shape}, {lse_b.shape}")
    both_empty = (lse_a == -np.inf) & (lse_b == -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        hi = np.maximum(lse_a, lse_b)  # NaN where either is NaN
        lse = np.where(both_empty, -np.inf, hi + np.log1p(np.exp(-np.abs(lse_a - lse_b))))
        lse = np.where(hi == np.inf, np.nan, lse)
        weights = [np.where(both_empty, 0.0, np.exp(part - lse)).transpose(0, 2, 1)[..., None]
                   for part in (lse_a, lse_b)]
        out = weights[0] * out_a + weights[1] * out_b
    return out, lse
