"""float64 numpy reference attention and the error metrics the tests report.

Layout: (batch, seq, heads, dim); varlen batches (tokens, heads, dim) with offsets, paged caches (pages, page_size,
heads, dim). Inputs of any float dtype numpy understands (ml_dtypes bfloat16 and float8_e4m3fn included) are
converted to float64; device arrays must be copied to the host first.
"""
import numpy as np

from .scales import BlockScales

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


# ---------------------------------------------------------------------------------------------------------
# Variable-length batches and paged KV caches (attention_varlen)

def _descaled(x, descale, b, group):
    """float64 values of sequence b's rows x (n, heads, dim) of codes: descale None, float32 factors () / (1,) /
    (batch, heads_kv) (a query head's factor is its KV head's: `group` query heads a KV head), or BlockScales of
    exponents (batch, heads, blocks), the sequence's blocks counted from its first row."""
    x = _as_float64(x)
    if descale is None:
        return x
    if isinstance(descale, BlockScales):
        blocks = np.arange(x.shape[0]) // descale.block_tokens
        return x * np.exp2(np.asarray(descale.exponents, np.float64)[b][:, blocks]).T[:, :, None]
    factors = np.asarray(descale, np.float64)
    if factors.size == 1:
        return x * factors.reshape(())
    return x * np.repeat(factors[b], group)[None, :, None]


def _sequence(q, k, v, causal, softmax_scale):
    """(out (n_q, heads_q, dim_v), lse (heads_q, n_q)) of one sequence; no key: out 0 and lse -inf."""
    if k.shape[0] == 0 or q.shape[0] == 0:
        return np.zeros((q.shape[0], q.shape[1], v.shape[2])), np.full((q.shape[1], q.shape[0]), -np.inf)
    out, lse = attention_reference(q[None], k[None], v[None], causal=causal, softmax_scale=softmax_scale,
                                   return_lse=True)
    return out[0], lse[0]


def attention_varlen_reference(q, k, v, cu_seqlens_q, cu_seqlens_k, *, seqused_k=None, causal=True,
                               softmax_scale=None, q_descale=None, k_descale=None, v_descale=None, return_lse=False):
    """attention_varlen in float64, sequence by sequence through attention_reference (its rules for non-finite
    inputs hold per sequence).

    q: (total_q, heads_q, dim_qk); k: (total_k, heads_kv, dim_qk); v: (total_k, heads_kv, dim_v): floats, or e4m3
    codes with their descales (host arrays as attention_varlen takes them on the device: None, float32 factors () or
    (batch, heads_kv), BlockScales of exponents (batch, heads, blocks)). cu_seqlens_q, cu_seqlens_k: (batch + 1,)
    host ints; seqused_k: None or (batch,). Sequence b's queries are q's rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]
    - 1, its keys k's rows from cu_seqlens_k[b], seqused_k[b] of them or up to cu_seqlens_k[b + 1]. causal: aligned
    bottom-right per sequence; a query that sees no key (lengths 0 allowed) gets out 0 and lse -inf.
    Returns out float64 (total_q, heads_q, dim_v) and, with return_lse, lse (heads_q, total_q); rows of q in no
    sequence are NaN in both (attention_varlen leaves them as they were).
    """
    cu_q, cu_k = (np.asarray(c, np.int64) for c in (cu_seqlens_q, cu_seqlens_k))
    batch = len(cu_q) - 1
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"q, k, v must be 3-d (tokens, heads, dim), got {q.shape}, {k.shape}, {v.shape}")
    if cu_k.shape != cu_q.shape or (seqused_k is not None and np.shape(seqused_k) != (batch,)):
        raise ValueError(f"cu_seqlens_k must be (batch + 1,) = {cu_q.shape} and seqused_k None or (batch,), got "
                         f"{cu_k.shape}, {None if seqused_k is None else np.shape(seqused_k)}")
    heads_q, heads_kv = q.shape[1], k.shape[1]
    if heads_q % heads_kv:
        raise ValueError(f"heads_q={heads_q} is not a multiple of heads_kv={heads_kv}")
    used = np.diff(cu_k) if seqused_k is None else np.asarray(seqused_k, np.int64)
    out = np.full((q.shape[0], heads_q, v.shape[2]), np.nan)
    lse = np.full((heads_q, q.shape[0]), np.nan)
    for b in range(batch):
        queries, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b] + used[b])
        if keys.stop > k.shape[0] or queries.stop > q.shape[0] or queries.stop < queries.start:
            raise ValueError(f"sequence {b}: queries {queries.start}..{queries.stop}, keys {keys.start}..{keys.stop} "
                             f"out of q's {q.shape[0]} and k's {k.shape[0]} rows")
        out[queries], lse[:, queries] = _sequence(
            _descaled(q[queries], q_descale, b, heads_q // heads_kv), _descaled(k[keys], k_descale, b, 1),
            _descaled(v[keys], v_descale, b, 1), causal, softmax_scale)
    return (out, lse) if return_lse else out


def gather_pages(cache, seqused_k, block_table):
    """The keys of a paged cache (num_pages, page_size, heads, dim) as varlen rows (total, heads, dim): sequence b's
    seqused_k[b] keys from its pages block_table[b, 0], block_table[b, 1], ..., the sequences one after another (at
    the offsets concatenate([0], cumsum(seqused_k))). Entries of block_table past a sequence's last page are not
    read."""
    cache, table = np.asarray(cache), np.asarray(block_table, np.int64)
    used = np.asarray(seqused_k, np.int64)
    page_size = cache.shape[1]
    return np.concatenate([cache[table[b, :-(-used[b] // page_size)]].reshape(-1, *cache.shape[2:])[:used[b]]
                           for b in range(len(used))])


def attention_paged_reference(q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table, *, causal=True,
                              softmax_scale=None, q_descale=None, k_descale=None, v_descale=None, return_lse=False):
    """attention_varlen with paged k and v caches (num_pages, page_size, heads_kv, dim) in float64: the pages
    gathered (gather_pages), then attention_varlen_reference. Descales as there; k's and v's BlockScales hold one
    exponent per page and KV head, (num_pages, heads_kv) with block_tokens == page_size, applied to the pages."""
    caches = []
    for cache, name, scales in ((k_cache, "k", k_descale), (v_cache, "v", v_descale)):
        if isinstance(scales, BlockScales):
            if scales.block_tokens != cache.shape[1]:
                raise ValueError(f"{name}_descale: block_tokens {scales.block_tokens} != page_size {cache.shape[1]}")
            cache = _as_float64(cache) * np.exp2(np.asarray(scales.exponents, np.float64))[:, None, :, None]
        caches.append(gather_pages(cache, seqused_k, block_table))
    cu_k = np.concatenate([[0], np.cumsum(np.asarray(seqused_k, np.int64))])
    k_descale, v_descale = (None if isinstance(s, BlockScales) else s for s in (k_descale, v_descale))
    return attention_varlen_reference(q, *caches, cu_seqlens_q, cu_k, causal=causal, softmax_scale=softmax_scale,
                                      q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                                      return_lse=return_lse)
