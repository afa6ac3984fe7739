"""A bf16 q against fp8 k and v in the gfx950 fp8 kernel (fwd_fp8_hd128 with karg_q_bf16:
asm/gfx950/fwd_q_from_bf16.inc), run in the functional emulator on the varlen sequences of
tests/test_gfx950_varlen_emulated.py (lengths that are no multiple of a wave's 32 rows or a workgroup's 256, no
queries, no keys, more queries than keys), packed and on a paged cache (k and v with per-head factors, or per-page
exponents). The kernel rounds each wave's 32 rows itself, rotated first where signs are given; q_codes_model is what
it computes: y = prepare.transform(x, signs) (or x), per wave of 32 rows from the sequence's first (the last rows
clamped into it) and head e = max(-126, the smallest integer with max |y| <= 448 2^e over the finite |y|), codes =
e4m3(y / 2^e). q, k and v are drawn as the Hopper test's (channels of uneven size in q and k), q with one outlier row
(2^10 times the others) in one wave, so that the waves' exponents differ (a model of one exponent per 64 rows fails);
rows outside the sequences are NaN (the kernel must not read them).

Every sequence: out and lse against the numpy model of the fp8 pipeline on those codes (fp8_verdicts, lse_verdict:
within the bf16 rounding of the output), and against float64 attention of the values the kernel used within the
Hopper bf16-q test's bound (tests/test_varlen_bf16q_gpu.py: 1.5x the rounding floor of P and the output). out and
lse poisoned, every element of the sequences written, the rows past them untouched; the input seed is the
emulator's schedule seed."""
import ml_dtypes
import numpy as np
import pytest

import markers
import varlen_cases as vc
from flashprefill import fp8, prepare, reference
from test_gfx950_kernel_emulated import ROOT
from test_gfx950_paged_emulated import _block_table, _page_exponents, _paged
from test_gfx950_varlen_emulated import (BLOCK_TOKENS, DIM_V, HEADS_KV, HEADS_Q, PAD_ROWS, RNG, SEQUENCES,
                                         _check_untouched, _layout, _rows, _run, _sequence_reference)
from gfx950_bounds import fp8_verdicts, lse_verdict  # tools/, on sys.path from there

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
DIM = 128
WAVE_ROWS = 32          # a wave's queries: one exponent per wave and head
OUTLIER = (4, 100, 1024)  # (sequence, row, factor): in the fourth wave of sequence 4's first workgroup
MIN_EXPONENT = -126
BOUND_OVER_FLOOR = 1.5  # tests/test_varlen_bf16q_gpu.py's


def _bf16_q(rng, cu_q):
    """bf16 (total_q + PAD_ROWS, HEADS_Q, DIM): N(0, 1) times channel sizes 2^U(-2, 2) (the Hopper test's q), one
    outlier row; NaN outside the sequences."""
    x = np.full((int(cu_q[-1]) + PAD_ROWS, HEADS_Q, DIM), np.nan)
    channels = np.exp2(rng.uniform(-2, 2, DIM))
    for b, (sq, _) in enumerate(SEQUENCES):
        x[_rows(cu_q, b, sq)] = rng.standard_normal((sq, HEADS_Q, DIM)) * channels
    b, row, factor = OUTLIER
    x[cu_q[b] + row] *= factor
    return x.astype(ml_dtypes.bfloat16)


def q_codes_model(q, cu_q, signs):
    """The codes (uint8, q's shape) and q's descale 2^e (float64 (rows, heads)) the kernel makes of the bf16 q."""
    x = q.astype(np.float32)
    with np.errstate(invalid="ignore"):  # inf - inf, 0 inf: NaN, as in the kernel
        y = prepare.transform(x[None], signs)[0] if signs is not None else x
    codes = np.full(q.shape, 0x7F, np.uint8)
    scales = np.ones(q.shape[:2])
    for b, (sq, _) in enumerate(SEQUENCES):
        for first in range(0, sq, WAVE_ROWS):
            rows = slice(int(cu_q[b]) + first, int(cu_q[b]) + min(first + WAVE_ROWS, sq))
            magnitude = np.abs(y[rows])
            amax = np.where(np.isfinite(magnitude), magnitude, 0).max(axis=(0, 2))  # per head
            fraction, power = np.frexp(amax.astype(np.float64))
            e = np.where(amax > 0, power - 9 + (fraction > 0.875), MIN_EXPONENT)  # 448 = 0.875 2^9
            e = np.maximum(e, MIN_EXPONENT)
            with np.errstate(invalid="ignore"):
                codes[rows] = fp8.e4m3_encode(y[rows] * np.exp2(-e).astype(np.float32)[None, :, None])
            scales[rows] = np.exp2(e)[None, :]
    return codes, scales


def _check_sequences(seed, out_bits, lse, cu_q, q_codes, q_scales, k, v, causal, planted=None):
    """Every sequence against the fp8 model and float64 attention of the values the kernel used; k, v: (codes packed
    by cu_k, the model's descale of sequence b: scales(b, seqlen), float64 values, cu_k). planted: None, or bool
    (rows, heads) of the q rows holding inf or NaN, whose out and lse must be NaN (the NaN rule), the others checked as
    above."""
    (k8, k_scales, kx, cu_k), (v8, v_scales, vx, _) = k, v
    end = int(cu_q[-1])
    keep = np.ones((end, HEADS_Q), bool) if planted is None else ~planted[:end]
    if planted is not None:
        out_rows = out_bits[:end].view(ml_dtypes.bfloat16).astype(np.float64)
        assert np.isnan(out_rows[~keep]).all(), f"seed {seed}: a row of inf or NaN q not NaN"
        assert not np.isfinite(lse[:, :end].T[~keep]).any(), f"seed {seed}: lse of a row of inf or NaN q finite"
        out_bits, lse = out_bits.copy(), lse.copy()
        out_bits[:end][~keep], lse[:, :end].T[~keep] = 0, 0  # stand-ins, left out below
    out = _check_untouched(seed, out_bits, lse, cu_q)
    q_used = fp8.e4m3_decode(q_codes).astype(np.float64) * q_scales[..., None]
    for b, (sq, sk) in enumerate(SEQUENCES):
        if sq == 0:
            continue  # no row of out or lse is the sequence's
        rows_q, rows_k = _rows(cu_q, b, sq), _rows(cu_k, b, sk)
        kept = keep[rows_q]
        ref, _ = _sequence_reference(q_used[rows_q], kx[rows_k], vx[rows_k], causal)
        model, model_lse = fp8.attention_fp8_model(q_codes[rows_q][None], k8[rows_k][None], v8[rows_k][None],
                                                   q_scales[rows_q][None], k_scales(b, sk), v_scales(b, sk),
                                                   causal=causal,
                                                   kv_tile=64, return_lse=True)
        verdict = lse_verdict(lse[:, rows_q].T[kept], model_lse[0].T[kept])
        assert verdict.ok, f"seed {seed}: sequence {b}: {verdict.detail}"
        for verdict in fp8_verdicts(out[rows_q][kept], model[0][kept], ref[kept]):
            assert verdict.ok, f"seed {seed}: sequence {b}: {verdict.detail}"
        if sk == 0:
            assert (out[rows_q] == 0).all(), f"seed {seed}: sequence {b} sees no key: out 0"
            continue
        floor = vc.p_rounding_floor(q_used[rows_q], kx[rows_k], vx[rows_k], causal)
        floor = reference.relative_l2(floor[kept], ref[kept])
        error = reference.relative_l2(out[rows_q][kept], ref[kept])
        assert error <= BOUND_OVER_FLOOR * floor, \
            f"seed {seed}: sequence {b}: {error:.3e} > {BOUND_OVER_FLOOR}x the rounding floor {floor:.3e}"


def _fp8(rng, cu_k, channels, per_block=False):
    """e4m3 codes packed by cu_k (NaN codes outside the sequences' keys) of N(0, 1) times `channels`, their descale
    (float32 factors (batch, HEADS_KV), or per_block int8 exponents (batch, HEADS_KV, blocks of BLOCK_TOKENS from
    each sequence's first key)), the model's descale of sequence b (scales(b, seqlen)) and the float64 values."""
    codes = np.full((int(cu_k[-1]) + PAD_ROWS, HEADS_KV, len(channels)), 0x7F, np.uint8)
    values = np.full(codes.shape, np.nan)
    factors = np.ones((len(SEQUENCES), HEADS_KV), np.float32)
    exponents = np.zeros((len(SEQUENCES), HEADS_KV, -(-max(sk for _, sk in SEQUENCES) // BLOCK_TOKENS)), np.int8)
    for b, (_, sk) in enumerate(SEQUENCES):
        if sk == 0:
            continue
        x = rng.standard_normal((sk, HEADS_KV, len(channels))) * channels
        rows = _rows(cu_k, b, sk)
        if per_block:
            c, e = fp8.quantize_blocks(x[None], BLOCK_TOKENS)
            codes[rows], exponents[b, :, :e.shape[2]] = c[0], e[0]
            values[rows] = fp8.dequantize_blocks(c, e, BLOCK_TOKENS)[0]
        else:
            factors[b] = np.abs(x).max(axis=(0, 2)) / fp8.E4M3_MAX
            codes[rows] = fp8.e4m3_encode(x / factors[b][None, :, None])
            values[rows] = fp8.e4m3_decode(codes[rows]) * factors[b][None, :, None]
    if per_block:
        return codes, exponents, lambda b, n: fp8.block_scales(exponents[b:b + 1], n, BLOCK_TOKENS), values
    return codes, factors, lambda b, n: factors[b:b + 1], values


def _kv(rng, cu_k, per_block=False):
    """fp8 k (channel sizes 2^U(-2, 2)) and v (N(0, 1)) as the Hopper test's: _fp8's (codes, descale, scales, values)
    each."""
    return (_fp8(rng, cu_k, np.exp2(rng.uniform(-2, 2, DIM)), per_block),
            _fp8(rng, cu_k, np.ones(DIM_V), per_block))


def _causal_varlen(rng, seed, q, cu_q, cu_k, rotate, planted=None):
    """q (bf16) against fp8 k and v (_kv) by cu_seqlens_k, causal, rotated or not: run after the check of the arrays
    and held to the model (planted: the rows holding an inf or NaN)."""
    signs = np.where(rng.random(DIM) < 0.5, -1.0, 1.0).astype(np.float32) if rotate else None
    (k8, kd, k_scales, kx), (v8, vd, v_scales, vx) = _kv(rng, cu_k)
    out_bits, lse = _run("fwd_fp8_hd128", q, *(x.view(ml_dtypes.float8_e4m3fn) for x in (k8, v8)), cu_q, cu_k, None,
                         True, seed, descales=(None, kd, vd), root=ROOT, q_signs=signs)
    q_codes, q_scales = q_codes_model(q, cu_q, signs)
    _check_sequences(seed, out_bits, lse, cu_q, q_codes, q_scales, (k8, k_scales, kx, cu_k), (v8, v_scales, vx, cu_k),
                     True, planted)


@pytest.mark.parametrize("rotate", [False, True], ids=["plain", "rotated"])
def test_bf16_q_varlen(rotate):
    """Causal, keys by cu_seqlens_k; q's codes with and without the rotation."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    cu_q, cu_k, _ = _layout(False)
    q = _bf16_q(rng, cu_q)
    _causal_varlen(rng, seed, q, cu_q, cu_k, rotate)


@pytest.mark.parametrize("page_size, descale", [(16, "per_head"), (BLOCK_TOKENS, "per_block")])
def test_bf16_q_paged(page_size, descale):
    """Full attention on a paged cache (tests/test_gfx950_paged_emulated.py's), q rotated; k and v with factors per
    (sequence, kv head) on pages of 16 tokens, or with exponents one per page of 64 (an engine's fp8 cache)."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    cu_q, cu_k, _ = _layout(False)
    seqused_k = np.array([sk for _, sk in SEQUENCES], np.int32)
    table, pages = _block_table(rng, page_size)
    q = _bf16_q(rng, cu_q)
    signs = np.where(rng.random(DIM) < 0.5, -1.0, 1.0).astype(np.float32)
    per_block = descale == "per_block"
    (k8, kd, k_scales, kx), (v8, vd, v_scales, vx) = _kv(rng, cu_k, per_block)
    k_cache, v_cache = (_paged(x, cu_k, table, page_size, pages, 0x7F, pad) for x, pad in ((k8, 0), (v8, 1)))
    descales = dict(blocks=(None, *(_page_exponents(e, table, pages) for e in (kd, vd)))) if per_block else \
        dict(descales=(None, kd, vd))
    out_bits, lse = _run("fwd_fp8_hd128", q, *(x.view(ml_dtypes.float8_e4m3fn) for x in (k_cache, v_cache)), cu_q,
                         None, seqused_k, False, seed, pages=(table, page_size), root=ROOT, q_signs=signs, **descales)
    q_codes, q_scales = q_codes_model(q, cu_q, signs)
    _check_sequences(seed, out_bits, lse, cu_q, q_codes, q_scales, (k8, k_scales, kx, cu_k),
                     (v8, v_scales, vx, cu_k), False)


@pytest.mark.parametrize("rotate", [False, True], ids=["plain", "rotated"])
def test_bf16_q_inf_and_nan(rotate):
    """An inf and a (signaling) NaN in q, in the outlier's wave and another: their rows' out and lse NaN (rotated, the
    inf reaches every dim of its row); the other rows of those waves rounded at the largest finite |y| (the model's),
    as every other row."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    cu_q, cu_k, _ = _layout(False)
    q = _bf16_q(rng, cu_q)
    planted = np.zeros(q.shape[:2], bool)
    for row, head, dim, bits in ((cu_q[4] + 110, 0, 5, 0x7F80), (cu_q[4] + 20, 1, 77, 0x7F81)):  # inf, sNaN
        q[row, head, dim] = np.uint16(bits).view(ml_dtypes.bfloat16)
        planted[row, head] = True
    _causal_varlen(rng, seed, q, cu_q, cu_k, rotate, planted)
