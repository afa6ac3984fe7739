"""The cases of tools/mi355x_check.py: every gfx950 forward kernel (bf16 and fp8, dim 128 and dim_qk 192 / dim_v
128) in its equal-length, varlen and paged forms, the quantizer (equal-length and packed), the paged KV-cache
writer, merge_state (four dtype pairs) and the check of a varlen call's arrays (varlen_check: one fault of each kind
put into a batch's arrays, and valid ones), over shapes from small to 16k; for each, fresh random host inputs, the
library call that runs it, and the judgement of its outputs against the float64 reference and the fp8 numpy model
with the bounds of tools/gfx950_bounds.py and tools/merge_state_bounds.py (the emulated tests' own), or against the
verdict of the rule (tools/varlen_verdict.py).

Long sequences are judged on their first and last JUDGED_ROWS query rows (every head): the float64 reference of all
16k rows would take minutes per case on the host, and the first and last rows see the fewest and the most keys.
"""
import dataclasses

import ml_dtypes
import numpy as np

from flashprefill import fp8, paged, prepare, reference
from gfx950_bounds import Verdict, bf16_floor, bf16_verdict, fp8_verdicts, lse_verdict
from merge_state_bounds import merge_verdicts, nonfinite_parts, nonfinite_verdicts, rounded
from varlen_verdict import BLOCK_TABLE, CU_K, CU_Q, OK, SEQLEN_K, SEQLEN_Q, SEQUSED_K, call_arrays, model_verdict

BF16, E4M3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
DIM_V = 128
JUDGED_ROWS = 128
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


# ---------------------------------------------------------------------------------------------------------------
# Judgement

def row_blocks(sq, sk, causal, rows=JUDGED_ROWS):
    """[(first row, end row, keys they may see)]: all rows when there are at most 2 * rows, else the first and the
    last `rows`; causal (aligned bottom-right) rows r0..r1-1 see no key past sk - sq + r1 - 1."""
    spans = [(0, sq)] if sq <= 2 * rows else [(0, rows), (sq - rows, sq)]
    return [(r0, r1, int(np.clip(sk - sq + r1, 0, sk)) if causal else sk) for r0, r1 in spans]


def models(seq, causal, rows=None):
    """What the kernel's output should be near, for query rows `rows` = (r0, r1, keys): bf16: (float64 reference,
    its lse, bf16_floor); fp8: (float64 reference of the dequantized inputs, the model's lse, the fp8 model)."""
    r0, r1, keys = rows or (0, seq.q.shape[1], seq.k.shape[1])
    q, k, v = seq.q[:, r0:r1], seq.k[:, :keys], seq.v[:, :keys]
    if seq.scales is None:
        ref, ref_lse = reference.attention_reference(q, k, v, causal=causal, return_lse=True)
        return ref, ref_lse, bf16_floor(q, k, v, causal)
    qs, ks, vs = seq.scales[0][:, r0:r1], seq.scales[1][:, :keys], seq.scales[2][:, :keys]
    model, model_lse = fp8.attention_fp8_model(q.view(np.uint8), k.view(np.uint8), v.view(np.uint8), qs, ks, vs,
                                               causal=causal, kv_tile=64, return_lse=True)
    values = [x.astype(np.float64) * s[..., None] for x, s in ((q, qs), (k, ks), (v, vs))]
    return reference.attention_reference(*values, causal=causal), model_lse, model


def judge_sequence(seq, out, lse, causal):
    """[(what, Verdict)] of one sequence's out (1, sq, hq, 128) and lse (1, hq, sq) (float64)."""
    verdicts = []
    sq = seq.q.shape[1]
    for r0, r1, keys in row_blocks(sq, seq.k.shape[1], causal):
        where = f"rows {r0}..{r1 - 1}"
        got, got_lse = out[:, r0:r1], lse[:, :, r0:r1]
        if keys == 0:  # no row sees a key: out 0, lse -inf
            err = reference.relative_l2(got, np.zeros_like(got))
            verdicts.append((f"{where} out", Verdict(err == 0, err, 0.0, "rows that see no key must be 0")))
            verdicts.append((f"{where} lse", lse_verdict(got_lse, np.full(got_lse.shape, -np.inf))))
            continue
        ref, ref_lse, model = models(seq, causal, (r0, r1, keys))
        if seq.scales is None:
            verdicts.append((f"{where} out", bf16_verdict(got, ref, model)))
        else:
            against_model, against_ref = fp8_verdicts(got, model, ref)
            verdicts += [(f"{where} out vs model", against_model), (f"{where} out vs float64", against_ref)]
        verdicts.append((f"{where} lse", lse_verdict(got_lse, ref_lse)))
    return verdicts


def judge(case, sequences, arrays, results):
    """[(what, Verdict)] of a case's host results: attention (out, lse) in its form's layout; the quantizers (codes,
    exponents); merge_state (out, lse); varlen_check (out, lse, the verdict (code, sequence, value, message) read
    back)."""
    if case.form == "quantize":
        return judge_quantize(arrays["x"], *results)
    if case.form == "quantize_packed":
        return judge_quantize_packed(arrays, *results)
    if case.form == "quantize_paged":
        return judge_quantize_paged(arrays, *results)
    out, lse = (np.asarray(x).astype(np.float64) for x in results[:2])
    if case.form.startswith("merge_state"):
        return judge_merge(case, arrays, out, lse)
    if case.form == "varlen_check":
        return judge_varlen_check(case, sequences, arrays, out, lse, results[2])
    if case.form == "equal":
        verdicts = []
        for b, seq in enumerate(sequences):
            verdicts += [(f"batch {b} {what}", v) for what, v in judge_sequence(seq, out[b:b + 1], lse[b:b + 1],
                                                                                case.causal)]
        return verdicts
    return judge_varlen(case, sequences, arrays, out, lse)


def judge_varlen(case, sequences, arrays, out, lse):
    """[(what, Verdict)] of each sequence's rows of a varlen or paged call's out and lse."""
    cu_q, verdicts = arrays["cu_seqlens_q"], []
    for b, seq in enumerate(sequences):
        if seq.q.shape[1] == 0:
            continue  # no row of out or lse is the sequence's
        rows = slice(int(cu_q[b]), int(cu_q[b + 1]))
        verdicts += [(f"sequence {b} {what}", v) for what, v in
                     judge_sequence(seq, out[rows][None], lse[:, rows][None], case.causal)]
    return verdicts


def judge_merge(case, arrays, out, lse):
    """merge_state_bounds' verdicts of out and lse against the float64 merge of the inputs."""
    host = {n: np.asarray(arrays[n]).astype(np.float64) for n in ("out_a", "lse_a", "out_b", "lse_b")}
    out_dtype = MERGE_DTYPES[case.out_dtype]
    if case.form == "merge_state_nonfinite":
        return nonfinite_verdicts(out, lse, host, out_dtype)
    return merge_verdicts(out, lse, [host[n] for n in ("out_a", "lse_a", "out_b", "lse_b")], out_dtype)


def expected_verdict(arrays):
    """(error, sequence, value) the rule gives the call's host arrays."""
    return model_verdict(call_arrays(arrays["q"], arrays["k"], arrays["cu_seqlens_q"], arrays["cu_seqlens_k"],
                                     arrays["max_seqlen_q"], arrays["max_seqlen_k"], arrays["seqused_k"],
                                     arrays.get("block_table")))[:3]


def judge_varlen_check(case, sequences, arrays, out, lse, verdict):
    """The verdict read back against the rule's; then, arrays valid, the outputs as a varlen call's; at fault, every
    element of out and lse NaN (they were poisoned with a finite value)."""
    want, (code, sequence, value, message) = expected_verdict(arrays), verdict
    got = (code, sequence, value)
    verdicts = [("verdict", Verdict(got == want, float(got != want), 0.0,
                                    f"flashprefill_workspace_error: {got} \"{message}\"; the rule: {want}"))]
    if want[0] == OK:
        return verdicts + judge_varlen(case, sequences, arrays, out, lse)
    for what, x in (("out", out), ("lse", lse)):
        left = ~np.isnan(x)
        verdicts.append((f"{what} NaN after the fault", Verdict(not left.any(), float(left.mean()), 0.0,
                                                               f"{int(left.sum())} of {left.size} not NaN")))
    return verdicts


def judge_quantize(x, codes, exponents):
    """Bit for bit against fp8.quantize_blocks of the quantizer's transform (no rotation, no smoothing)."""
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(np.asarray(x, np.float32)), QUANTIZE_BLOCK)
    return _bit_verdicts(codes, exponents, model_codes, model_exponents)


def packed_model(arrays):
    """(codes, exponents) of the packed quantizer on poisoned outputs: fp8.quantize_blocks_varlen of the transform."""
    x, cu, max_seqlen = np.asarray(arrays["x"], np.float32), arrays["cu_seqlens"], arrays["max_seqlen"]
    slots = -(-max_seqlen // QUANTIZE_BLOCK)
    return fp8.quantize_blocks_varlen(prepare.transform_varlen(x, cu), cu, max_seqlen, QUANTIZE_BLOCK,
                                      codes=np.full(x.shape, E4M3_NAN_CODE, np.uint8),
                                      exponents=np.full((len(cu) - 1, x.shape[1], slots), EXPONENT_POISON, np.int8))


def paged_model(arrays, num_pages, page_size):
    """(codes, exponents) of the paged writer's two calls (the prompt, then the decode step) into a cache of NaN codes
    and empty pages (EXPONENT_POISON is PAGE_EMPTY)."""
    heads_kv, dim = arrays["x"].shape[1:]
    codes = np.full((num_pages, page_size, heads_kv, dim), E4M3_NAN_CODE, np.uint8)
    exponents = np.full((num_pages, heads_kv), EXPONENT_POISON, np.int8)
    for x, slots in ((arrays["x"], arrays["slot_mapping"]), (arrays["x_step"], arrays["slot_mapping_step"])):
        codes, exponents = paged.quantize_paged_model(np.asarray(x, np.float32), slots, codes, exponents)
    return codes, exponents


def judge_quantize_packed(arrays, codes, exponents):
    """Bit for bit against packed_model (no rotation, no smoothing): the rows past every sequence and the slots past
    each sequence's blocks keep their poison."""
    return _bit_verdicts(codes, exponents, *packed_model(arrays))


def judge_quantize_paged(arrays, codes, exponents):
    """The whole cache bit for bit against paged_model (no rotation)."""
    codes = np.asarray(codes)
    return _bit_verdicts(codes, exponents, *paged_model(arrays, codes.shape[0], codes.shape[1]))


def _bit_verdicts(codes, exponents, model_codes, model_exponents):
    codes, exponents = np.asarray(codes).view(np.uint8), np.asarray(exponents)
    verdicts = []
    for what, got, want in (("codes", codes, model_codes), ("exponents", exponents, model_exponents)):
        differ = got != want
        where = f", first at {np.argwhere(differ)[0].tolist()}" if differ.any() else ""
        verdicts.append((what, Verdict(not differ.any(), float(differ.mean()), 0.0,
                                       f"{int(differ.sum())} of {differ.size} {what} differ from the model{where}")))
    return verdicts
