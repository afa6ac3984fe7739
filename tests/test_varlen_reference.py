"""The float64 varlen and paged references (reference.attention_varlen_reference, attention_paged_reference) against
the equal-length reference: equal lengths give its numbers exactly, each sequence of a varlen batch is the
equal-length reference of that sequence alone, a paged cache is its keys gathered, and fp8 descales of each kind
index sequences (and pages) as attention_varlen states."""
import ml_dtypes
import numpy as np
import pytest

import flashprefill as fp
from flashprefill import fp8
from flashprefill.reference import (attention_paged_reference, attention_reference, attention_varlen_reference,
                                    gather_pages)

HEADS_Q, HEADS_KV = 4, 2


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def varlen_qkv(rng, lengths_q, lengths_k, dim_qk=8, dim_v=6, extra_q_rows=0):
    """Random float64 q (total_q + extra_q_rows, heads_q, dim_qk), k, v (total_k, heads_kv, dim)."""
    return (rng.standard_normal((sum(lengths_q) + extra_q_rows, HEADS_Q, dim_qk)),
            rng.standard_normal((sum(lengths_k), HEADS_KV, dim_qk)),
            rng.standard_normal((sum(lengths_k), HEADS_KV, dim_v)))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seqlen_q, seqlen_k", [(1, 1), (17, 17), (5, 17)])
def test_equal_lengths_are_the_equal_length_reference_exactly(rng, causal, seqlen_q, seqlen_k):
    batch = 3
    q, k, v = varlen_qkv(rng, [seqlen_q] * batch, [seqlen_k] * batch)
    out, lse = attention_varlen_reference(q, k, v, offsets([seqlen_q] * batch), offsets([seqlen_k] * batch),
                                          causal=causal, softmax_scale=0.3, return_lse=True)
    want_out, want_lse = attention_reference(q.reshape(batch, seqlen_q, HEADS_Q, -1),
                                             k.reshape(batch, seqlen_k, HEADS_KV, -1),
                                             v.reshape(batch, seqlen_k, HEADS_KV, -1), causal=causal,
                                             softmax_scale=0.3, return_lse=True)
    assert np.array_equal(out, want_out.reshape(out.shape))
    assert np.array_equal(lse, want_lse.transpose(1, 0, 2).reshape(lse.shape))


@pytest.mark.parametrize("causal", [True, False])
def test_each_sequence_is_its_own_attention(rng, causal):
    """Lengths 0 and more queries than keys among them: a query that sees no key gets out 0 and lse -inf; rows of q
    past the last sequence are NaN (not the call's to write)."""
    lengths_q, lengths_k = [3, 0, 1, 7, 4, 5], [3, 2, 0, 9, 2, 5]
    q, k, v = varlen_qkv(rng, lengths_q, lengths_k, extra_q_rows=2)
    cu_q, cu_k = offsets(lengths_q), offsets(lengths_k)
    out, lse = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=causal, return_lse=True)
    for b, (n_q, n_k) in enumerate(zip(lengths_q, lengths_k)):
        rows, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if n_q == 0:
            continue
        if n_k == 0:
            assert (out[rows] == 0).all() and (lse[:, rows] == -np.inf).all(), f"sequence {b}"
            continue
        want_out, want_lse = attention_reference(q[None, rows], k[None, keys], v[None, keys], causal=causal,
                                                 return_lse=True)
        assert np.array_equal(out[rows], want_out[0]) and np.array_equal(lse[:, rows], want_lse[0]), f"sequence {b}"
    blind = slice(cu_q[4], cu_q[4] + 2)  # sequence 4: 4 queries, 2 keys
    assert ((out[blind] == 0).all() and (lse[:, blind] == -np.inf).all()) == causal
    assert np.isnan(out[cu_q[-1]:]).all() and np.isnan(lse[:, cu_q[-1]:]).all()
    assert np.isfinite(out[:cu_q[-1]]).all()


def test_seqused_k_reads_only_the_used_rows(rng):
    lengths_q, rows_k, used = [4, 6], [9, 12], [5, 12]
    q, k, v = varlen_qkv(rng, lengths_q, rows_k)
    cu_k = offsets(rows_k)
    k[cu_k[0] + used[0]:cu_k[1]] = np.nan  # rows past seqused_k[0]: never read
    v[cu_k[0] + used[0]:cu_k[1]] = np.nan
    out = attention_varlen_reference(q, k, v, offsets(lengths_q), cu_k, seqused_k=np.array(used, np.int32))
    kept = np.concatenate([np.arange(used[0]), cu_k[1] + np.arange(used[1])])
    want = attention_varlen_reference(q, k[kept], v[kept], offsets(lengths_q), offsets(used))
    assert np.array_equal(out, want) and np.isfinite(out).all()


def page_table(rng, lengths, page_size, spare_pages=3):
    """(block_table, num_pages): each sequence's pages drawn from a random permutation, spare pages that no sequence
    uses, -1 past each sequence's pages."""
    pages_of = [-(-n // page_size) for n in lengths]
    num_pages = sum(pages_of) + spare_pages
    ids = rng.permutation(num_pages)
    table = np.full((len(lengths), max(pages_of) + 1), -1, np.int32)
    for b, first in enumerate(np.cumsum([0] + pages_of[:-1])):
        table[b, :pages_of[b]] = ids[first:first + pages_of[b]]
    return table, num_pages


def scatter(rows, lengths, table, num_pages, page_size):
    """Varlen rows (total, heads, dim) into a cache (num_pages, page_size, heads, dim) by the page table, one row at
    a time (independently of gather_pages); NaN in every slot no sequence uses (the tail of each sequence's last
    page, the spare pages)."""
    cache = np.full((num_pages, page_size, *rows.shape[1:]), np.nan)
    for b, (start, n) in enumerate(zip(np.cumsum([0] + lengths[:-1]), lengths)):
        for j in range(n):
            cache[table[b, j // page_size], j % page_size] = rows[start + j]
    return cache


@pytest.mark.parametrize("page_size", [16, 64])
@pytest.mark.parametrize("causal", [True, False])
def test_paged_is_the_contiguous_reference_of_its_gathered_keys(rng, page_size, causal):
    lengths_q, lengths_k = [3, 0, 5, 20, 1], [70, 4, 5, 130, 0]
    q, k, v = varlen_qkv(rng, lengths_q, lengths_k)
    table, num_pages = page_table(rng, lengths_k, page_size)
    k_cache, v_cache = (scatter(x, lengths_k, table, num_pages, page_size) for x in (k, v))
    used = np.array(lengths_k, np.int32)
    assert np.array_equal(gather_pages(k_cache, used, table), k)
    paged = attention_paged_reference(q, k_cache, v_cache, offsets(lengths_q), used, table, causal=causal,
                                      return_lse=True)
    contiguous = attention_varlen_reference(q, k, v, offsets(lengths_q), offsets(lengths_k), causal=causal,
                                            return_lse=True)
    for got, want in zip(paged, contiguous):
        assert np.array_equal(got, want) and not np.isnan(got).any()  # lse -inf: the sequence without keys


def e4m3(rng, shape):
    """Random e4m3 codes of N(0, 4) values (finite)."""
    return (2 * rng.standard_normal(shape)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)


@pytest.mark.parametrize("descales", ["per_tensor", "per_head", "per_block"])
def test_fp8_descales_index_sequences(rng, descales):
    """Codes with descales against attention_reference of the values each sequence's codes stand for, found the
    equal-length way: a sequence alone is a batch of 1 (factors of its row, fp8.dequantize_blocks of its blocks)."""
    lengths_q, lengths_k, block = [5, 0, 40, 17], [9, 3, 40, 33], 16
    batch, max_q, max_k = len(lengths_q), max(lengths_q), max(lengths_k)
    q, k, v = (e4m3(rng, x.shape) for x in varlen_qkv(rng, lengths_q, lengths_k))
    if descales == "per_tensor":
        scales = [np.float32(rng.uniform(0.5, 2)) for _ in range(3)]
    elif descales == "per_head":
        scales = [rng.uniform(0.5, 2, (batch, HEADS_KV)).astype(np.float32) for _ in range(3)]
    else:
        scales = [fp.BlockScales(rng.integers(-3, 4, (batch, heads, -(-n // block))).astype(np.int8), block)
                  for heads, n in ((HEADS_Q, max_q), (HEADS_KV, max_k), (HEADS_KV, max_k))]
    cu_q, cu_k = offsets(lengths_q), offsets(lengths_k)
    out = attention_varlen_reference(q, k, v, cu_q, cu_k, q_descale=scales[0], k_descale=scales[1],
                                     v_descale=scales[2])
    for b in range(batch):
        if lengths_q[b] == 0:
            continue
        parts = [x[None, cu[b]:cu[b + 1]] for x, cu in ((q, cu_q), (k, cu_k), (v, cu_k))]
        values = [dequantized(part, scale, b) for part, scale in zip(parts, scales)]
        want = attention_reference(*values)[0]
        assert np.allclose(out[cu_q[b]:cu_q[b + 1]], want, rtol=1e-13, atol=1e-13), f"sequence {b}"


def dequantized(codes, scale, b):
    """float64 of a one-sequence batch (1, n, heads, dim) of codes: the equal-length descales of batch row b."""
    bits = codes.view(np.uint8)
    if isinstance(scale, fp.BlockScales):
        blocks = -(-codes.shape[1] // scale.block_tokens)
        return fp8.dequantize_blocks(bits, scale.exponents[b:b + 1, :, :blocks], scale.block_tokens)
    factors = np.asarray(scale, np.float64)
    if factors.ndim == 2:
        factors = np.repeat(factors[b:b + 1], codes.shape[2] // factors.shape[1], axis=1)[:, None, :, None]
    return fp8.e4m3_decode(bits).astype(np.float64) * factors


def test_paged_fp8_block_scales_are_per_page(rng):
    """Paged k and v with one exponent per (page, kv head): the reference equals the varlen one on the values each
    key's page stands for, mapped key by key here."""
    page_size, lengths_q, lengths_k = 16, [4, 9], [20, 47]
    q, k, v = varlen_qkv(rng, lengths_q, lengths_k)
    k_codes, v_codes = (e4m3(rng, x.shape) for x in (k, v))
    table, num_pages = page_table(rng, lengths_k, page_size)
    k_cache, v_cache = (scatter(x.astype(np.float64), lengths_k, table, num_pages, page_size)
                        for x in (k_codes, v_codes))
    exponents = [rng.integers(-4, 5, (num_pages, HEADS_KV)).astype(np.int8) for _ in range(2)]
    k_values, v_values = np.empty(k.shape), np.empty(v.shape)
    for b, (start, n) in enumerate(zip(np.cumsum([0] + lengths_k[:-1]), lengths_k)):
        for j in range(n):
            page = table[b, j // page_size]
            k_values[start + j] = k_codes[start + j].astype(np.float64) * 2.0 ** exponents[0][page][:, None]
            v_values[start + j] = v_codes[start + j].astype(np.float64) * 2.0 ** exponents[1][page][:, None]
    used = np.array(lengths_k, np.int32)
    out = attention_paged_reference(q, k_cache, v_cache, offsets(lengths_q), used, table,
                                    k_descale=fp.BlockScales(exponents[0], page_size),
                                    v_descale=fp.BlockScales(exponents[1], page_size))
    want = attention_varlen_reference(q, k_values, v_values, offsets(lengths_q), offsets(lengths_k))
    assert np.array_equal(out, want) and np.isfinite(out).all()
    with pytest.raises(ValueError, match="block_tokens 32 != page_size 16"):
        attention_paged_reference(q, k_cache, v_cache, offsets(lengths_q), used, table,
                                  k_descale=fp.BlockScales(exponents[0], 32))
