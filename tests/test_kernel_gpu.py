"""The Hopper kernels against the float64 reference, on the GPU (CuPy arrays in and out, gpu_arrays.py).

Error bounds are relative to peers measured on the same inputs, not magic numbers:
  bf16: relative L2 <= 1.5x the error of torch's bf16 SDPA (where torch is installed: markers.NO_TORCH otherwise,
        after every other check);
  fp8:  relative L2 (against float64 attention of the dequantized inputs) <= 1.5x the error of a float64
        emulation that rounds only P to e4m3 and the output to bf16 (the kernel's unavoidable steps), and <= 1.5x FlashAttention-3's
        fp8 error where fa3_fwd is installed.
Every output is poisoned with NaN first; every element must be written and finite.
"""
import math

import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
import probability_codes
import shapes
from flashprefill import fp8, policy, prepared_v, reference

cp = pytest.importorskip("cupy", reason=markers.NO_CUPY)
pytestmark = pytest.mark.gpu

FP8_MAX = 448.0
RNG = np.random.default_rng()

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv): seqlen 1, non-tile multiples, seqlen_q < seqlen_k, GQA 1..8
SHAPES = [
    (1, 1, 1, 1, 1),
    (1, 17, 17, 2, 1),
    (2, 128, 128, 4, 2),
    (1, 200, 200, 8, 8),
    (1, 300, 1000, 4, 1),
    (2, 1000, 1000, 8, 1),
]


def _seed():
    return int(RNG.integers(1 << 31))


_randn = ga.randn


def _inputs(shape, dims, seed):
    """q, k, v float32 N(0,1); dims: the head dim, or (dim_qk, dim_v)."""
    batch, sq, sk, hq, hkv = shape
    dim_qk, dim_v = (dims, dims) if isinstance(dims, int) else dims
    return _randn((batch, sq, hq, dim_qk), seed), _randn((batch, sk, hkv, dim_qk), seed + 1), \
        _randn((batch, sk, hkv, dim_v), seed + 2)


def _poisoned(batch, sq, hq, dim):
    return ga.poisoned_bf16((batch, sq, hq, dim))


def _host64(x):
    """Any array (CuPy or numpy; bfloat16, e4m3 or a float) as float64 numpy."""
    x = cp.asnumpy(ga.bits(x)).view(x.dtype) if isinstance(x, cp.ndarray) else np.asarray(x)
    return ga.to_f64(x)


def _rel_l2(out, ref):
    return reference.relative_l2(_host64(out), _host64(ref))


def _report(out, ref):
    return reference.error_report(_host64(out), _host64(ref))


def _take_rows(x, rows):
    """x[0, rows] of a device array of any dtype (indexed through its bits)."""
    return ga.bits(x)[0, rows].view(x.dtype)


def _mask_causal(s, seqlen_q, seqlen_k):
    """s (..., seqlen_q, seqlen_k) with the keys a query does not see (bottom-right aligned) at -inf."""
    keys = cp.arange(seqlen_k)[None, :]
    return cp.where(keys > cp.arange(seqlen_q)[:, None] + (seqlen_k - seqlen_q), -cp.inf, s)


def _round_p(p, p_dtype):
    """float64 p rounded through float32 to p_dtype ("e4m3" or "float16"), back in float64."""
    p32 = p.astype(cp.float32)
    return (ga.to_f64(ga.to_e4m3(p32)) if p_dtype == "e4m3" else p32.astype(cp.float16).astype(cp.float64))


def _quantize(x, per_head, heads_kv):
    """(codes, descale, dequantized) with FA3-style factors: one per tensor, or one per (batch, KV head),
    shared for q by the heads_q // heads_kv query heads of a group."""
    batch, seq, heads, dim = x.shape
    if per_head:
        groups = x.reshape(batch, seq, heads_kv, heads // heads_kv, dim)
        descale = cp.maximum(cp.abs(groups).max(axis=(1, 3, 4)) / cp.float32(FP8_MAX), cp.float32(1e-12))
        scale = cp.repeat(descale, heads // heads_kv, axis=1)[:, None, :, None]
    else:
        descale = scale = cp.maximum(cp.abs(x).max() / cp.float32(FP8_MAX), cp.float32(1e-12))
    codes = ga.to_e4m3(x / scale)
    return codes, descale.astype(cp.float32), ga.to_f64(codes) * scale.astype(cp.float64)  # astype: a new array


def _quantize_blocks(x, block_tokens):
    """(codes, BlockScales, dequantized) by the library's block quantizer (fp8.quantize_blocks)."""
    codes, exponents = fp8.quantize_blocks(cp.asnumpy(x), block_tokens)
    dequantized = fp8.dequantize_blocks(codes, exponents, block_tokens)
    return (ga.to_device(codes.view(ga.E4M3)), fp.BlockScales(ga.to_device(exponents), block_tokens),
            cp.asarray(dequantized))


def _uneven_blocks(x, seed, low, high):
    """x times a power of two in 2^low..2^high per 64 tokens and head: block exponents that vary along a head."""
    batch, seq, heads, _ = x.shape
    steps = ga.randint(low, high + 1, (batch, (seq + 63) // 64, heads), seed)
    return x * cp.repeat(cp.exp2(steps.astype(cp.float32)), 64, axis=1)[:, :seq, :, None]


def _sdpa_bf16(q, k, v, causal):
    """torch SDPA in bf16 as the same-precision peer; (batch, seq, heads, dim) in, float32 numpy out. Skips
    (markers.NO_TORCH) where torch is not installed: call it after the test's other checks."""
    torch = markers.torch_or_skip()
    tq, tk, tv = (torch.from_dlpack(cp.ascontiguousarray(x.view(cp.int16))).view(torch.bfloat16) for x in (q, k, v))
    rep = tq.shape[2] // tk.shape[2]
    qt, kt, vt = (x.transpose(1, 2) for x in (tq, tk.repeat_interleave(rep, 2), tv.repeat_interleave(rep, 2)))
    if causal and tq.shape[1] != tk.shape[1]:
        mask = torch.ones(tq.shape[1], tk.shape[1], dtype=torch.bool, device=tq.device).tril(tk.shape[1] - tq.shape[1])
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    else:
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return out.transpose(1, 2).float().cpu().numpy()


def _p_rounding_floor(q, k, v, causal, p_dtype="e4m3"):
    """float64 attention whose only rounding is P -> p_dtype at 2^8 times the row max (as the kernel scales P)."""
    rep = q.shape[2] // k.shape[2]
    k, v = cp.repeat(k, rep, 2), cp.repeat(v, rep, 2)
    s = cp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        s = _mask_causal(s, q.shape[1], k.shape[1])
    p = cp.exp(s - s.max(-1, keepdims=True)) * 256
    return cp.einsum("bhqk,bkhd->bqhd", _round_p(p, p_dtype), v) / p.sum(-1)[..., None].transpose(0, 2, 1, 3)


def _fa3():
    try:
        from fa3_fwd_interface import flash_attn_func
    except ImportError:
        return None
    return flash_attn_func


def _assert_within_fa3(err, report, ref, problem, shape, dims, causal, seed):
    """err at most 1.5x FA3 fp8's error on the same codes and factors (problem as _fp8_problem's, per tensor or per
    (batch, kv head)); a skip (markers.NO_FA3) where fa3_fwd is missing, nothing where its wheel has no kernel for
    the dims (never hd128). Called after the test's other checks."""
    fa3 = _fa3()
    if fa3 is None:
        pytest.skip(markers.NO_FA3)
    import torch
    (q8, qd, _), (k8, kd, _), (v8, vd, _) = problem
    codes = lambda c: torch.from_dlpack(cp.ascontiguousarray(ga.bits(c))).view(torch.float8_e4m3fn)
    expand = lambda d: torch.from_dlpack(cp.ascontiguousarray(cp.broadcast_to(d.reshape(1, 1) if d.ndim == 0 else d,
                                                                              (shape[0], shape[4]))))
    try:
        peer = fa3(codes(q8), codes(k8), codes(v8), causal=causal, q_descale=expand(qd), k_descale=expand(kd),
                   v_descale=expand(vd))
    except RuntimeError as e:  # a wheel built without this head-dim pair; the floor bound still held
        assert dims != (128, 128), f"FA3 refused hd128: {e}"
        print(f"FA3 fp8 has no kernel for dims {dims}: {str(e).splitlines()[0]}")
        return
    peer = peer[0] if isinstance(peer, tuple) else peer
    peer_err = _rel_l2(peer.float().cpu().numpy(), ref)
    assert err <= 1.5 * peer_err, f"seed {seed}: {report}; FA3 fp8 {peer_err:.3e}"


def _check_bf16(q, k, v, causal, seed):
    """The bf16 kernel on bf16 q, k, v into poisoned outputs: every element written and finite, the log-sum-exp
    within 1e-3 (relative to its magnitude), and relative L2 within 1.5x torch SDPA's bf16 error against float64."""
    ref, ref_lse = reference.attention_reference(*(_host64(x) for x in (q, k, v)), causal=causal, return_lse=True)
    out = _poisoned(q.shape[0], q.shape[1], q.shape[2], v.shape[3])
    _, lse = fp.attention(q, k, v, causal=causal, out=out, return_lse=True)
    ga.synchronize()
    assert ga.all_finite(out), f"seed {seed}: unwritten or non-finite output elements"
    lse_err = np.abs(cp.asnumpy(lse) - ref_lse).max()
    assert lse_err < 1e-3 * max(1.0, np.abs(ref_lse).max()), f"seed {seed}: lse max abs error {lse_err:.3e}"
    err = _rel_l2(out, ref)
    peer = _rel_l2(_sdpa_bf16(q, k, v, causal), ref)
    assert err <= 1.5 * peer, f"seed {seed}: {_report(out, ref)}; SDPA {peer:.3e}"


@shapes.over_attention_dims
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(SHAPES)
def test_bf16(shape, causal, dims):
    seed = _seed()
    q, k, v = (ga.to_bf16(x) for x in _inputs(shape, dims, seed))
    _check_bf16(q, k, v, causal, seed)


@shapes.over_attention_dims
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("rise_log2", [100.0, 1500.0])
def test_bf16_scores_rising_toward_early_keys(rise_log2, causal, dims):
    """Scores that grow toward the first keys, which the kernel reaches last (tiles run from the diagonal back):
    at dim_qk 128 each tile passes the row's reference by far more than its slack (FwdConfig::kLazyMax), by more than
    128 log2 units a tile at the larger rise (where 2^x taken before the shift would overflow), in every other row
    only (q's channel 0 is 1 or 0), so a warp raises some rows and keeps others."""
    seed = _seed()
    shape = (1, 1000, 1000, 4, 1)
    q, k, v = _inputs(shape, dims, seed)
    rows = cp.arange(shape[1])
    keys = cp.arange(shape[2])
    q[:, :, :, 0] = (rows % 2).astype(cp.float32)[None, :, None]
    k[:, :, :, 0] = (rise_log2 * math.log(2) * math.sqrt(dims[0]) * (1 - keys / shape[2]))[None, :, None]
    _check_bf16(*(ga.to_bf16(x) for x in (q, k, v)), causal, seed)


@shapes.over_attention_dims
def test_bf16_scores_far_below_zero_after_masked_first_tile(dims):
    """seqlen_q < seqlen_k with an offset that is not a whole tile: many rows see no key in the first tile the
    kernel takes (the diagonal one), and all their scores then lie ~300 log2 units below 0 (every other row). A lazy
    reference left at 0 for rows without keys would underflow every p of those rows (a zero row sum, NaN): their
    first keys must set it (FwdConfig::kLazyMax)."""
    seed = _seed()
    shape = (1, 300, 1000, 4, 1)
    q, k, v = _inputs(shape, dims, seed)
    q[:, :, :, 0] = (cp.arange(shape[1]) % 2).astype(cp.float32)[None, :, None]
    k[:, :, :, 0] = -300.0 * math.log(2) * math.sqrt(dims[0])
    _check_bf16(*(ga.to_bf16(x) for x in (q, k, v)), True, seed)


@shapes.over_attention_dims
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_rows_whose_scores_are_all_below_zero(dtype, causal, dims):
    """Every score of every other row lies below 0 (q's channel 0 is 1 there, 0 elsewhere; k's is -80: scores about
    -80 +- 11 before the softmax scale), in every tile. The row max over a tile is taken on the scores' bits as
    integers (softmax.cuh, thread_max_of_bits), exact only where a row holds a score >= 0; these rows, and a warp
    that mixes them with the others, must take the float path."""
    seed = _seed()
    shape = (1, 1000, 1000, 4, 1)
    q, k, v = _inputs(shape, dims, seed)
    q[:, :, :, 0] = (cp.arange(shape[1]) % 2).astype(cp.float32)[None, :, None]
    k[:, :, :, 0] = -80.0
    if dtype == "bf16":
        _check_bf16(*(ga.to_bf16(x) for x in (q, k, v)), causal, seed)
        return
    _check_fp8(tuple(_quantize(x, True, shape[4]) for x in (q, k, v)), shape, dims, causal, seed)


def _fp8_poisoned_run(problem, shape, dims, causal, seed, **options):
    """fp.attention on problem's codes and descales into a poisoned output, with `options`; asserts every element
    written and finite. Returns what attention returns (out, or (out, lse))."""
    (q8, qd, _), (k8, kd, _), (v8, vd, _) = problem
    out = _poisoned(shape[0], shape[1], shape[3], dims[1])
    result = fp.attention(q8, k8, v8, causal=causal, q_descale=qd, k_descale=kd, v_descale=vd, out=out, **options)
    ga.synchronize()
    assert ga.all_finite(out), f"seed {seed}: unwritten or non-finite output elements"
    return result


def _check_fp8(problem, shape, dims, causal, seed):
    """The fp8 kernel on problem's (codes, descale, dequantized) of q, k, v into poisoned outputs: every element
    written and finite, relative L2 (against float64 attention of the dequantized inputs) within 1.5x the floor of
    rounding P to e4m3 and the output to bf16. Returns (error, report, float64 reference)."""
    _, _, (qx, kx, vx) = zip(*problem)
    ref = reference.attention_reference(*(cp.asnumpy(x) for x in (qx, kx, vx)), causal=causal)
    out = _fp8_poisoned_run(problem, shape, dims, causal, seed, scores="fp32")
    err = _rel_l2(out, ref)
    floor = _rel_l2(ga.to_bf16(_p_rounding_floor(qx, kx, vx, causal)), ref)
    report = _report(out, ref)
    assert err <= 1.5 * floor, f"seed {seed}: {report}; P-and-output-rounding floor {floor:.3e}"
    return err, report, ref


def _fp8_problem(shape, dims, descales, seed):
    """((codes, descale, dequantized) of q, k, v). Per block: the inputs' scale changes every 64 tokens (q, k by
    2^-2..2^1, keeping the scores' range usual; v by 2^-6..2^6), so the block exponents vary along each head and
    O changes unit between KV tiles."""
    if descales.startswith("per_block"):
        inputs = (_uneven_blocks(x, seed + i, *span)
                  for i, (x, span) in enumerate(zip(_inputs(shape, dims, seed), [(-2, 1), (-2, 1), (-6, 6)])))
        return tuple(_quantize_blocks(x, int(descales[9:])) for x in inputs)
    return tuple(_quantize(x, descales == "per_head", shape[4]) for x in _inputs(shape, dims, seed))


# At hd128 with e4m3 probabilities, per_tensor, per_head and per_block384 (blocks of whole 192-key tiles) run the
# kernel with 192-key tiles; per_block128 and per_block256 the one with 128-key tiles.
FP8_DESCALES = ["per_tensor", "per_head", "per_block128", "per_block256", "per_block384"]


@shapes.over_attention_dims
@pytest.mark.parametrize("descales", FP8_DESCALES)
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(SHAPES)
def test_fp8(shape, causal, descales, dims):
    seed = _seed()
    problem = _fp8_problem(shape, dims, descales, seed)
    err, report, ref = _check_fp8(problem, shape, dims, causal, seed)
    if not descales.startswith("per_block"):  # FA3 takes factors only
        _assert_within_fa3(err, report, ref, problem, shape, dims, causal, seed)


@shapes.over_attention_dims
@pytest.mark.parametrize("descales", FP8_DESCALES)
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(SHAPES)
def test_fp8_fp16_probabilities(shape, causal, descales, dims):
    """probabilities="fp16": against float64 attention on the dequantized inputs, within 1.5x the floor of P
    rounded to float16 and the output to bf16, and, where P's rounding shows, at most half the e4m3-P floor the
    default kernel is held to (the point of the option); the LSE as for bf16."""
    seed = _seed()
    problem = _fp8_problem(shape, dims, descales, seed)
    _, _, (qx, kx, vx) = zip(*problem)
    ref, ref_lse = reference.attention_reference(*(cp.asnumpy(x) for x in (qx, kx, vx)), causal=causal,
                                                 return_lse=True)
    out, lse = _fp8_poisoned_run(problem, shape, dims, causal, seed, probabilities="fp16", return_lse=True)
    err = _rel_l2(out, ref)
    floor16 = _rel_l2(ga.to_bf16(_p_rounding_floor(qx, kx, vx, causal, "float16")), ref)
    floor8 = _rel_l2(ga.to_bf16(_p_rounding_floor(qx, kx, vx, causal)), ref)
    report = _report(out, ref)
    assert err <= 1.5 * floor16, f"seed {seed}: {report}; float16-P-and-output-rounding floor {floor16:.3e}"
    if floor8 > 2 * floor16:  # P's rounding shows (not where every row has a single key)
        assert err <= 0.5 * floor8, f"seed {seed}: {report}; e4m3-P floor {floor8:.3e}"
    lse_err = np.abs(cp.asnumpy(lse) - ref_lse).max()
    assert lse_err < 1e-3 * max(1.0, np.abs(ref_lse).max()), f"seed {seed}: lse max abs error {lse_err:.3e}"


# Float16 scores (scores="fp16"): q's codes shrunk by a power of two into flashprefill.h's bound (+-1.125 at dim_qk
# 128, +-0.75 at 192: 448 / 2^9 and 448 / 2^10), its descale grown alike, so that every 64-row group takes them.
F16_SCORES_Q_SHIFT = {128: 9, 192: 10}
F16_SCORES_DESCALES = FP8_DESCALES  # 192-key tiles, and 128-key tiles for per_block128 and per_block256


def _per_element_scale(descale, shape, heads_kv):
    """The factor each code of a (batch, seq, heads, dim) tensor stands for, broadcastable to it (float64)."""
    batch, seq, heads, _ = shape
    if isinstance(descale, fp.BlockScales):
        scale = cp.repeat(cp.exp2(descale.exponents.astype(cp.float64)), descale.block_tokens, axis=2)[:, :, :seq]
        return scale.transpose(0, 2, 1)[..., None]
    if descale.ndim == 0:
        return descale.astype(cp.float64)
    return cp.repeat(descale.astype(cp.float64), heads // heads_kv, axis=1)[:, None, :, None]


def _small_q(problem, dims, heads_kv):
    """problem (as _fp8_problem) with q's codes shrunk into float16 scores' bound; returns the new (codes, descale,
    dequantized) of q, whose codes are the old ones rounded again by e4m3 (the subnormals lose bits)."""
    (q8, qd, _), k, v = problem
    shift = F16_SCORES_Q_SHIFT[dims[0]]
    small = ga.to_e4m3(ga.to_float(q8) / 2**shift)
    qd = (fp.BlockScales((qd.exponents + shift).astype(cp.int8), qd.block_tokens) if isinstance(qd, fp.BlockScales)
          else qd * 2**shift)
    return (small, qd, ga.to_f64(small) * _per_element_scale(qd, small.shape, heads_kv)), k, v


def _f16_scores_floor(q8, q_scale, k8, k_scale, v, causal):
    """_p_rounding_floor with the scores first rounded to float16 where the kernel holds them: as raw sums of code
    products (exact in float64, within float16's range by the bound), times the codes' scales."""
    rep = q8.shape[2] // k8.shape[2]
    k8, v = cp.repeat(ga.to_f64(k8), rep, 2), cp.repeat(v, rep, 2)
    raw = cp.einsum("bqhd,bkhd->bhqk", ga.to_f64(q8), k8).astype(cp.float16).astype(cp.float64)
    q_scale = cp.broadcast_to(cp.asarray(q_scale), (q8.shape[0], q8.shape[1], q8.shape[2], 1))
    k_scale = cp.broadcast_to(cp.asarray(k_scale), (k8.shape[0], k8.shape[1], k8.shape[2] // rep, 1))
    k_scale = cp.repeat(k_scale, rep, 2)
    s = raw * q_scale.transpose(0, 2, 1, 3) * k_scale.transpose(0, 2, 3, 1) / math.sqrt(q8.shape[-1])
    if causal:
        s = _mask_causal(s, q8.shape[1], k8.shape[1])
    p = cp.exp(s - s.max(-1, keepdims=True)) * 256
    return cp.einsum("bhqk,bkhd->bqhd", _round_p(p, "e4m3"), v) / p.sum(-1)[..., None].transpose(0, 2, 1, 3)


@shapes.over_attention_dims
@pytest.mark.parametrize("descales", F16_SCORES_DESCALES)
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(SHAPES)
def test_fp8_float16_scores(shape, causal, descales, dims):
    """scores="fp16" on q codes within the bound: against float64 attention on the dequantized inputs, within 1.5x
    the floor of rounding the scores to float16, P to e4m3 and the output to bf16, and within 1.5x FA3's fp8 error
    on the same codes (factor descales)."""
    seed = _seed()
    heads_kv = shape[4]
    problem = _small_q(_fp8_problem(shape, dims, descales, seed), dims, heads_kv)
    (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = problem
    ref = reference.attention_reference(*(cp.asnumpy(x) for x in (qx, kx, vx)), causal=causal)
    out = _fp8_poisoned_run(problem, shape, dims, causal, seed, scores="fp16")
    err = _rel_l2(out, ref)
    floor = _rel_l2(ga.to_bf16(_f16_scores_floor(q8, _per_element_scale(qd, q8.shape, heads_kv), k8,
                                                 _per_element_scale(kd, k8.shape, heads_kv), vx, causal)), ref)
    report = _report(out, ref)
    assert err <= 1.5 * floor, f"seed {seed}: {report}; float16-score, P and output rounding floor {floor:.3e}"
    if not descales.startswith("per_block"):
        _assert_within_fa3(err, report, ref, problem, shape, dims, causal, seed)


def _f16_scores_q(q8, dim_qk):
    """The q codes the float16-score kernels compute with, and the power of two each row's codes were divided by:
    per 64-row group of a (batch, head) (a warpgroup's rows of a 128-row tile), the least shift with every code's
    magnitude / 2^shift within the bound (8 codes a binade above the bound's code; NaN codes count as 0), the codes
    rounded to e4m3 again."""
    bound = int(fp8.e4m3_encode(np.array([policy.query("cuda", dim_qk, 128, scores="fp16").q_code_max],
                                         np.float32))[0])
    batch, seq, heads, dim = q8.shape
    groups = -(-seq // 64)
    magnitude = (ga.bits(q8) & 0x7F).astype(cp.int32)
    magnitude[magnitude == 0x7F] = 0  # a NaN code leaves its group's shift alone
    padded = cp.zeros((batch, groups * 64, heads, dim), dtype=cp.int32)
    padded[:, :seq] = magnitude
    largest = padded.reshape(batch, groups, 64, heads, dim).max(axis=(2, 4))  # (batch, groups, heads)
    shift = cp.maximum((largest - bound + 7) // 8, 0)
    row_shift = cp.repeat(shift, 64, axis=1)[:, :seq, :, None]
    return ga.to_e4m3(ga.to_float(q8) / cp.exp2(row_shift.astype(cp.float32))), row_shift


@shapes.over_attention_dims
def test_float16_scores_shrink_q_per_row_group(dims):
    """scores="fp16" brings q's codes within their bound per warpgroup of 64 query rows by a power of two (the codes
    rounded to e4m3 again), which the score scale takes back: on small codes the output differs from scores="fp32"'s
    and repeats bit for bit; on FA3-style codes (up to 448, with 448 in every group) it equals scores="fp16" on the
    codes shrunk on the host with the descale grown alike, bit for bit; with one large code (64) in rows 64-127 of
    head 0, rows 0-63 keep the small codes' output and rows 64-127 equal the whole head shrunk by that group's power
    of two (a row's output depends on its own q row only)."""
    seed = _seed()
    shape, heads_kv = (1, 256, 256, 4, 1), 1
    problem = _fp8_problem(shape, dims, "per_head", seed)
    (q8, qd, _), (k8, kd, _), (v8, vd, _) = problem
    (small, small_d, _), _, _ = _small_q(problem, dims, heads_kv)
    run = lambda q, d, scores: fp.attention(q, k8, v8, q_descale=d, k_descale=kd, v_descale=vd, scores=scores)
    small16, small16_again = run(small, small_d, "fp16"), run(small, small_d, "fp16")
    small32 = run(small, small_d, "fp32")
    large = ga.copy(q8)
    ga.bits(large)[0, ::64, :, 0] = 0x7E  # 448
    shift = F16_SCORES_Q_SHIFT[dims[0]]
    large16 = run(large, qd, "fp16")
    shrunk16 = run(ga.to_e4m3(ga.to_float(large) / 2**shift), qd * 2**shift, "fp16")
    mixed = ga.copy(small)
    ga.bits(mixed)[0, 100, 0, 3] = int(fp8.e4m3_encode(np.array([64.0], np.float32))[0])  # beyond the bound: group 1, head 0
    mixed_shift = int(_f16_scores_q(mixed, dims[0])[1][0, 100, 0, 0])
    mixed16 = run(mixed, small_d, "fp16")
    mixed_shrunk16 = run(ga.to_e4m3(ga.to_float(mixed) / 2**mixed_shift), small_d * 2**mixed_shift, "fp16")
    ga.synchronize()
    assert mixed_shift > 0 and int(_f16_scores_q(large, dims[0])[1].min()) == shift, "the model's shifts"
    assert ga.all_finite(small16) and ga.all_finite(mixed16), f"seed {seed}: non-finite output"
    assert ga.all_finite(large16), f"seed {seed}: non-finite output"
    assert not ga.equal(small16, small32), f"seed {seed}: float16 scores did not change the output"
    assert ga.equal(small16, small16_again), f"seed {seed}: repeated calls differ"
    assert ga.equal(large16, shrunk16), f"seed {seed}: codes up to 448 against the same shrunk on the host"
    assert ga.equal(mixed16[:, 64:128, 0], mixed_shrunk16[:, 64:128, 0]), f"seed {seed}: the group with a large code"
    assert ga.equal(mixed16[:, :64, 0], small16[:, :64, 0]), f"seed {seed}: a group of small codes"


@shapes.over_attention_dims
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(SHAPES)
def test_fp8_float16_scores_on_fa3_codes(shape, causal, dims):
    """scores="fp16" on FA3-style codes (per (batch, kv head) factors, codes up to 448), which the kernel shrinks
    per group of 64 rows: against float64 attention on those inputs, within 1.5x the floor of the codes it computes
    with (_f16_scores_q) plus float16 scores, e4m3 P and bf16 output, and within 1.5x FA3's error on the same codes."""
    seed = _seed()
    heads_kv = shape[4]
    problem = _fp8_problem(shape, dims, "per_head", seed)
    (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = problem
    ref = reference.attention_reference(*(cp.asnumpy(x) for x in (qx, kx, vx)), causal=causal)
    out = _fp8_poisoned_run(problem, shape, dims, causal, seed, scores="fp16")
    err = _rel_l2(out, ref)
    q_codes, row_shift = _f16_scores_q(q8, dims[0])
    q_scale = _per_element_scale(qd, q8.shape, heads_kv) * cp.exp2(row_shift.astype(cp.float64))
    floor = _rel_l2(ga.to_bf16(_f16_scores_floor(q_codes, q_scale, k8, _per_element_scale(kd, k8.shape, heads_kv),
                                                 vx, causal)), ref)
    report = _report(out, ref)
    assert err <= 1.5 * floor, f"seed {seed}: {report}; shrunk q, float16 score, P, output rounding floor {floor:.3e}"
    _assert_within_fa3(err, report, ref, problem, shape, dims, causal, seed)


@shapes.over_attention_dims
@pytest.mark.parametrize("descales, probabilities, chosen", [
    ("per_head", "default", "fp16"), ("per_block384", "default", "fp16"), ("per_block128", "default", "fp16"),
    ("per_block128", "fp16", "fp32")])
def test_default_scores_take_float16_where_a_kernel_has_them(descales, probabilities, chosen, dims):
    """scores="default" (attention's default) runs float16 scores where a kernel with e4m3 probabilities takes the
    descales (192-key tiles, or 128-key tiles for blocks of 128 tokens) and float32 scores elsewhere (float16
    probabilities): its output equals the chosen option's bit for bit, and, where both run, differs from the
    other's; supports() agrees. FA3-style codes, so the float16 kernels shrink q's codes as well."""
    seed = _seed()
    shape = (1, 500, 500, 4, 2)
    (q8, qd, _), (k8, kd, _), (v8, vd, _) = _fp8_problem(shape, dims, descales, seed)
    kwargs = dict(q_descale=qd, k_descale=kd, v_descale=vd, probabilities=probabilities)
    default, spelled = fp.attention(q8, k8, v8, **kwargs), fp.attention(q8, k8, v8, scores=chosen, **kwargs)
    other = "fp32" if chosen == "fp16" else "fp16"
    has_other = fp.supports(q8, k8, v8, scores=other, **kwargs)
    assert has_other == (chosen == "fp16") and fp.supports(q8, k8, v8, **kwargs)
    ga.synchronize()
    assert ga.all_finite(default) and ga.equal(default, spelled), \
        f"seed {seed}: the default differs from scores={chosen!r}"
    if has_other:
        assert not ga.equal(default, fp.attention(q8, k8, v8, scores=other, **kwargs)), \
            f"seed {seed}: scores={other!r} gave the default's output"


def _extreme_scores_problem(case, seed):
    """hd128 (batch 1, 300 tokens, 4 / 2 heads), q's codes within float16 scores' bound. "max_beyond_256": every
    score carries a common 350 log2 units (q's last dim code 0.875, k's 448, per-tensor descales 1 and 7; k's
    other codes / 64), so that the rows' max passes 256 while the scores around it spread over a few log2 units
    as usual. "multiplier_underflow": descales times 2^-12 each, so that 8 scale_log2 is below float16's normal
    range; "multiplier_overflow": times 2^16 each, above it (and every row an argmax). Returns (codes, descale, dequantized) of q, k, v."""
    dims, heads_kv = (128, 128), 2
    (q8, qd, qx), (k8, kd, kx), v = _small_q(_fp8_problem((1, 300, 300, 4, heads_kv), dims, "per_head", seed), dims,
                                             heads_kv)
    if case in ("multiplier_underflow", "multiplier_overflow"):
        factor = 2.0**-12 if case == "multiplier_underflow" else 2.0**16
        return (q8, qd * factor, qx * factor), (k8, kd * factor, kx * factor), v
    # The common part sits in the last k32 step of S's float16 accumulation: one rounding at its magnitude, as
    # _f16_scores_floor rounds the whole sum once.
    q, k = ga.to_float(q8), ga.to_float(k8) / 64
    q[..., -1], k[..., -1] = 0.875, 448.0
    q8, k8 = ga.to_e4m3(q), ga.to_e4m3(k)
    qd, kd = cp.asarray(1.0, dtype=cp.float32), cp.asarray(7.0, dtype=cp.float32)
    return (q8, qd, ga.to_f64(q8) * 1.0), (k8, kd, ga.to_f64(k8) * 7.0), v


@pytest.mark.parametrize("case", ["max_beyond_256", "multiplier_underflow"])
def test_fp8_float16_scores_extreme_scales(case):
    """Scores whose row max passes 256 (log2 units), or a float16 multiplier below float16's normal range: the
    kernel then takes the exact form of the codes (cuda/fwd/f16_scores.cuh). Within 1.5x the float16-score floor,
    finite. (Descales of 2^16 each put every row in the argmax regime, where which of two keys within a float16
    step wins flips between any two roundings of S: 14% of seeds measured over 1.5x that floor, up to 30x, with
    the kernel bitwise the same (bench/NOTES.md, session 11). Such inputs test ties, not the kernel.)"""
    seed = _seed()
    (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = _extreme_scores_problem(case, seed)
    heads_kv = k8.shape[2]
    if case == "max_beyond_256":
        scale_log2 = float(qd * kd) / math.sqrt(128) / math.log(2)
        assert 300 < 392 * scale_log2 < 400, "the common part of the scores, in log2 units"
    ref = reference.attention_reference(*(cp.asnumpy(x) for x in (qx, kx, vx)), causal=True)
    out = _poisoned(*q8.shape[:3], v8.shape[3])
    fp.attention(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, out=out, scores="fp16")
    ga.synchronize()
    assert ga.all_finite(out), f"seed {seed}: unwritten or non-finite output elements"
    err = _rel_l2(out, ref)
    floor = _rel_l2(ga.to_bf16(_f16_scores_floor(q8, _per_element_scale(qd, q8.shape, heads_kv), k8,
                                                 _per_element_scale(kd, k8.shape, heads_kv), vx, True)), ref)
    assert err <= 1.5 * floor, f"seed {seed}: {_report(out, ref)}; floor {floor:.3e}"


def test_fp8_float16_scores_multiplier_overflow():
    """Descales of 2^16 each: 8 scale_log2 above float16's range (the exact form's clamped shift,
    cuda/fwd/f16_scores.cuh) and every row an argmax, where near-ties flip with any rounding of S, so no floor holds
    (test_fp8_float16_scores_extreme_scales' docstring). What must hold: every element written and finite, and each
    output a convex combination of the V rows its query sees (the row sum is taken from the probabilities P.V
    uses): within each dimension's range over those keys, up to bf16's rounding of the output."""
    seed = _seed()
    (q8, qd, _), (k8, kd, _), (v8, vd, vx) = _extreme_scores_problem("multiplier_overflow", seed)
    out = _poisoned(*q8.shape[:3], v8.shape[3])
    fp.attention(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, out=out, scores="fp16")
    ga.synchronize()
    assert ga.all_finite(out), f"seed {seed}: unwritten or non-finite output elements"
    v = cp.asnumpy(cp.repeat(vx, q8.shape[2] // k8.shape[2], 2)[0])  # (keys, heads_q, dim): each query head's KV head
    seen_max, seen_min = np.maximum.accumulate(v, 0), np.minimum.accumulate(v, 0)  # causal, seqlen_q = seqlen_k
    o = _host64(out)[0]
    slack = 2.0**-8 * np.maximum(np.abs(seen_max), np.abs(seen_min))
    outside = (o > seen_max + slack) | (o < seen_min - slack)
    assert not outside.any(), f"seed {seed}: {int(outside.sum())} outputs outside the range of the V rows they see"


@pytest.mark.parametrize("causal", [True, False])
def test_fp8_float16_scores_codes_bit_exact(causal):
    """scores="fp16": the kernel's e4m3 probability codes equal fp8.expfree_codes(encoder="f16-scores")'s bit for
    bit, on one KV tile of the problem in probability_codes.py with q's magnitudes within the bound (1.125) and a
    softmax scale of 4, so that the scores still span every code."""
    seed, seq, heads = _seed(), 128, 4
    q_codes, k_codes, v_codes = probability_codes.inputs(np.random.default_rng(seed), seq, heads, q_max=1.125)
    softmax_scale = 4.0
    q8, k8, v8 = (ga.to_device(c.view(ga.E4M3)) for c in (q_codes, k_codes, v_codes))
    out = _poisoned(1, seq, heads, 128)
    fp.attention(q8, k8, v8, causal=causal, softmax_scale=softmax_scale, out=out, scores="fp16")
    ga.synchronize()
    out = ga.to_float(ga.to_host(out))
    assert not np.isnan(out).any(), f"seed {seed}: unwritten output elements"
    scale_log2 = float(np.float32(softmax_scale) * np.float32(fp8.LOG2_E))
    probability_codes.check(out, q_codes, k_codes, causal, scale_log2, seed, encoder="f16-scores")


def _sampled_reference(q, k, v, rows, round_p=None):
    """Causal float64 attention (on the GPU) of the query rows `rows` only; q, k, v float64 (1, seq, heads,
    dim). round_p: "e4m3" or "float16", what to round P to at 2^8 times the row max, and the output to bf16: the
    fp8 kernels' floor."""
    rep = q.shape[2] // k.shape[2]
    k, v = cp.repeat(k, rep, 2)[0], cp.repeat(v, rep, 2)[0]
    s = cp.einsum("qhd,khd->hqk", q[0, rows], k) / math.sqrt(q.shape[-1])
    keys = cp.arange(k.shape[0])
    s = cp.where(keys[None, None, :] > (rows + k.shape[0] - q.shape[1])[None, :, None], -cp.inf, s)
    p = cp.exp(s - s.max(-1, keepdims=True)) * 256
    pv = p if round_p is None else _round_p(p, round_p)
    out = cp.einsum("hqk,khd->qhd", pv, v) / p.sum(-1).T[..., None]
    return out if round_p is None else ga.to_f64(ga.to_bf16(out))


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp8-p16"])
def test_long_sequence_128k(dtype):
    """131072 tokens, one head, causal: 64 sampled rows of the second half (the last among them), each
    averaging over 64k+ keys, against float64, with the bound of the short tests (SDPA bf16 on the same rows;
    the P-and-output rounding floor for fp8). Early rows are left out: their large outputs would dominate the
    relative L2 and hide errors that grow with the number of keys."""
    seed, seq = _seed(), 131072
    q, k, v = _inputs((1, seq, seq, 1, 1), 128, seed)
    rows = cp.concatenate([cp.array([seq - 1]), ga.randint(seq // 2, seq, (63,), seed)])
    out = _poisoned(1, seq, 1, 128)
    if dtype == "bf16":
        q, k, v = (ga.to_bf16(x) for x in (q, k, v))
        fp.attention(q, k, v, out=out)
        ref = _sampled_reference(ga.to_f64(q), ga.to_f64(k), ga.to_f64(v), rows)
    else:
        (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = (_quantize(x, False, 1) for x in (q, k, v))
        p16 = dtype == "fp8-p16"
        fp.attention(q8, k8, v8, out=out, q_descale=qd, k_descale=kd, v_descale=vd,
                     probabilities="fp16" if p16 else "default", scores="fp32")
        ref = _sampled_reference(qx, kx, vx, rows)
        floor = _sampled_reference(qx, kx, vx, rows, round_p="float16" if p16 else "e4m3")
        bound = 1.5 * _rel_l2(floor, ref)
    ga.synchronize()
    assert ga.all_finite(out), f"seed {seed}: unwritten or non-finite output elements"
    err = _rel_l2(_take_rows(out, rows), ref)
    if dtype == "bf16":  # the peer last: it skips where torch is missing
        bound = 1.5 * _rel_l2(_sdpa_bf16(q, k, v, True)[0, cp.asnumpy(rows)], ref)
    assert err <= bound, f"seed {seed}: relative L2 {err:.3e} > bound {bound:.3e}"


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_probability_codes_bit_exact(causal):
    """The kernel's e4m3 probability codes equal fp8.expfree_codes(encoder="f16")'s bit for bit, on one KV tile
    (128 keys) of the problem in probability_codes.py."""
    seed, seq, heads = _seed(), 128, 4
    q_codes, k_codes, v_codes = probability_codes.inputs(np.random.default_rng(seed), seq, heads)
    softmax_scale = 0.25
    q8, k8, v8 = (ga.to_device(c.view(ga.E4M3)) for c in (q_codes, k_codes, v_codes))
    out = _poisoned(1, seq, heads, 128)
    fp.attention(q8, k8, v8, causal=causal, softmax_scale=softmax_scale, out=out, scores="fp32")
    ga.synchronize()
    out = ga.to_float(ga.to_host(out))
    assert not np.isnan(out).any(), f"seed {seed}: unwritten output elements"
    # the kernel's score scale: f32(scale) * f32(log2 e)
    scale_log2 = float(np.float32(softmax_scale) * np.float32(fp8.LOG2_E))
    probability_codes.check(out, q_codes, k_codes, causal, scale_log2, seed)


@pytest.mark.parametrize("pipeline", ["fp32_scores", "quantize_qkv_defaults"])
def test_fp8_long_flat_attention(pipeline):
    """131072 keys of near-uniform scores (q, k at 1/16 scale): every row averages tens of thousands of values
    of v. The error of sampled rows must stay within 2x that of the same rows' statistics at 4096 tokens. Inputs
    with FA3-style factors and float32 scores, or the defaults of quantize_qkv (on Hopper: float16 scores, v
    prepared) against the float64 attention of its dequantized q, k, v."""
    seed = _seed()

    def sampled_error(seq, seed):
        q, k, v = _inputs((1, seq, seq, 1, 1), 128, seed)
        q, k = q / 16, k / 16
        out = _poisoned(1, seq, 1, 128)
        if pipeline == "fp32_scores":
            (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = (_quantize(x, False, 1) for x in (q, k, v))
            fp.attention(q8, k8, v8, out=out, q_descale=qd, k_descale=kd, v_descale=vd, scores="fp32")
        else:
            prepared = fp.quantize_qkv(q, k, v, rotate=False)
            assert prepared["scores"] == "fp16" and isinstance(prepared["v"], fp.PreparedV)
            fp.attention(**prepared, out=out)
            qx, kx, vx = (_dequantized(prepared, name) for name in "qkv")
        ga.synchronize()
        assert ga.all_finite(out), f"seed {seed}, {seq} tokens: unwritten or non-finite output elements"
        rows = cp.concatenate([cp.array([seq - 1]), ga.randint(seq // 2, seq, (63,), seed)])
        return _rel_l2(_take_rows(out, rows), _sampled_reference(qx, kx, vx, rows))

    short, long = sampled_error(4096, seed), sampled_error(131072, seed + 3)
    assert long <= 2 * short, f"seed {seed}: relative L2 {long:.3e} at 131072 tokens, {short:.3e} at 4096"


def _dequantized(prepared, name):
    """float64 (batch, seq, heads, dim) of quantize_qkv's `name` from its codes and BlockScales."""
    codes = prepared[name]
    if isinstance(codes, fp.PreparedV):  # (batch, heads, dim, positions) back to (batch, seq, heads, dim)
        keys = cp.asarray(prepared_v.key_position(np.arange(codes.seqlen)))
        codes = ga.bits(codes.data)[..., keys].transpose(0, 3, 1, 2)
    values = fp8.dequantize_blocks(cp.asnumpy(ga.bits(codes)), cp.asnumpy(prepared[f"{name}_descale"].exponents),
                                   prepared[f"{name}_descale"].block_tokens)
    return cp.asarray(values)


@pytest.mark.parametrize("pitch", [0, 1040], ids=["rows_of_positions", "pitch_1040"])
def test_prepare_v_layout_bit_exact(pitch):
    """flashprefill_prepare_v against its numpy model (prepared_v.prepare_v_model), every byte: random codes of a
    strided v (a slice of a packed tensor; 1000 keys, not a multiple of 16), the padding positions 0, and with a
    row pitch beyond the positions only the positions written (the rest keeps its poison)."""
    seed = _seed()
    packed = ga.randint(0, 256, (2, 1000, 3, 2, 128), seed).astype(cp.uint8)
    packed[packed == 0x7F] = 0x7E  # no NaN codes: compared as bytes anyway, but kept finite as the ABI asks
    packed[packed == 0xFF] = 0xFE
    v = packed[:, :, :, 1].view(ga.E4M3)
    positions = prepared_v.positions(1000)
    out = rows = None
    if pitch:
        rows = ga.full((2, 3, 128, pitch), 0x55, np.uint8)
        out = rows[..., :positions].view(ga.E4M3)
    prepared = fp.prepare_v(v, out=out)
    ga.synchronize()
    model = prepared_v.prepare_v_model(cp.asnumpy(ga.bits(v)))
    got = ga.bits(ga.to_host(prepared.data))
    assert prepared.seqlen == 1000 and got.shape == model.shape
    assert np.array_equal(got, model), f"seed {seed}: {np.count_nonzero(got != model)} bytes differ"
    if pitch:
        assert (rows[..., positions:] == 0x55).all(), "prepare_v wrote past the positions of a row"


# Both tile sizes (blocks of 128 tokens take the 128-key kernels), float32 and float16 scores in each.
PREPARED_V_CASES = [("per_head", "fp32"), ("per_block128", "fp32"), ("per_block384", "fp32"), ("per_head", "fp16"),
                    ("per_block128", "fp16"), ("per_block384", "fp16")]


@shapes.over_attention_dims
@pytest.mark.parametrize("descales, scores", PREPARED_V_CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(SHAPES)
def test_prepared_v_gives_the_same_output(shape, causal, descales, scores, dims):
    """v prepared (prepare_v) and loaded as V^T by TMA: the output is bit-identical to v's, whose error test_fp8 and
    test_fp8_float16_scores bound, into poisoned outputs (every element written) at every shape (seqlen_k 1, 17,
    1000: rows padded within a group of 16 and past the last tile)."""
    seed = _seed()
    problem = _fp8_problem(shape, dims, descales, seed)
    if scores == "fp16":
        problem = _small_q(problem, dims, shape[4])
    (q8, qd, _), (k8, kd, _), (v8, vd, _) = problem
    outs = []
    for v in (v8, fp.prepare_v(v8)):
        out = _poisoned(shape[0], shape[1], shape[3], dims[1])
        fp.attention(q8, k8, v, causal=causal, q_descale=qd, k_descale=kd, v_descale=vd, out=out, scores=scores)
        outs.append(out)
    ga.synchronize()
    assert ga.all_finite(outs[1]), f"seed {seed}: unwritten or non-finite output elements"
    assert ga.equal(outs[0], outs[1]), \
        f"seed {seed}: {int((ga.bits(outs[0]) != ga.bits(outs[1])).sum())} elements differ from v's in the default layout"


def test_quantize_qkv_prepared_v():
    """quantize_qkv(v_layout="prepared") gives v as a PreparedV of the same codes, and attention the same output."""
    seed = _seed()
    q, k, v = _inputs((1, 300, 300, 4, 2), 128, seed)
    outs = []
    for layout in ("default", "prepared"):
        prepared = fp.quantize_qkv(q, k, v, per_block=128, v_layout=layout)
        outs.append(fp.attention(**prepared, causal=True))
    assert isinstance(prepared["v"], fp.PreparedV)
    ga.synchronize()
    assert ga.equal(outs[0], outs[1]), f"seed {seed}: prepared v changed the output"


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp8-p16"])
@shapes.over_attention_dims
def test_determinism(dtype, dims):
    """Two calls on the same inputs agree bit for bit (every dim pair, both precisions, fp8 with e4m3 or float16
    probabilities; fp8 with block scales)."""
    seed = _seed()
    q, k, v = _inputs((2, 333, 333, 8, 2), dims, seed)
    if dtype == "bf16":
        q, k, v = (ga.to_bf16(x) for x in (q, k, v))
        kwargs = {}
    else:
        (q, qd, _), (k, kd, _), (v, vd, _) = (_quantize_blocks(x, 128) for x in (q, k, v))
        kwargs = dict(q_descale=qd, k_descale=kd, v_descale=vd,
                      probabilities="fp16" if dtype == "fp8-p16" else "default")
    first, second = (fp.attention(q, k, v, **kwargs) for _ in range(2))
    ga.synchronize()
    assert ga.all_finite(first) and ga.equal(first, second), f"seed {seed}: repeated calls differ"


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp8-p16"])
@shapes.over_attention_dims
@pytest.mark.parametrize("batch,seq", [(2, 8192), (8, 2048)], ids=["8k_b2", "2k_b8"])
def test_l2_sections_leave_results_unchanged(batch, seq, dtype, dims):
    """Where K and V outgrow L2 the work items run in sections of heads (cuda/fwd/work_order.cuh; from 16 m-blocks on):
    the output, poisoned first, equals bit for bit that of one call per (batch, head), which has a single section."""
    seed = _seed()
    heads = 16
    q, k, v = _inputs((batch, seq, seq, heads, heads), dims, seed)
    if dtype == "bf16":
        q, k, v = (ga.to_bf16(x) for x in (q, k, v))
        descales = [{}] * 3
    else:
        (q, qd, _), (k, kd, _), (v, vd, _) = (_quantize(x, False, heads) for x in (q, k, v))
        descales = [{"q_descale": qd}, {"k_descale": kd}, {"v_descale": vd}]
    kwargs = {key: value for d in descales for key, value in d.items()}
    if dtype == "fp8-p16":
        kwargs["probabilities"] = "fp16"
    kv_bytes = batch * heads * seq * sum(dims) * k.dtype.itemsize
    assert kv_bytes > 0.4 * cp.cuda.runtime.getDeviceProperties(0)["l2CacheSize"], "the problem must outgrow L2"
    out = _poisoned(batch, seq, heads, dims[1])
    fp.attention(q, k, v, out=out, **kwargs)
    parts = cp.empty(out.shape, cp.uint16).view(ga.BF16)
    for b in range(batch):
        for h in range(heads):
            one = (slice(b, b + 1), slice(None), slice(h, h + 1))
            fp.attention(q[one], k[one], v[one], out=parts[one], **kwargs)
    ga.synchronize()
    assert ga.all_finite(out), f"seed {seed}: unwritten or non-finite output elements"
    assert ga.equal(out, parts), f"seed {seed}: the sectioned call differs from per-head calls"


def test_packed_qkv_strides_and_determinism():
    """q, k, v as views into one (batch, seq, heads_q + 2 heads_kv, dim) buffer; two calls agree bit for bit."""
    seed = _seed()
    batch, seq, hq, hkv, dim = 2, 333, 8, 2, 128
    qkv = ga.to_bf16(_randn((batch, seq, hq + 2 * hkv, dim), seed))
    q, k, v = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
    first = fp.attention(q, k, v)
    second = fp.attention(q, k, v)
    ga.synchronize()
    assert ga.equal(first, second), f"seed {seed}: repeated calls differ"
    ref = reference.attention_reference(*(_host64(x) for x in (q, k, v)), causal=True)
    err = _rel_l2(first, ref)
    peer = _rel_l2(_sdpa_bf16(q, k, v, True), ref)
    assert err <= 1.5 * peer, f"seed {seed}: {_report(first, ref)}"
