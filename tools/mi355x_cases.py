"""The cases of tools/mi355x_check.py: every gfx950 forward kernel (bf16 and fp8, dim 128 and dim_qk 192 / dim_v
128) in its equal-length, varlen and paged forms, the quantizer (equal-length and packed), the paged KV-cache
writer, merge_state (four dtype pairs) and the check of a varlen call's arrays (varlen_check: one fault of each kind
put into a batch's arrays, and valid ones), over shapes from small to 16k; for each, fresh random host inputs, which
tools/mi355x_judge.py judges the outputs of.
"""
import dataclasses

import ml_dtypes
import numpy as np

from flashprefill import fp8
from merge_state_bounds import nonfinite_parts
from varlen_verdict import BLOCK_TABLE, CU_K, CU_Q, OK, SEQLEN_K, SEQLEN_Q, SEQUSED_K

BF16, E4M3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
DIM_V = 128
E4M3_NAN_CODE, EXPONENT_POISON = 0x7F, -128
# (batch, seqlen_q, seqlen_k, heads_q, heads_kv) of the equal-length cases; the first is small enough for a dry run
EQUAL_SHAPES = [(2, 200, 200, 4, 2), (1, 700, 1300, 8, 2), (1, 4096, 4096, 32, 8), (1, 16384, 16384, 32, 8)]
NOT_CAUSAL_SHAPES = EQUAL_SHAPES[:1] + EQUAL_SHAPES[2:3]
# (seqlen_q, seqlen_k) per sequence: the emulated tests' batch (length 1, no queries, no keys, more queries than
# keys, two workgroups), then one of long sequences
SEQUENCE_SETS = [((1, 1), (0, 37), (45, 0), (300, 30), (360, 380)),
                 ((77, 2000), (1000, 1000), (4096, 4096), (16384, 16384))]
VARLEN_HEADS = (8, 2)
PAGE_SIZES = (64, 256)      # per sequence set
PER_BLOCK_TOKENS = 128
QUANTIZE_DIMS = tuple(range(32, 257, 32))  # every quantize_d<dim> code object
QUANTIZE_SHAPES = ((2, 200, 2), (2, 4099, 8))  # (batch, seq, heads), partial last blocks
QUANTIZE_BLOCK = 128
# the packed quantizer: sequences of 0, 1 and partial-block lengths (heads 2); its rows past every sequence poisoned
QUANTIZE_PACKED_LENGTHS, QUANTIZE_PACKED_PAD = (0, 1, 300, 4099), 5
# the paged writer (heads_kv 2): a prompt of these sequences through a permuted block table, then one decode token
# each, 2^8 larger than the prompt (the pages' exponents grow: their codes are re-encoded); pages by dim
PAGED_PROMPT_LENGTHS, PAGED_PAGE_SIZES, PAGED_STEP_GROWTH = (37, 300, 1, 1000), (16, 64, 256), 2.0**8
# merge_state: (batch, seqlen_q, heads_q, dim_v) from 1 row to 16k over the emulated test's dims (a lane's piece is 8
# elements: 136 leaves lanes idle, 520 gives a lane two pieces); the rows that are not finite on a small one
MERGE_DTYPES = {"bf16": "bfloat16", "f32": "float32"}
MERGE_SHAPES = ((1, 1, 1, 64), (1, 3, 2, 520), (1, 26, 2, 136), (2, 37, 2, 128), (2, 4096, 32, 128),
                (1, 16384, 16, 128))
MERGE_NONFINITE_SHAPE = (2, 12, 3, 64)
SENTINEL = 1000.0  # a finite poison, exact in bf16, where NaN is an expected output


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    kernel: str           # the code object (build/gfx950/<kernel>.co), what rocprofv3 names
    form: str             # "equal", "varlen", "paged", "quantize", "quantize_packed", "quantize_paged"
    dtype: str            # "bf16", "fp8"
    dim_qk: int
    causal: bool
    heads: tuple          # (heads_q, heads_kv); the quantizers: (heads, heads)
    lengths: tuple        # (seqlen_q, seqlen_k) per sequence; the quantizers: (seq, seq) per batch entry or sequence
    descale: str = ""     # fp8: "per_head" factors or "per_block" exponents
    page_size: int = 0
    out_dtype: str = ""   # merge_state: out's ("bf16", "f32"); dtype is out_a's and out_b's
    fault: str = ""       # varlen_check: the VARLEN_FAULTS entry

    @property
    def dim_v(self):
        return self.dim_qk if self.form.startswith(("quantize", "merge_state")) else DIM_V

    @property
    def longest(self):
        return max(max(pair) for pair in self.lengths)

    @property
    def flops(self):
        """Floating-point operations of the attention (2 (dim_qk + dim_v) per visible query-key pair); 0 for the
        other kernels (and the check's cases, which are about its verdict)."""
        if self.form not in ("equal", "varlen", "paged"):
            return 0
        pairs = sum(visible_pairs(sq, sk, self.causal) for sq, sk in self.lengths)
        return 2 * (self.dim_qk + DIM_V) * self.heads[0] * pairs


def visible_pairs(sq, sk, causal):
    if not causal:
        return sq * sk
    return int(np.clip(np.arange(sq) + sk - sq + 1, 0, sk).sum())


def _kernel(dtype, dim_qk):
    return f"fwd_{dtype}_{'hd128' if dim_qk == 128 else f'qk{dim_qk}'}"


def _set(name, index, value):
    """The change of a call's host arrays that sets arrays[name][index] to value (or value(arrays))."""
    def change(arrays):
        arrays[name] = arrays[name].copy()
        arrays[name][index] = value(arrays) if callable(value) else value
    return change


def _less(name):
    def change(arrays):
        arrays[name] -= 1
    return change


def _both(first, second):
    def change(arrays):
        first(arrays)
        second(arrays)
    return change


VARLEN_CHECK_FORWARD = "fwd_bf16_hd128"  # the forward kernel of the check's cases
CHECK_SET = SEQUENCE_SETS[0]  # cu_seqlens_q 0 1 1 46 346 706, cu_seqlens_k 0 1 38 38 68 448, pages of 64: 1 1 0 1 6
CHECK_WAVE_STEPS = ((2, 3),) * 70  # 70 sequences: the check's 64 lanes take two steps
CHECK_LONG_TABLE = ((5, 1100),)    # 69 pages of 16 keys: two steps
# varlen_check: VARLEN_CHECK_FORWARD through attention_varlen on a batch whose arrays (varlen ones with seqused_k, or
# paged) were changed to hold a fault, or none: (page_size (0: varlen), lengths, change, the error it makes)
VARLEN_FAULTS = {
    "valid": (0, CHECK_SET, None, OK),
    "cu_seqlens_q_negative": (0, CHECK_SET, _set("cu_seqlens_q", 0, -1), CU_Q),
    "cu_seqlens_q_decreasing": (0, CHECK_SET, _set("cu_seqlens_q", 3, 0), CU_Q),
    "cu_seqlens_q_past_total_q": (0, CHECK_SET, _set("cu_seqlens_q", -1, lambda a: a["q"].shape[0] + 1), CU_Q),
    "max_seqlen_q_short": (0, CHECK_SET, _less("max_seqlen_q"), SEQLEN_Q),
    "cu_seqlens_k_decreasing": (0, CHECK_SET, _set("cu_seqlens_k", 2, 0), CU_K),
    "cu_seqlens_k_past_total_k": (0, CHECK_SET, _set("cu_seqlens_k", -1, lambda a: a["k"].shape[0] + 1), CU_K),
    "max_seqlen_k_short": (0, CHECK_SET, _less("max_seqlen_k"), SEQLEN_K),
    "seqused_k_negative": (0, CHECK_SET, _set("seqused_k", 1, -1), SEQUSED_K),
    "seqused_k_past_rows": (0, CHECK_SET, _set("seqused_k", 3, 31), SEQUSED_K),
    "seqused_k_past_rows_second_step": (0, CHECK_WAVE_STEPS, _set("seqused_k", 66, 10_000), SEQUSED_K),
    "paged_valid": (64, CHECK_SET, None, OK),
    "paged_bad_page_past_the_keys": (64, CHECK_SET, _set("block_table", (0, -1), -1), OK),  # not read
    "paged_page_past_num_pages": (64, CHECK_SET, _set("block_table", (4, 3), lambda a: a["k"].shape[0]), BLOCK_TABLE),
    "paged_page_negative": (64, CHECK_SET, _set("block_table", (1, 0), -3), BLOCK_TABLE),
    "paged_seqused_k_past_pages": (64, CHECK_SET, _set("seqused_k", 3, lambda a: a["block_table"].shape[1] *
                                                       a["k"].shape[1] + 1), SEQUSED_K),  # its table row's keys + 1
    "paged_page_fault_before_a_sequence_fault": (64, CHECK_SET, _both(_set("block_table", (1, 0), -1),
                                                                      _set("cu_seqlens_q", 4, 0)), BLOCK_TABLE),
    "paged_bad_page_second_step": (16, CHECK_LONG_TABLE, _set("block_table", (0, 65), lambda a: a["k"].shape[0]),
                                   BLOCK_TABLE),
}


def all_cases():
    cases = []
    for dtype in ("bf16", "fp8"):
        for dim_qk in (128, 192):
            kernel, base = _kernel(dtype, dim_qk), f"{dtype}_d{dim_qk}"
            descale = "per_head" if dtype == "fp8" else ""
            for (b, sq, sk, hq, hkv) in EQUAL_SHAPES:
                for causal in (True, False) if (b, sq, sk, hq, hkv) in NOT_CAUSAL_SHAPES else (True,):
                    cases.append(Case(f"{base}_{'causal' if causal else 'full'}_{b}x{sq}x{sk}x{hq}x{hkv}", kernel,
                                      "equal", dtype, dim_qk, causal, (hq, hkv), ((sq, sk),) * b, descale))
            if dtype == "fp8":
                b, sq, sk, hq, hkv = EQUAL_SHAPES[2]
                cases.append(Case(f"{base}_causal_{b}x{sq}x{sk}x{hq}x{hkv}_per_block", kernel, "equal", dtype,
                                  dim_qk, True, (hq, hkv), ((sq, sk),) * b, "per_block"))
            for i, (lengths, page_size) in enumerate(zip(SEQUENCE_SETS, PAGE_SIZES)):
                cases.append(Case(f"{base}_varlen_set{i}", kernel, "varlen", dtype, dim_qk, True, VARLEN_HEADS,
                                  lengths, descale))
                cases.append(Case(f"{base}_paged{page_size}_set{i}", kernel, "paged", dtype, dim_qk, True,
                                  VARLEN_HEADS, lengths, descale, page_size))
    for batch, seq, heads in QUANTIZE_SHAPES:
        for dim in QUANTIZE_DIMS:
            cases.append(Case(f"quantize_d{dim}_{batch}x{seq}x{heads}", f"quantize_d{dim}", "quantize", "bf16", dim,
                              False, (heads, heads), ((seq, seq),) * batch))
    for i, dim in enumerate(QUANTIZE_DIMS):
        cases.append(Case(f"quantize_d{dim}_packed", f"quantize_d{dim}", "quantize_packed", "bf16", dim, False, (2, 2),
                          tuple((n, n) for n in QUANTIZE_PACKED_LENGTHS)))
        page_size = PAGED_PAGE_SIZES[i % len(PAGED_PAGE_SIZES)]
        cases.append(Case(f"quantize_paged_d{dim}_pages{page_size}", f"quantize_paged_d{dim}", "quantize_paged",
                          "bf16", dim, False, (2, 2), tuple((n, n) for n in PAGED_PROMPT_LENGTHS),
                          page_size=page_size))
    for dtype in MERGE_DTYPES:
        for out_dtype in MERGE_DTYPES:
            kernel = f"merge_state_{dtype}_{out_dtype}"
            for b, s, h, d in MERGE_SHAPES:
                cases.append(Case(f"{kernel}_{b}x{s}x{h}x{d}", kernel, "merge_state", dtype, d, False, (h, h),
                                  ((s, s),) * b, out_dtype=out_dtype))
            b, s, h, d = MERGE_NONFINITE_SHAPE
            cases.append(Case(f"{kernel}_nonfinite", kernel, "merge_state_nonfinite", dtype, d, False, (h, h),
                              ((s, s),) * b, out_dtype=out_dtype))
    for fault, (page_size, lengths, _, _) in VARLEN_FAULTS.items():
        cases.append(Case(f"varlen_check_{fault}", "varlen_check", "varlen_check", "bf16", 128, True, VARLEN_HEADS,
                          lengths, page_size=page_size, fault=fault))  # bf16, 128: VARLEN_CHECK_FORWARD's
    return cases


# ---------------------------------------------------------------------------------------------------------------
# Host inputs

@dataclasses.dataclass
class Sequence:
    """One sequence's problem on the host: q (1, sq, hq, dim_qk), k (1, sk, hkv, dim_qk), v (1, sk, hkv, 128), bf16
    values or e4m3 codes; fp8: scales, float64 per token (1, seq, heads) of q, k and v."""
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scales: tuple = None


def _normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def _per_head(x, heads_kv):
    """e4m3 codes of x (batch, seq, heads, dim) and descale factors float32 (batch, heads_kv), one per KV head's group
    of heads (as FA3's descales)."""
    batch, seq, heads, dim = x.shape
    amax = np.abs(x).reshape(batch, seq, heads_kv, -1).max(axis=(1, 3)) if seq else np.ones((batch, heads_kv))
    descale = (np.maximum(amax, 1e-12) / 448.0).astype(np.float32)
    scale = np.repeat(descale, heads // heads_kv, axis=1)[:, None, :, None]
    return (x / scale).astype(E4M3), descale


def token_scales(descale, seq, heads):
    """float64 (batch, seq, heads) per-token scales of a descale: factors (batch, heads_kv) or (exponents,
    block_tokens) of per-block exponents (batch, heads, blocks)."""
    if isinstance(descale, tuple):
        exponents, block_tokens = descale
        return fp8.block_scales(np.asarray(exponents), seq, block_tokens)
    factors = np.asarray(descale, np.float64)
    return np.broadcast_to(np.repeat(factors, heads // factors.shape[1], axis=1)[:, None, :],
                           (factors.shape[0], seq, heads))


def equal_inputs(case, rng):
    """({q, k, v, and fp8: q_descale, k_descale, v_descale as factors or (exponents, block_tokens)}, [Sequence])."""
    (hq, hkv), batch, (sq, sk) = case.heads, len(case.lengths), case.lengths[0]
    raw = [_normal(rng, (batch, s, h, d)) for s, h, d in ((sq, hq, case.dim_qk), (sk, hkv, case.dim_qk),
                                                          (sk, hkv, DIM_V))]
    if case.dtype == "bf16":
        arrays = dict(zip("qkv", (x.astype(BF16) for x in raw)))
        return arrays, [Sequence(*(arrays[n][b:b + 1] for n in "qkv")) for b in range(batch)]
    if case.descale == "per_block":
        quantized = [fp8.quantize_blocks(x, PER_BLOCK_TOKENS) for x in raw]
        codes = [c.view(E4M3) for c, _ in quantized]
        descales = [(e, PER_BLOCK_TOKENS) for _, e in quantized]
    else:
        codes, descales = zip(*(_per_head(x, hkv) for x in raw))
    arrays = dict(zip("qkv", codes))
    arrays.update({f"{n}_descale": d for n, d in zip("qkv", descales)})
    scales = [token_scales(d, x.shape[1], x.shape[2]) for d, x in zip(descales, codes)]
    return arrays, [Sequence(*(c[b:b + 1] for c in codes), tuple(s[b:b + 1] for s in scales)) for b in range(batch)]


def varlen_inputs(case, rng):
    """({q, k, v packed (total, heads, dim), cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, fp8: descales
    (batch, heads_kv) per sequence; paged: k, v caches (pages, page_size, heads_kv, dim), block_table, seqused_k},
    [Sequence])."""
    (hq, hkv), lengths = case.heads, case.lengths
    cu = [np.concatenate([[0], np.cumsum([pair[i] for pair in lengths])]).astype(np.int32) for i in (0, 1)]
    raw = [_normal(rng, (1, int(c[-1]), h, d)) for c, h, d in ((cu[0], hq, case.dim_qk), (cu[1], hkv, case.dim_qk),
                                                               (cu[1], hkv, DIM_V))]
    if case.dtype == "bf16":
        packed, descales = [x[0].astype(BF16) for x in raw], None
    else:  # one factor per KV head for the whole batch, given per sequence
        codes, factors = zip(*(_per_head(x, hkv) for x in raw))
        packed = [c[0] for c in codes]
        descales = [np.repeat(f, len(lengths), axis=0) for f in factors]
    sequences = []
    for b, (sq, sk) in enumerate(lengths):
        rows = [slice(int(cu[i][b]), int(cu[i][b + 1])) for i in (0, 1, 1)]  # of q, k, v
        seq_arrays = [x[r][None] for x, r in zip(packed, rows)]
        scales = None if descales is None else tuple(
            token_scales(d[b:b + 1], n, h) for d, n, h in zip(descales, (sq, sk, sk), (hq, hkv, hkv)))
        sequences.append(Sequence(*seq_arrays, scales))
    arrays = dict(zip("qkv", packed), cu_seqlens_q=cu[0], cu_seqlens_k=cu[1],
                  max_seqlen_q=max(max(sq for sq, _ in lengths), 1), max_seqlen_k=max(max(sk for _, sk in lengths), 1))
    if descales is not None:
        arrays.update({f"{n}_descale": d for n, d in zip("qkv", descales)})
    if case.form == "paged":
        arrays.update(_paged(rng, packed[1], packed[2], cu[1], case.page_size))
    return arrays, sequences


def _paged(rng, k, v, cu_k, page_size):
    """k and v (total_k, heads_kv, dim) laid out in shuffled pages of caches whose unused rows hold NaN, the block
    table (batch, max_pages) and seqused_k; cu_seqlens_k becomes None."""
    lengths = np.diff(cu_k)
    pages_of = [-(-int(n) // page_size) for n in lengths]
    order = rng.permutation(sum(pages_of) + 1)  # one page no sequence names
    table = np.zeros((len(lengths), max(max(pages_of), 1)), np.int32)
    caches = []
    for x in (k, v):
        fill = np.array(np.nan, BF16) if x.dtype == BF16 else np.array(E4M3_NAN_CODE, np.uint8).view(E4M3)
        caches.append(np.full((len(order), page_size) + x.shape[1:], fill, x.dtype))
    first = 0
    for b, n in enumerate(lengths):
        pages = order[first:first + pages_of[b]]
        first += pages_of[b]
        table[b, :len(pages)] = pages
        for cache, x in zip(caches, (k, v)):
            rows = x[cu_k[b]:cu_k[b + 1]]
            for j, page in enumerate(pages):
                part = rows[j * page_size:(j + 1) * page_size]
                cache[page, :len(part)] = part
    return dict(k=caches[0], v=caches[1], cu_seqlens_k=None, block_table=table, seqused_k=lengths.astype(np.int32))


def _uneven(rng, shape):
    """N(0, 1) (batch, seq, heads, dim) times 2^-6..2^6 per 16 tokens and head, one channel 30x larger."""
    batch, seq, heads, _ = shape
    x = _normal(rng, shape)
    x *= np.exp2(rng.integers(-6, 7, (batch, -(-seq // 16), heads)))[:, np.arange(seq) // 16, :, None]
    x[..., 3] *= 30
    return x


def quantize_inputs(case, rng):
    """({x bf16 (batch, seq, heads, dim)}, []), uneven."""
    (heads, _), batch, (seq, _) = case.heads, len(case.lengths), case.lengths[0]
    return {"x": _uneven(rng, (batch, seq, heads, case.dim_qk)).astype(BF16)}, []


def quantize_packed_inputs(case, rng):
    """({x bf16 (total, heads, dim), uneven, cu_seqlens int32 (batch + 1), max_seqlen}, []): the sequences from row
    0, QUANTIZE_PACKED_PAD rows after them outside every sequence."""
    lengths = [n for n, _ in case.lengths]
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    x = _uneven(rng, (1, int(cu[-1]) + QUANTIZE_PACKED_PAD, case.heads[0], case.dim_qk))[0]
    return {"x": x.astype(BF16), "cu_seqlens": cu, "max_seqlen": max(lengths)}, []


def quantize_paged_inputs(case, rng):
    """({x, slot_mapping: the prompt's rows bf16 (tokens, heads_kv, dim) and slots; x_step, slot_mapping_step: one
    decode token per sequence, PAGED_STEP_GROWTH larger; num_pages}, []): each sequence's pages a permuted block
    table's, one page no sequence names; a skipped token (slot -1) between sequences."""
    page_size, lengths = case.page_size, [n for n, _ in case.lengths]
    pages_of = [-(-(n + 1) // page_size) for n in lengths]  # room for the decode token
    order = rng.permutation(sum(pages_of) + 1)
    tables = np.split(order[:sum(pages_of)], np.cumsum(pages_of)[:-1])

    def slot(b, position):
        return int(tables[b][position // page_size]) * page_size + position % page_size
    prompt = [s for b, n in enumerate(lengths) for s in [slot(b, p) for p in range(n)] + [-1]]
    step = [slot(b, n) for b, n in enumerate(lengths)]
    shape = (len(prompt), case.heads[1], case.dim_qk)
    x_step = _normal(rng, (len(step),) + shape[1:]) * PAGED_STEP_GROWTH
    return {"x": _uneven(rng, (1,) + shape)[0].astype(BF16), "slot_mapping": np.array(prompt, np.int32),
            "x_step": x_step.astype(BF16), "slot_mapping_step": np.array(step, np.int32),
            "num_pages": len(order)}, []


def merge_inputs(case, rng):
    """({out_a, out_b (batch, seqlen_q, heads_q, dim_v) of the case's dtype, lse_a, lse_b float32 (batch, heads_q,
    seqlen_q)}, []): out N(0, 1), lse ~ N(5, 4); merge_state_nonfinite: with the rows of
    merge_state_bounds.nonfinite_parts."""
    (heads, _), batch, (seqlen, _) = case.heads, len(case.lengths), case.lengths[0]
    shape, dtype = (batch, seqlen, heads, case.dim_v), MERGE_DTYPES[case.dtype]
    if case.form == "merge_state_nonfinite":
        host = nonfinite_parts(rng, shape, dtype)
    else:
        host = {name: draw for part in "ab" for name, draw in (
            (f"out_{part}", rng.standard_normal(shape)), (f"lse_{part}", rng.normal(5.0, 4.0, (batch, heads, seqlen))))}
    narrow = BF16 if dtype == "bfloat16" else np.float32
    return {n: np.asarray(x, np.float32).astype(narrow if n.startswith("out") else np.float32)
            for n, x in host.items()}, []


def varlen_check_inputs(case, rng):
    """varlen_inputs of the case's batch (varlen ones with seqused_k, or paged) with its VARLEN_FAULTS change; the
    Sequences are those of the arrays before it."""
    arrays, sequences = varlen_inputs(dataclasses.replace(case, form="paged" if case.page_size else "varlen"), rng)
    if arrays.get("seqused_k") is None:
        arrays["seqused_k"] = np.diff(arrays["cu_seqlens_k"]).astype(np.int32)
    change = VARLEN_FAULTS[case.fault][2]
    if change is not None:
        change(arrays)
    return arrays, sequences


def inputs(case, rng):
    return {"equal": equal_inputs, "varlen": varlen_inputs, "paged": varlen_inputs, "quantize": quantize_inputs,
            "quantize_packed": quantize_packed_inputs, "quantize_paged": quantize_paged_inputs,
            "merge_state": merge_inputs, "merge_state_nonfinite": merge_inputs,
            "varlen_check": varlen_check_inputs}[case.form](case, rng)
