"""Variable-length batches (flashprefill.h's varlen form) in the gfx950 forward kernels, run in the functional emulator
(tools/gfx950_emu) as tests/test_gfx950_kernel_emulated.py runs the equal-length ones, every sequence against the
float64 reference (and fp8 against the numpy model of its pipeline).

One batch of sequences (seqlen_q, seqlen_k) covers the cases: length 1, no queries, no keys (out 0, lse -inf), more
queries than keys (causal: the first 270 queries see no key, the whole first workgroup: it visits no tile) at lengths
that are no multiple of a tile, and one sequence longer than the others together (two 256-query workgroups; the short
sequences' second workgroup ends at once). q, k and v
lie packed (total, heads, dim) with NaN in the rows no sequence owns (after the last one, and with seqused_k between
the sequences' used keys and the next sequence): a kernel that loads them, even at probability 0, turns its output
NaN. out and lse are poisoned (NaN): every element of the sequences must be written, the rows past them untouched.
Each run takes its input seed as the emulator's schedule seed (timing-adversarial interleavings)."""
import ml_dtypes
import numpy as np
import pytest

import gfx950_varlen_check as varlen_check
import kernargs
import markers
import shapes
from flashprefill import fp8, reference
from test_gfx950_kernel_emulated import (BF16_NAN, LANES_PER_WORKGROUP, QUERIES_PER_WORKGROUP, ROOT, Kernarg,
                                         _fp8_kernel)
from gfx950_bounds import bf16_floor, bf16_verdict, fp8_verdicts, lse_verdict  # tools/, on sys.path from there

RNG = np.random.default_rng()  # each test's input (and schedule) seed drawn from it, named in its failures

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
SEQUENCES = [(1, 1), (0, 37), (45, 0), (300, 30), (360, 380)]  # (seqlen_q, seqlen_k) of each sequence
HEADS_Q, HEADS_KV, DIM_V = 2, 1, 128
PAD_ROWS = 5     # rows after the last sequence (NaN in q, k and v; out and lse must keep their poison there)
UNUSED_KEYS = 6  # with seqused_k: NaN rows after each sequence's used keys, inside its cu_seqlens_k range
BLOCK_TOKENS = 64


def _layout(used_k):
    """cu_seqlens_q, cu_seqlens_k (int32, batch + 1) and seqused_k (int32, batch, or None) of SEQUENCES."""
    lengths_q = [sq for sq, _ in SEQUENCES]
    lengths_k = [sk + (UNUSED_KEYS if used_k else 0) for _, sk in SEQUENCES]
    cu = [np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lengths_q, lengths_k)]
    return cu[0], cu[1], np.array([sk for _, sk in SEQUENCES], np.int32) if used_k else None


def _rows(cu, b, length):
    return slice(int(cu[b]), int(cu[b]) + length)


def _packed(rng, cu, lengths, heads, dim, make):
    """(cu[-1] + PAD_ROWS, heads, dim) float64: make(rng, shape) in each sequence's rows, NaN elsewhere."""
    x = np.full((int(cu[-1]) + PAD_ROWS, heads, dim), np.nan)
    for b, n in enumerate(lengths):
        x[_rows(cu, b, n)] = make(rng, (n, heads, dim))
    return x


def _run(name, q, k, v, cu_q, cu_k, seqused_k, causal, seed, descales=None, blocks=None, pages=None, root=None,
         q_signs=None, verdict=(0, 0, 0, 0)):
    """Kernel `name` on packed q, k, v (1 or 2 bytes per element; q bf16 against fp8 k and v: the kernel rounds it)
    under schedule `seed`, after the check of the arrays (tests/gfx950_varlen_check.py), whose workspace header must
    read `verdict`; out (total_q, heads_q, dim_v) as uint16 bits, lse (heads_q, total_q). pages: (block_table,
    page_size), k and v then caches (pages, page_size, heads_kv, dim) and cu_k None. descales: q's, k's and v's
    factors, blocks: their exponents (None: none). q_signs: a bf16 q's rotation signs. root: the tree whose
    build/gfx950 holds the code object (the calling module's ROOT, which tools/gfx950_mutate.py points at a
    mutant's)."""
    from gfx950_emu import GlobalMemory, load_code_object, run_kernel
    assert kernargs.offsets(Kernarg) == kernargs.assembly_offsets(kernargs.FWD_CONTRACT)
    total_q, dim_qk = q.shape[0], q.shape[2]
    max_q, max_k = max(sq for sq, _ in SEQUENCES), max(sk for _, sk in SEQUENCES)
    mem = GlobalMemory()
    addr = {n: mem.alloc_array(np.ascontiguousarray(x)) for n, x in (("q", q), ("k", k), ("v", v))}
    addr["out"] = mem.alloc_array(np.full((total_q, HEADS_Q, DIM_V), BF16_NAN, np.uint16))
    addr["lse"] = mem.alloc_array(np.full((HEADS_Q, total_q), np.nan, np.float32))
    a = Kernarg(q=addr["q"], k=addr["k"], v=addr["v"], out=addr["out"], lse=addr["lse"], seqlen_q=max_q,
                seqlen_k=max_k, heads_q=HEADS_Q, heads_per_kv=HEADS_Q // HEADS_KV, causal=int(causal),
                causal_offset=max_k - max_q, softmax_scale_log2=np.log2(np.e) / np.sqrt(dim_qk), lse_rows=total_q,
                cu_seqlens_q=mem.alloc_array(cu_q), cu_seqlens_k=0 if cu_k is None else mem.alloc_array(cu_k),
                seqused_k=0 if seqused_k is None else mem.alloc_array(seqused_k))
    for n, x in (("q", q), ("k", k), ("v", v)):
        setattr(a, f"{n}_stride_seq", x.shape[-2] * x.shape[-1] * x.dtype.itemsize)
        setattr(a, f"{n}_stride_head", x.shape[-1] * x.dtype.itemsize)
    if pages is not None:
        table, page_size = pages
        a.block_table, a.block_table_stride = mem.alloc_array(np.ascontiguousarray(table, np.int32)), table.shape[1]
        a.page_size_log2 = page_size.bit_length() - 1
        a.k_page_stride, a.v_page_stride = (x[0].nbytes for x in (k, v))
    a.out_stride_seq, a.out_stride_head = HEADS_Q * DIM_V * 2, DIM_V * 2
    a.q_bf16 = int(q.dtype.itemsize == 2 and k.dtype.itemsize == 1)
    if q_signs is not None:
        a.q_rotation_signs = mem.alloc_array(np.ascontiguousarray(q_signs, np.float32))
    for n, d in zip("qkv", descales or ()):
        if d is None:
            continue
        setattr(a, f"{n}_descale", mem.alloc_array(np.ascontiguousarray(d, np.float32).reshape(-1)))
        setattr(a, f"{n}_descale_stride_batch", HEADS_KV)
        setattr(a, f"{n}_descale_stride_head", 1)
    if blocks is not None:
        for n, e in zip("qkv", blocks):
            if e is None:
                continue
            setattr(a, f"{n}_exponents", mem.alloc_array(np.ascontiguousarray(e, np.int8)))
            setattr(a, f"{n}_block_tokens", BLOCK_TOKENS)
            setattr(a, f"{n}_blocks_per_head", e.shape[2])
    # the check of the arrays first, the forward kernel then on its copies, as the library launches them
    workspace, copies = varlen_check.run(
        mem, seed, cu_q=a.cu_seqlens_q, cu_k=a.cu_seqlens_k, seqused_k=a.seqused_k, block_table=a.block_table,
        out=addr["out"], lse=addr["lse"], out_stride_seq=a.out_stride_seq, out_stride_head=a.out_stride_head,
        batch=len(cu_q) - 1, total_q=total_q, total_k=0 if pages else k.shape[0], max_q=max_q, max_k=max_k,
        block_table_stride=a.block_table_stride, page_size_log2=a.page_size_log2,
        num_pages=k.shape[0] if pages else 0, heads_q=HEADS_Q)
    assert varlen_check.header(mem, workspace) == verdict, f"seed {seed}"
    a.cu_seqlens_q, a.cu_seqlens_k, a.seqused_k = copies
    co = load_code_object(str((root or ROOT) / "build" / "gfx950" / f"{name}.co"))
    run_kernel(co, name, grid=(-(-max_q // QUERIES_PER_WORKGROUP), HEADS_Q, len(cu_q) - 1),
               workgroup_size=LANES_PER_WORKGROUP, kernarg=bytes(a), memory=mem, seed=seed)
    out = mem.read(addr["out"], np.uint16, (total_q, HEADS_Q, DIM_V))
    return out, mem.read(addr["lse"], np.float32, (HEADS_Q, total_q))


def _check_untouched(seed, out_bits, lse, cu_q):
    """The rows past the last sequence keep their poison; every row of the sequences is written."""
    end = int(cu_q[-1])
    assert (out_bits[end:] == BF16_NAN).all() and np.isnan(lse[:, end:]).all(), f"seed {seed}: rows past written"
    out = out_bits[:end].view(ml_dtypes.bfloat16).astype(np.float64)
    assert np.isfinite(out).all(), f"seed {seed}: unwritten or non-finite outputs"
    assert not np.isnan(lse[:, :end]).any(), f"seed {seed}: unwritten lse"
    return out


def _check_lse(seed, b, lse, ref_lse):
    verdict = lse_verdict(lse, ref_lse)
    assert verdict.ok, f"seed {seed}: sequence {b}: {verdict.detail}"


def _bf16_floor(q, k, v, causal):
    """bf16_floor of one sequence (seqlen, heads, dim)."""
    return bf16_floor(q[None], k[None], v[None], causal)[0]


def _sequence_reference(q, k, v, causal):
    """float64 out (sq, heads_q, dim_v) and lse (heads_q, sq) of one sequence; out 0 and lse -inf without keys."""
    if k.shape[0] == 0:
        return np.zeros((q.shape[0], HEADS_Q, DIM_V)), np.full((HEADS_Q, q.shape[0]), -np.inf)
    out, lse = reference.attention_reference(q[None], k[None], v[None], causal=causal, return_lse=True)
    return out[0], lse[0]


# Each family runs both ways of giving key lengths, one with the mask and one without (each run ~5 s on CI's cores).
@shapes.over_dims_qk
@pytest.mark.parametrize("causal, seqused", [(True, False), (False, True)], ids=["causal-cu_seqlens_k",
                                                                                "full-seqused_k"])
def test_varlen_bf16(causal, seqused, dim_qk):
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    cu_q, cu_k, seqused_k = _layout(seqused)
    normal = lambda r, shape: r.standard_normal(shape)  # noqa: E731
    lengths_k = np.diff(cu_k)
    q, k, v = (_packed(rng, cu, lengths, heads, dim, normal).astype(ml_dtypes.bfloat16)
               for cu, lengths, heads, dim in ((cu_q, np.diff(cu_q), HEADS_Q, dim_qk),
                                               (cu_k, lengths_k, HEADS_KV, dim_qk), (cu_k, lengths_k, HEADS_KV, DIM_V)))
    if seqused:  # the unused keys NaN
        for b, (_, sk) in enumerate(SEQUENCES):
            k[cu_k[b] + sk:cu_k[b + 1]] = v[cu_k[b] + sk:cu_k[b + 1]] = np.nan
    name = "fwd_bf16_hd128" if dim_qk == 128 else f"fwd_bf16_qk{dim_qk}"
    out_bits, lse = _run(name, q, k, v, cu_q, cu_k, seqused_k, causal, seed)
    out = _check_untouched(seed, out_bits, lse, cu_q)
    for b, (sq, sk) in enumerate(SEQUENCES):
        if sq == 0:
            continue  # no row of out or lse is the sequence's
        rows_q, rows_k = _rows(cu_q, b, sq), _rows(cu_k, b, sk)
        ref, ref_lse = _sequence_reference(q[rows_q], k[rows_k], v[rows_k], causal)
        verdict = bf16_verdict(out[rows_q], ref, _bf16_floor(q[rows_q], k[rows_k], v[rows_k], causal))
        assert verdict.ok, f"seed {seed}: sequence {b}: {verdict.detail}"
        _check_lse(seed, b, lse[:, rows_q], ref_lse)


def _quantized(rng, cu, lengths, heads, dim, per_block):
    """Packed e4m3 codes of N(0, 1) values with uneven magnitudes across blocks of tokens, and their descale: per
    (sequence, kv head) factors (float32 (batch, HEADS_KV)) or, per_block, int8 exponents (batch, heads,
    ceil(longest / BLOCK_TOKENS)), each sequence's blocks counted from its first token; and the float64 values."""
    batch, longest = len(lengths), max(lengths)
    codes = np.full((int(cu[-1]) + PAD_ROWS, heads, dim), 0x7F, np.uint8)  # NaN codes outside the sequences
    values = np.full(codes.shape, np.nan)
    exponents = np.zeros((batch, heads, -(-longest // BLOCK_TOKENS)), np.int8)
    factors = np.ones((batch, HEADS_KV), np.float32)
    for b, n in enumerate(lengths):
        x = rng.standard_normal((1, n, heads, dim)) * np.exp(rng.normal(0, 2, (1, n, 1, 1)))
        if n == 0:
            continue
        if per_block:
            c, e = fp8.quantize_blocks(x, BLOCK_TOKENS)
            exponents[b, :, :e.shape[2]] = e[0]
            values[_rows(cu, b, n)] = fp8.dequantize_blocks(c, e, BLOCK_TOKENS)[0]
        else:
            amax = np.abs(x).reshape(n, HEADS_KV, -1).max(axis=(0, 2))
            factors[b] = np.maximum(amax, 1e-12) / 448.0
            scale = np.repeat(factors[b], heads // HEADS_KV)[None, :, None]
            c = fp8.e4m3_encode(x[0] / scale)[None]
            values[_rows(cu, b, n)] = fp8.e4m3_decode(c[0]).astype(np.float64) * scale
        codes[_rows(cu, b, n)] = c[0]
    return codes, (exponents if per_block else factors), values


def _check_fp8_sequence(seed, b, out, lse, codes, descales, dequantized, rows_q, rows_k, sq, sk, per_block, causal):
    """Sequence b's out and lse (its rows rows_q, keys rows_k; sq queries, sk keys) against the numpy model of the fp8
    pipeline (its own descales: per (sequence, kv head), or per block of BLOCK_TOKENS from its first token) and float64
    attention of the dequantized inputs."""
    (q8, k8, v8), (qd, kd, vd), (qx, kx, vx) = codes, descales, dequantized
    if per_block:
        scales = [fp8.block_scales(e[b:b + 1], n, BLOCK_TOKENS) for e, n in ((qd, sq), (kd, sk), (vd, sk))]
    else:
        scales = [np.repeat(qd[b:b + 1], HEADS_Q // HEADS_KV, axis=1), kd[b:b + 1], vd[b:b + 1]]
    model, model_lse = fp8.attention_fp8_model(q8[rows_q][None], k8[rows_k][None], v8[rows_k][None], *scales,
                                               causal=causal, kv_tile=64, return_lse=True)
    _check_lse(seed, b, lse[:, rows_q], model_lse[0])
    ref, _ = _sequence_reference(qx[rows_q], kx[rows_k], vx[rows_k], causal)
    for verdict in fp8_verdicts(out[rows_q], model[0], ref):
        assert verdict.ok, f"seed {seed}: sequence {b}: {verdict.detail}"


@shapes.over_dims_qk
@pytest.mark.parametrize("causal, seqused, descale", [(True, True, "per_block"), (False, False, "per_head")],
                         ids=["causal-seqused_k-per_block", "full-cu_seqlens_k-per_head"])
def test_varlen_fp8(causal, seqused, descale, dim_qk):
    """Against the numpy model of the fp8 pipeline per sequence (exp-free codes at the running max of each 64-key
    tile, the sequence's own descales: per (sequence, kv head), or per block of 64 tokens from its first), within
    the bf16 rounding of the output; and against float64 attention of the dequantized inputs within 1.5x the model's
    error."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    cu_q, cu_k, seqused_k = _layout(seqused)
    per_block = descale == "per_block"
    lengths_q, lengths_k = np.diff(cu_q), [sk for _, sk in SEQUENCES]
    (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = (
        _quantized(rng, cu, lengths, heads, dim, per_block)
        for cu, lengths, heads, dim in ((cu_q, lengths_q, HEADS_Q, dim_qk), (cu_k, lengths_k, HEADS_KV, dim_qk),
                                        (cu_k, lengths_k, HEADS_KV, DIM_V)))
    views = [x.view(ml_dtypes.float8_e4m3fn) for x in (q8, k8, v8)]
    out_bits, lse = _run(_fp8_kernel(dim_qk), *views, cu_q, cu_k, seqused_k, causal, seed,
                         descales=None if per_block else (qd, kd, vd), blocks=(qd, kd, vd) if per_block else None)
    out = _check_untouched(seed, out_bits, lse, cu_q)
    for b, (sq, sk) in enumerate(SEQUENCES):
        if sq == 0:
            continue  # no row of out or lse is the sequence's
        _check_fp8_sequence(seed, b, out, lse, (q8, k8, v8), (qd, kd, vd), (qx, kx, vx),
                            _rows(cu_q, b, sq), _rows(cu_k, b, sk), sq, sk, per_block, causal)
