"""numpy stand-ins of flashprefill's and FlashAttention-3's calls for tools/bench_varlen.py's dry run: the same
names and arguments as the calls tools/varlen_peers.py makes, computing causal attention in float32 on the host
from each form of the inputs, so that a dry run checks the benchmark's plumbing (cu_seqlens, seqused_k, page tables
and paged caches, per-sequence descales) by comparing the forms' outputs, as the GPU run does.

Each stand-in reads its inputs as the ABI defines them (include/flashprefill.h, 0.10.0), independently of how
tools/bench_varlen_cases.py lays them out: sequence b's queries are rows cu_q[b] .. cu_q[b + 1] - 1; its keys the first
seqused_k[b] (else cu_k[b + 1] - cu_k[b]) rows from cu_k[b], or key j in page table[b, j // page_size], row
j % page_size; descales (batch, heads_kv) per sequence and KV head, query head h reading KV head
h // (heads_q // heads_kv), or BlockScales: (batch, heads, blocks) per block of a sequence's tokens, (num_pages,
heads_kv) per page of a paged k or v.
"""
import numpy as np

from flashprefill import BlockScales, Error, Status, prepare


def _row_descales(descale, b, positions, heads, pages=None):
    """float32 (len(positions), heads): the descale of each of sequence b's rows at these positions (of its tokens)
    and heads, or None. Factors (batch, heads_kv): one per sequence and KV head, query head h reading KV head
    h // (heads / heads_kv); BlockScales (batch, heads, blocks): one per block of a sequence's positions; paged k and v
    (pages: the page of each row) BlockScales (num_pages, heads_kv): one per page."""
    if descale is None:
        return None
    if isinstance(descale, BlockScales):
        e = np.asarray(descale.exponents).astype(np.int32)
        e = e[pages] if pages is not None else e[b][:, positions // descale.block_tokens].T
        return np.ldexp(np.float32(1.0), e).astype(np.float32)
    factors = np.asarray(descale, dtype=np.float32)[b]
    return np.broadcast_to(np.repeat(factors, heads // len(factors)), (len(positions), heads))


def _values(x, scales):
    """float32 values of rows x (rows, heads, dim): codes times their descales."""
    t = np.asarray(x, dtype=np.float32)
    return t if scales is None else t * scales[:, :, None]


def _sequence(q, k, v, softmax_scale):
    """out float32 (lq, heads_q, dim_v) of one sequence's values: causal, aligned bottom-right; a query that sees no
    key gets 0."""
    (lq, heads_q, dim_qk), (lk, heads_kv, _) = q.shape, k.shape
    qs = q.reshape(lq, heads_kv, heads_q // heads_kv, dim_qk)
    # (kv head, group, query, key) scores, key j visible to query i iff j <= i + lk - lq
    s = np.matmul(qs.transpose(1, 2, 0, 3), k.transpose(1, 2, 0)[:, None]) * softmax_scale
    visible = np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq)
    s = np.where(visible, s, -np.inf)
    row_max = s.max(axis=-1, keepdims=True, initial=-np.inf)
    p = np.where(visible, np.exp(s - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
    sums = p.sum(axis=-1, keepdims=True)
    o = np.matmul(p / np.where(sums > 0, sums, 1.0), v.transpose(1, 0, 2)[:, None])
    return o.transpose(2, 0, 1, 3).reshape(lq, heads_q, o.shape[-1])


def attention_varlen(q, k, v, cu_q, cu_k, seqused_k, block_table, descales, softmax_scale, out):
    """Writes each sequence's output into out (total_q, heads_q, dim_v) and returns it; k and v contiguous
    (cu_k, seqused_k optional) or paged (block_table, seqused_k); descales (q, k, v) as _row_descales takes them."""
    qd, kd, vd = descales
    cu_q = np.asarray(cu_q)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    for b in range(len(cu_q) - 1):
        rows = slice(int(cu_q[b]), int(cu_q[b + 1]))
        if block_table is None:
            start = int(np.asarray(cu_k)[b])
            end = int(np.asarray(cu_k)[b + 1]) if seqused_k is None else start + int(np.asarray(seqused_k)[b])
            j, pages = np.arange(end - start), None
            ks, vs = k[start:end], v[start:end]
        else:
            j = np.arange(int(np.asarray(seqused_k)[b]))
            pages, row = np.asarray(block_table)[b, j // k.shape[1]], j % k.shape[1]
            ks, vs = k[pages, row], v[pages, row]
        i = np.arange(rows.stop - rows.start)
        values = (_values(q[rows], _row_descales(qd, b, i, q.shape[1])),
                  _values(ks, _row_descales(kd, b, j, ks.shape[1], pages)),
                  _values(vs, _row_descales(vd, b, j, vs.shape[1], pages)))
        out[rows] = _sequence(*values, scale).astype(out.dtype)
    return out


class Flashprefill:
    """flashprefill's attention_varlen, varlen_workspace_bytes and attention; BlockScales, Error and Status are the
    real ones."""
    BlockScales, Error, Status = BlockScales, Error, Status

    @staticmethod
    def varlen_workspace_bytes(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, **kwargs):
        return 16 * len(cu_seqlens_q)

    @staticmethod
    def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, seqused_k=None,
                         block_table=None, causal=True, softmax_scale=None, q_descale=None, k_descale=None,
                         v_descale=None, out=None, workspace=None, check=False, q_rotation_signs=None, **kwargs):
        if not causal or out is None or workspace is None:
            raise ValueError("the stand-in takes what the benchmark passes: causal, out and workspace given")
        if q_rotation_signs is not None:  # bf16 q, rotated as the kernel does (its rounding to e4m3 left out)
            q = prepare.transform_varlen(q, np.asarray(cu_seqlens_q).tolist(), q_rotation_signs)
        return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table,
                                (q_descale, k_descale, v_descale), softmax_scale, out)

    @staticmethod
    def attention(q, k, v, *, causal=True, softmax_scale=None, q_descale=None, k_descale=None, v_descale=None,
                  out=None, **kwargs):
        if not causal or out is None:
            raise ValueError("the stand-in takes what the benchmark passes: causal, out given")
        batch, seq = q.shape[:2]
        q, k, v = (t.reshape((batch * seq,) + t.shape[2:]) for t in (q, k, v))
        cu = np.arange(batch + 1) * seq
        attention_varlen(q, k, v, cu, cu, None, None, (q_descale, k_descale, v_descale), softmax_scale,
                         out.reshape(q.shape[:2] + out.shape[-1:]))
        return out


class FlashAttention3:
    """fa3_fwd_interface's flash_attn_varlen_func and flash_attn_with_kvcache. The paged form refuses fp8 and pages
    under 256 tokens, which is what the 0.0.3 wheel, built with FLASHATTENTION_DISABLE_PAGEDKV (paged KV only through
    TMA, pages a multiple of its key tile), is expected to do; the GPU run reports what it really does."""

    @staticmethod
    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k=None,
                               causal=False, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                               **kwargs):
        if not causal:
            raise ValueError("the stand-in is causal only, as the benchmark calls it")
        out = np.empty(q.shape[:2] + v.shape[-1:], dtype=np.float32)
        return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, None,
                                (q_descale, k_descale, v_descale), softmax_scale, out)

    @staticmethod
    def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, page_table=None, cu_seqlens_q=None,
                                max_seqlen_q=None, causal=False, q_descale=None, k_descale=None, v_descale=None,
                                softmax_scale=None, **kwargs):
        if not causal:
            raise ValueError("the stand-in is causal only, as the benchmark calls it")
        if q.dtype.itemsize == 1 or k_cache.shape[1] % 256:
            raise RuntimeError("This flash attention build does not support paged KV. (stand-in)")
        out = np.empty(q.shape[:2] + v_cache.shape[-1:], dtype=np.float32)
        return attention_varlen(q, k_cache, v_cache, cu_seqlens_q, None, cache_seqlens, page_table,
                                (q_descale, k_descale, v_descale), softmax_scale, out)
