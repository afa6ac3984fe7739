"""Host-side inputs and checks of the varlen and paged GPU tests (test_varlen_gpu.py), in numpy only, so that
tests/test_varlen_cases.py can hold them right without a GPU.

A Case is one attention_varlen call: q, k, v as the library takes them (bf16 values, or e4m3 codes with descales),
the offsets, lengths and page table, with NaN wherever no sequence reads (rows of q, k, v past the last sequence, k's
and v's rows past seqused_k, the unused slots of each sequence's last page, the spare pages) and out-of-range page ids
past each sequence's last page; and the float64 values each sequence's codes stand for.

Bounds (those of test_kernel_gpu.py, per sequence): fp8: relative L2 <= 1.5x the error of a float64 emulation that
rounds only P to e4m3 (at 2^8 times the row max) and the output to bf16; bf16: lse within 1e-3 of its magnitude, and
relative L2 <= 1.5x torch's bf16 SDPA error (the GPU file computes the peer).
"""
import dataclasses

import ml_dtypes
import numpy as np

import gpu_arrays as ga
from flashprefill import fp8, reference
from flashprefill.scales import BlockScales

LENGTHS = [0, 1, 127, 128, 129, 300]  # with one sequence longer than all of them together (lengths())
BLOCK = 128  # tokens per block of the per-block descales (the 128-key kernels take it)
TAIL_ROWS = 37  # rows of q, k, v past the last sequence: NaN, never read
E4M3_NAN = np.uint8(fp8.E4M3_NAN_CODE)
DESCALES = ["bf16", "per_tensor", "per_head", "per_block"]


def lengths(rng, base=LENGTHS):
    """`base` and one sequence longer than all of it together, in a random order."""
    return [int(n) for n in rng.permutation(base + [sum(base) + 1 + int(rng.integers(64))])]


def offsets(counts):
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


@dataclasses.dataclass
class Encoded:
    """One tensor as the library takes it: data (bf16 or e4m3 host array), descale for the call (None, float32
    factors, BlockScales of host exponents), and the float64 values it stands for (NaN where no sequence reads)."""
    data: np.ndarray
    descale: object
    values: np.ndarray


def _uneven(x, rng, low, high):
    """x times a power of two in 2^low..2^high per 64 rows and head: block exponents that vary along a sequence."""
    steps = rng.integers(low, high + 1, (-(-x.shape[0] // 64), x.shape[1]))
    return x * np.repeat(np.exp2(steps), 64, axis=0)[:x.shape[0], :, None].astype(np.float32)


def _decoded(codes):
    return fp8.e4m3_decode(codes).astype(np.float64)


def _codes(codes):
    return codes.view(ml_dtypes.float8_e4m3fn)


def encode_rows(x, kind, spans, heads_kv, rng):
    """Encoded float32 rows x (tokens, heads, dim) whose sequences are spans [(first row, rows)]: "bf16", or e4m3 codes
    "per_tensor", "per_head" ((batch, heads_kv) factors, a query head's its group's), "per_block" (BlockScales of
    BLOCK tokens, (batch, heads, ceil(longest / BLOCK)), the exponents past a sequence's blocks random)."""
    rows = np.concatenate([np.arange(first, first + n) for first, n in spans])
    x = np.where(np.isin(np.arange(x.shape[0]), rows)[:, None, None], x, np.nan).astype(np.float32)
    if kind == "bf16":
        data = ga.to_bf16(x)
        return Encoded(data, None, ga.to_f64(data))
    codes, values = np.full(x.shape, E4M3_NAN), np.full(x.shape, np.nan)
    heads, dim = x.shape[1:]
    if kind == "per_tensor":
        codes[rows], descale = fp8.quantize_per_tensor(x[rows])
        values[rows] = _decoded(codes[rows]) * np.float64(descale)
        return Encoded(_codes(codes), descale, values)
    if kind == "per_head":
        descale, group = np.ones((len(spans), heads_kv), np.float32), heads // heads_kv
        for b, (first, n) in enumerate(spans):
            if n:
                part = slice(first, first + n)
                c, d = fp8.quantize_per_head(x[part].reshape(1, n, heads_kv, group * dim))
                codes[part], descale[b] = c.reshape(n, heads, dim), d[0]
                values[part] = _decoded(codes[part]) * np.repeat(d[0].astype(np.float64), group)[None, :, None]
        return Encoded(_codes(codes), descale, values)
    longest = max(n for _, n in spans)
    exponents = rng.integers(-20, 21, (len(spans), heads, -(-longest // BLOCK))).astype(np.int8)
    for b, (first, n) in enumerate(spans):
        if n:
            part = slice(first, first + n)
            c, e = fp8.quantize_blocks(x[part][None], BLOCK)
            codes[part], exponents[b, :, :e.shape[2]] = c[0], e[0]
            values[part] = fp8.dequantize_blocks(c, e, BLOCK)[0]
    return Encoded(_codes(codes), BlockScales(exponents, BLOCK), values)


def encode_cache(cache, used, kind, rng):
    """Encoded float32 cache (num_pages, page_size, heads_kv, dim), `used` its slots that sequences read: "bf16", e4m3
    "per_tensor", or "per_page" (BlockScales (num_pages, heads_kv) of page_size tokens, a spare page's random)."""
    cache = np.where(used[:, :, None, None], cache, np.nan).astype(np.float32)
    if kind == "bf16":
        data = ga.to_bf16(cache)
        return Encoded(data, None, ga.to_f64(data))
    if kind == "per_tensor":
        codes, descale = fp8.quantize_per_tensor(np.where(used[:, :, None, None], cache, 0))
        values = _decoded(codes) * np.float64(descale)
    else:
        codes, exponents = fp8.quantize_blocks(np.where(used[:, :, None, None], cache, 0), cache.shape[1])
        spare = ~used.any(axis=1)
        exponents[spare] = rng.integers(-20, 21, exponents[spare].shape)
        descale = BlockScales(np.ascontiguousarray(exponents[:, :, 0]), cache.shape[1])
        values = fp8.dequantize_blocks(codes, exponents, cache.shape[1])
    codes = np.where(used[:, :, None, None], codes, E4M3_NAN)
    return Encoded(_codes(codes), descale, np.where(used[:, :, None, None], values, np.nan))


@dataclasses.dataclass
class Case:
    """One call: q, k, v Encoded; cu_q, cu_k (None with pages), seqused_k, block_table host int32 arrays (or None);
    the largest lengths."""
    q: Encoded
    k: Encoded
    v: Encoded
    cu_q: np.ndarray
    cu_k: object
    seqused_k: object
    block_table: object
    max_q: int
    max_k: int

    @property
    def lengths_k(self):
        return np.diff(self.cu_k) if self.seqused_k is None else self.seqused_k

    def reference(self, causal):
        """(out, lse) float64 of the reference, from the data and descales as the call takes them."""
        descales = dict(q_descale=self.q.descale, k_descale=self.k.descale, v_descale=self.v.descale)
        if self.block_table is None:
            return reference.attention_varlen_reference(self.q.data, self.k.data, self.v.data, self.cu_q, self.cu_k,
                                                        seqused_k=self.seqused_k, causal=causal, return_lse=True,
                                                        **descales)
        return reference.attention_paged_reference(self.q.data, self.k.data, self.v.data, self.cu_q, self.seqused_k,
                                                   self.block_table, causal=causal, return_lse=True, **descales)

    def sequence_values(self, b):
        """float64 (q, k, v) of sequence b, (n, heads, dim) each, as its codes stand for."""
        queries = self.q.values[self.cu_q[b]:self.cu_q[b + 1]]
        if self.block_table is None:
            keys = slice(self.cu_k[b], self.cu_k[b] + self.lengths_k[b])
            return queries, self.k.values[keys], self.v.values[keys]
        pick = lambda cache: reference.gather_pages(cache, self.seqused_k[b:b + 1], self.block_table[b:b + 1])
        return queries, pick(self.k.values), pick(self.v.values)


def varlen_case(rng, lengths_q, lengths_k, heads, dims, kind, rows_k=None):
    """A Case of contiguous k, v: sequence b's queries lengths_q[b], its keys lengths_k[b]; with rows_k, k's rows per
    sequence (>= lengths_k) and seqused_k = lengths_k (the rows past them NaN)."""
    heads_q, heads_kv = heads
    dim_qk, dim_v = dims
    rows_k = lengths_k if rows_k is None else rows_k
    cu_q, cu_k = offsets(lengths_q), offsets(rows_k)
    spans_q = list(zip(cu_q[:-1], lengths_q))
    spans_k = list(zip(cu_k[:-1], lengths_k))
    x = [rng.standard_normal((cu[-1] + TAIL_ROWS, h, d), dtype=np.float32)
         for cu, h, d in ((cu_q, heads_q, dim_qk), (cu_k, heads_kv, dim_qk), (cu_k, heads_kv, dim_v))]
    if kind == "per_block":
        x = [_uneven(part, rng, *span) for part, span in zip(x, [(-2, 1), (-2, 1), (-6, 6)])]
    q, k, v = (encode_rows(part, kind, spans, heads_kv, rng) for part, spans in zip(x, [spans_q, spans_k, spans_k]))
    seqused_k = None if rows_k is lengths_k else np.array(lengths_k, np.int32)
    return Case(q, k, v, cu_q, cu_k, seqused_k, None, max(lengths_q), max(lengths_k))


def paged_case(rng, lengths_q, lengths_k, heads, dims, kind, page_size, spare_pages=3):
    """A Case of paged k, v caches: each sequence's pages drawn from a random permutation of the pages, spare pages
    that no sequence uses, out-of-range ids past each sequence's last page. kind: "bf16", or q's descale "per_head"
    with k's and v's "per_tensor" or "per_page"."""
    heads_q, heads_kv = heads
    dim_qk, dim_v = dims
    pages_of = [-(-n // page_size) for n in lengths_k]
    num_pages = sum(pages_of) + spare_pages
    ids = rng.permutation(num_pages).astype(np.int32)
    table = (num_pages + rng.integers(0, 1 << 20, (len(lengths_k), max(pages_of) + 1))).astype(np.int32)
    used = np.zeros((num_pages, page_size), bool)
    for b, first in enumerate(np.cumsum([0] + pages_of[:-1])):
        table[b, :pages_of[b]] = ids[first:first + pages_of[b]]
        for j in range(0, lengths_k[b], page_size):
            used[table[b, j // page_size], :min(page_size, lengths_k[b] - j)] = True
    cu_q = offsets(lengths_q)
    q = rng.standard_normal((cu_q[-1] + TAIL_ROWS, heads_q, dim_qk), dtype=np.float32)
    q = encode_rows(q, "bf16" if kind == "bf16" else "per_head", list(zip(cu_q[:-1], lengths_q)), heads_kv, rng)
    k, v = (encode_cache(rng.standard_normal((num_pages, page_size, heads_kv, dim), dtype=np.float32), used, kind, rng)
            for dim in (dim_qk, dim_v))
    return Case(q, k, v, cu_q, None, np.array(lengths_k, np.int32), table, max(lengths_q), max(lengths_k))


def p_rounding_floor(q, k, v, causal, p_dtype="e4m3"):
    """float64 attention of one sequence ((n, heads, dim) each, numpy or CuPy) whose only roundings are P to p_dtype
    at 2^8 times the row max and the output to bf16; rows that see no key 0."""
    xp = fp8.array_module(q)
    rep = q.shape[1] // k.shape[1]
    k, v = xp.repeat(k, rep, 1), xp.repeat(v, rep, 1)
    s = xp.matmul(q.transpose(1, 0, 2), k.transpose(1, 2, 0)) / np.sqrt(q.shape[-1])  # (heads, queries, keys)
    if causal:
        keys, rows = xp.arange(k.shape[0]), xp.arange(q.shape[0])
        s = xp.where(keys[None, :] > rows[:, None] + (k.shape[0] - q.shape[0]), -xp.inf, s)
    row_max = s.max(-1, keepdims=True) if k.shape[0] else xp.full(s.shape[:2] + (1,), -xp.inf)
    seen = row_max > -xp.inf
    p = xp.exp(s - xp.where(seen, row_max, 0.0)) * 256
    rounded = ga.to_f64(ga.to_e4m3(p.astype(xp.float32)))
    out = xp.matmul(rounded, v.transpose(1, 0, 2)) / xp.where(seen, p.sum(-1, keepdims=True), 1.0)
    return ga.to_f64(ga.to_bf16(out.transpose(1, 0, 2)))


def check_structure(case, out, lse, ref_lse, seed):
    """Every element of the sequences' rows written and finite; rows that see no key out 0 and lse -inf exactly; lse
    finite elsewhere. out: float64 (total_q, heads_q, dim_v); lse: (heads_q, total_q)."""
    rows = case.cu_q[-1]
    assert np.isfinite(out[:rows]).all(), f"seed {seed}: unwritten or non-finite elements in the sequences' rows " \
                                          f"({int((~np.isfinite(out[:rows])).sum())})"
    blind = ref_lse[:, :rows] == -np.inf
    assert (out[:rows][blind.T] == 0).all(), f"seed {seed}: a query that sees no key must get out 0"
    assert np.array_equal(lse[:, :rows] == -np.inf, blind), f"seed {seed}: lse -inf exactly where no key is seen"
    assert np.isfinite(lse[:, :rows][~blind]).all(), f"seed {seed}: lse not finite where keys are seen"


def check_lse(case, lse, ref_lse, seed):
    """lse within 1e-3 of max(1, |lse|) where keys are seen (test_kernel_gpu.py's bound)."""
    rows = case.cu_q[-1]
    seen = np.isfinite(ref_lse[:, :rows])
    err = np.abs(lse[:, :rows][seen] - ref_lse[:, :rows][seen]).max(initial=0.0)
    assert err < 1e-3 * max(1.0, np.abs(ref_lse[:, :rows][seen]).max(initial=0.0)), \
        f"seed {seed}: lse max abs error {err:.3e}"


def check_sequences(case, out, ref, bound_of, seed):
    """Each sequence's relative L2 against the reference at most bound_of(b, ref rows) (which returns the bound and
    its name); sequences without queries have nothing to check."""
    for b in range(len(case.cu_q) - 1):
        rows = slice(case.cu_q[b], case.cu_q[b + 1])
        if rows.start == rows.stop:
            continue
        err = reference.relative_l2(out[rows], ref[rows])
        bound, name = bound_of(b, ref[rows])
        assert err <= bound, (f"seed {seed}, sequence {b} ({rows.stop - rows.start} queries, {case.lengths_k[b]} "
                              f"keys): {reference.error_report(out[rows], ref[rows])}; {name} {bound:.3e}")


def fp8_floor_bound(case, causal, device=np.asarray):
    """bound_of for fp8: 1.5x the P-and-output rounding floor of the sequence, computed on the arrays `device` makes
    of its values (cupy.asarray: on the GPU)."""
    def bound_of(b, ref_rows):
        floor = p_rounding_floor(*(device(x) for x in case.sequence_values(b)), causal)
        floor = reference.relative_l2(floor if isinstance(floor, np.ndarray) else floor.get(), ref_rows)
        return 1.5 * floor, "1.5x the P-and-output-rounding floor"
    return bound_of
