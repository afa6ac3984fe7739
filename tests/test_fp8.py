"""The FP8 numerics model: e4m3 codec against ml_dtypes, quantizers, the exact FFMA, the exp-free encoder and
the kernel pipeline emulation against float64 attention."""
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from flashprefill import fp8
from flashprefill.reference import attention_reference, error_report, relative_l2


def ml_dtypes_codes(x):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x, np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def half_step(y):
    """Half the e4m3 spacing at |y| (<= 448): 2^(floor(log2|y|) - 4) in normal binades, 2^-10 below 2^-6."""
    return np.ldexp(1.0, np.floor(np.log2(np.maximum(np.abs(y), 2.0**-6))).astype(int) - 4)


# e4m3 codec

def test_decode_all_codes_match_ml_dtypes():
    codes = np.arange(256, dtype=np.uint8)
    want = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    got = fp8.e4m3_decode(codes)
    assert got.dtype == np.float32
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isnan(got[[0x7F, 0xFF]]).all() and np.isfinite(np.delete(got, [0x7F, 0xFF])).all()
    assert got[0x7E] == 448 and got[0x01] == 2.0**-9


@pytest.mark.parametrize("exponent_range", ["all_float32", "e4m3_range"])
def test_encode_matches_ml_dtypes_on_random_values(rng_seed, exponent_range):
    rng, seed = rng_seed
    n = 1 << 22
    if exponent_range == "all_float32":  # every bit pattern: NaN, inf, float32 subnormals, huge values
        bits = rng.integers(0, 2**32, n, dtype=np.uint32)
    else:  # |x| in [2^-27, 2^12): e4m3 subnormals, normals, overflow, and values rounding to zero
        exponent_field = rng.integers(100, 139, n).astype(np.uint32)
        bits = (rng.integers(0, 2, n).astype(np.uint32) << 31) | (exponent_field << 23)
        bits |= rng.integers(0, 1 << 23, n).astype(np.uint32)
    x = bits.view(np.float32)
    got, want = fp8.e4m3_encode(x), ml_dtypes_codes(x)
    in_range = np.abs(x) < 464  # beyond, ml_dtypes gives NaN where our rule saturates (tested below)
    bad = np.flatnonzero(in_range & (got != want))
    assert bad.size == 0, f"seed={seed}: {bad.size} mismatches, first x={x[bad[0]]!r} got {got[bad[0]]:#x} want {want[bad[0]]:#x}"
    assert np.all(got[np.isnan(x)] == 0x7F), f"seed={seed}"
    overflow = ~in_range & ~np.isnan(x)
    assert np.all(got[overflow] == (0x7E | (np.signbit(x[overflow]).astype(np.uint8) << 7))), f"seed={seed}"


def test_encode_halfway_cases_and_neighbours():
    values = fp8.e4m3_decode(np.arange(0x7F, dtype=np.uint8)).astype(np.float64)  # 0 .. 448
    midpoints = (values[:-1] + values[1:]) / 2
    x = np.concatenate([midpoints, values]).astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(0))])
    x = np.concatenate([x, -x, np.float32([2.0**-10, 3 * 2.0**-11, 2.0**-149, 2.0**-126, 463.99, 464.0])])
    got, want = fp8.e4m3_encode(x), ml_dtypes_codes(x)
    assert np.array_equal(got, want), f"first mismatch at x={x[np.argmax(got != want)]!r}"
    # ties go to the even code: 2^-10 (halfway 0 .. 2^-9) -> +0, 1.5·2^-9 -> 2·2^-9, 464 -> 448
    assert list(fp8.e4m3_encode(np.float32([2.0**-10, 1.5 * 2.0**-9, 464, -0.0]))) == [0x00, 0x02, 0x7E, 0x80]


def test_encode_saturation_rule():
    beyond = np.float32([448.5, 463.99, 464, 465, 480, 1e6, 3.4e38, np.inf])
    assert np.all(fp8.e4m3_encode(beyond) == 0x7E)
    assert np.all(fp8.e4m3_encode(-beyond) == 0xFE)
    assert np.all(fp8.e4m3_encode(np.float32([np.nan, -np.nan])) == 0x7F)


def test_encode_decode_round_trip():
    codes = np.delete(np.arange(256, dtype=np.uint8), [0x7F, 0xFF])
    assert np.array_equal(fp8.e4m3_encode(fp8.e4m3_decode(codes)), codes)


# Quantizers

def test_quantize_blocks_error_and_minimal_exponent(rng_seed):
    rng, seed = rng_seed
    batch, seqlen, heads, dim, block_tokens = 2, 300, 3, 64, 128  # last block 44 tokens
    x = rng.standard_normal((batch, seqlen, heads, dim)).astype(np.float32)
    token_scale = np.ldexp(1.0, rng.integers(-30, 30, (batch, 3, heads)))[:, np.arange(seqlen) // block_tokens]
    x = (x * token_scale[..., None]).astype(np.float32)
    codes, exponents = fp8.quantize_blocks(x, block_tokens)
    assert codes.shape == x.shape and codes.dtype == np.uint8
    assert exponents.shape == (batch, heads, 3) and exponents.dtype == np.int8
    scales = fp8.block_scales(exponents, seqlen, block_tokens)[..., None]
    scaled = x / scales
    error = np.abs(fp8.dequantize_blocks(codes, exponents, block_tokens) - x)
    assert np.all(error <= half_step(scaled) * scales), f"seed={seed} worst {np.max(error / (half_step(scaled) * scales))}"
    for block in range(3):
        tokens = slice(block * block_tokens, (block + 1) * block_tokens)
        amax = np.abs(x[:, tokens]).max(axis=(1, 3))
        e = exponents[:, :, block].astype(int)
        assert np.all(amax <= 448 * np.ldexp(1.0, e)) and np.all(amax > 448 * np.ldexp(1.0, e - 1)), f"seed={seed}"
        top = np.abs(fp8.e4m3_decode(codes[:, tokens])).max(axis=(1, 3))
        assert np.all(top >= 224), f"seed={seed} block {block}: top code value {top.min()}"


def test_quantize_blocks_exponent_span(rng_seed):
    """A block far below its head's largest is quantized at the span's floor; zero blocks take the head's
    largest exponent; other heads are unaffected."""
    rng, seed = rng_seed
    x = rng.standard_normal((1, 16, 2, 8)).astype(np.float32)
    x[0, 4:8, 0] *= np.float32(2.0**-80)  # head 0, block 1: 80 binades down
    x[0, 8:12, 0] = 0                       # head 0, block 2: zero
    codes, exponents = fp8.quantize_blocks(x, block_tokens=4)
    natural = fp8.quantize_blocks(x[:, :, 1:], block_tokens=4)[1]
    top = int(exponents[0, 0].max())
    assert exponents[0, 0, 1] == top - fp8.EXPONENT_SPAN and exponents[0, 0, 2] == top, f"seed={seed}"
    np.testing.assert_array_equal(exponents[0, 1], natural[0, 0])
    # the raised block loses nothing above 2^-55 of the head's largest value
    error = np.abs(fp8.dequantize_blocks(codes, exponents, 4) - x)[0, 4:8, 0]
    assert error.max() <= np.ldexp(448.0, top - fp8.EXPONENT_SPAN - 10), f"seed={seed}"


def test_quantize_blocks_special_blocks():
    x = np.zeros((1, 5, 4, 8), np.float32)
    x[0, :, 1] = 1e-40  # float32 subnormal: exponent clamps to -127
    x[0, 0, 2, 0] = np.inf
    x[0, 0, 3, 0] = np.nan
    codes, exponents = fp8.quantize_blocks(x, block_tokens=4)
    assert exponents.tolist() == [[[0, 0], [-127, -127], [0, 0], [0, 0]]]
    assert np.all(codes[0, :, 0] == 0)
    assert np.allclose(fp8.dequantize_blocks(codes, exponents, 4)[0, :, 1], 1e-40, rtol=1 / 16)
    assert codes[0, 0, 2, 0] == 0x7E and codes[0, 0, 3, 0] == 0x7F


def test_quantize_blocks_normal_inputs_error_as_expected(rng_seed):
    """Codes equal ml_dtypes' rounding of x/2^e, and the relative L2 matches uniform rounding within each binade:
    E[err^2] = ulp^2/12, ulp = 2^(floor(log2|y|) - 3)."""
    rng, seed = rng_seed
    x = rng.standard_normal((1, 1000, 2, 128)).astype(np.float32)
    codes, exponents = fp8.quantize_blocks(x)
    scaled = x / fp8.block_scales(exponents, 1000, 128)[..., None]
    assert np.array_equal(codes, ml_dtypes_codes(scaled)), f"seed={seed}"
    measured = relative_l2(fp8.dequantize_blocks(codes, exponents), x)
    expected = math.sqrt(np.mean((2 * half_step(scaled)) ** 2 / 12) / np.mean(scaled.astype(np.float64) ** 2))
    assert abs(measured / expected - 1) < 0.05, f"seed={seed} measured {measured:.4e} expected {expected:.4e}"


@pytest.mark.parametrize("granularity", ["tensor", "head"])
def test_descale_quantizers(rng_seed, granularity):
    rng, seed = rng_seed
    x = (rng.standard_normal((2, 77, 3, 32)) * rng.uniform(0.01, 100, (1, 1, 3, 1))).astype(np.float32)
    if granularity == "tensor":
        codes, descale = fp8.quantize_per_tensor(x)
        assert descale.shape == () and descale == np.float32(np.abs(x).max() / np.float32(448))
        descale_full = descale
    else:
        codes, descale = fp8.quantize_per_head(x)
        assert descale.shape == (2, 3) and np.all(descale == np.abs(x).max(axis=(1, 3)) / np.float32(448))
        descale_full = descale[:, None, :, None]
    assert descale.dtype == np.float32 and codes.shape == x.shape
    decoded = fp8.e4m3_decode(codes).astype(np.float64)
    error = np.abs(decoded * descale_full - x)
    assert np.all(error <= half_step(x / descale_full) * descale_full * (1 + 1e-6)), f"seed={seed}"
    assert np.abs(decoded).max() == 448, f"seed={seed}"
    assert fp8.quantize_per_tensor(np.zeros((1, 2, 1, 4)))[1] == 1


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("granularity", ["tensor", "head"])
def test_descale_quantizers_saturate_non_finite(rng_seed, granularity, bad):
    """inf or NaN in a tensor (head) gives it descale 1, as quantize_blocks gives such a block e = 0: never a NaN or
    infinite descale; inf saturates to ±448, NaN stays the NaN code, every finite value keeps its code at scale 1
    (saturating at 448); other heads are untouched."""
    rng, seed = rng_seed
    x = (rng.standard_normal((2, 64, 3, 32)) * 1000).astype(np.float32)  # some values past 448 at scale 1
    clean_codes, clean_descale = (fp8.quantize_per_tensor if granularity == "tensor" else fp8.quantize_per_head)(x)
    x[1, 5, 2, 7] = bad
    with np.errstate(all="raise"):  # no numpy warning either
        codes, descale = (fp8.quantize_per_tensor if granularity == "tensor" else fp8.quantize_per_head)(x)
    assert np.isfinite(descale).all(), f"seed={seed}"
    hit = (slice(None),) * 4 if granularity == "tensor" else (1, slice(None), 2, slice(None))
    assert (descale if granularity == "tensor" else descale[1, 2]) == 1, f"seed={seed}"
    want = fp8.e4m3_encode(np.where(np.isfinite(x), x, 0)[hit])
    want[(~np.isfinite(x))[hit]] = (fp8.E4M3_NAN_CODE if np.isnan(bad)
                                    else fp8.E4M3_MAX_CODE | (0x80 if bad < 0 else 0))
    assert np.array_equal(codes[hit], want), f"seed={seed}"
    decoded = fp8.e4m3_decode(codes)
    assert np.isnan(decoded).sum() == (1 if np.isnan(bad) else 0), f"seed={seed}"
    if granularity == "head":
        others = np.ones((2, 3), dtype=bool)
        others[1, 2] = False
        assert np.array_equal(descale[others], clean_descale[others])
        assert np.array_equal(codes.transpose(0, 2, 1, 3)[others], clean_codes.transpose(0, 2, 1, 3)[others])


@pytest.mark.parametrize("block_tokens", [0, -64, 1.5, None])
def test_quantize_blocks_refuses_bad_block_tokens(block_tokens):
    with pytest.raises(ValueError, match="block_tokens must be an int > 0"):
        fp8.quantize_blocks(np.ones((1, 4, 1, 32)), block_tokens)


# Exact float32 FFMA

def exact_fma_f32(a, b, c):
    """a·b + c rounded once to float32 (nearest, ties to even), with exact rational arithmetic."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if exact == 0:
        return 0.0
    magnitude = abs(exact)
    power = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** power > magnitude:
        power -= 1
    significand = round(magnitude / Fraction(2) ** (power - 23))  # in [2^23, 2^24]; round() ties to even
    return math.copysign(float(significand * Fraction(2) ** (power - 23)), exact)


def test_fma_f32_is_correctly_rounded(rng_seed):
    rng, seed = rng_seed
    n = 6000
    a = np.concatenate([rng.standard_normal(n) * 30, rng.standard_normal(n) * 30,
                        rng.standard_normal(n) * np.ldexp(1.0, rng.integers(-30, 30, n))]).astype(np.float32)
    b = np.concatenate([np.full(n, 8 * 0.1275), np.full(n, 8 * 0.1275),
                        rng.standard_normal(n) * np.ldexp(1.0, rng.integers(-30, 30, n))]).astype(np.float32)
    c = np.concatenate([1.5 * 2**23 + rng.uniform(-1000, 1000, n), 1.5 * 2**15 + rng.uniform(-1000, 1000, n),
                        rng.standard_normal(n) * np.ldexp(1.0, rng.integers(-30, 30, n))]).astype(np.float32)
    # float64 sum lands on a float32 midpoint while the exact sum is 2^-47 off it: a plain cast rounds wrongly
    hard_a = np.float32([1 + 2.0**-23, -(1 + 2.0**-23)])
    hard_b = np.float32([0.5 - 2.0**-24, 0.5 - 2.0**-24])
    hard_c = np.float32([1.5 * 2**23 + 1, 1.5 * 2**23 + 1])
    naive = (hard_a.astype(np.float64) * hard_b + hard_c).astype(np.float32)
    assert list(naive) != [exact_fma_f32(*t) for t in zip(hard_a, hard_b, hard_c)]
    a, b, c = (np.concatenate([x, hard]) for x, hard in ((a, hard_a), (b, hard_b), (c, hard_c)))
    got = fp8.fma_f32(a, b, c)
    want = np.float32([exact_fma_f32(*t) for t in zip(a, b, c)])
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"seed={seed}: {bad.size} wrong, first a,b,c={a[bad[0]]!r},{b[bad[0]]!r},{c[bad[0]]!r}"


# Exp-free encoder

def expfree_relative_error(t, c, code_byte=1, encoder="magic"):
    """decode(code)/2^t - 1 for float32 log2-domain values t (scale_log2 = 1, row max 0)."""
    codes = fp8.expfree_codes(t, 1.0, np.float32(0), c=c, code_byte=code_byte, encoder=encoder)
    return fp8.expfree_decode(codes).astype(np.float64) / np.exp2(t.astype(np.float64)) - 1


def test_expfree_error_bound_on_dense_grid():
    t = np.linspace(-13.9, 0, 1_400_001, dtype=np.float32)  # codes 8 .. 120: the normal range
    for c in (0.34, 0.2, 0.5):
        worst = np.abs(expfree_relative_error(t, c)).max()
        bound = fp8.expfree_relative_error_bound(c)
        # 8 fraction bits below the code: c is rounded to 2^-8 in K and y to 2^-8, so code boundaries move by
        # <= 2^-8 steps, a relative 2^-8·ln2/8 = 3.4e-4
        assert bound - 3.4e-4 <= worst <= bound + 3.4e-4, f"c={c}: grid max {worst:.5f}, bound {bound:.5f}"
    assert fp8.expfree_relative_error_bound(0.34) < 0.0755
    # code_byte 0: the float32 K = magic + 56 - c + 64 is an integer, so c is lost (c = 0 in effect when m = 0)
    worst = np.abs(expfree_relative_error(t, 0.34, code_byte=0)).max()
    assert abs(worst - fp8.expfree_relative_error_bound(0)) < 1e-4
    # encoder "f16": float32 holds the code with 17 fraction bits, so the boundaries are exact to ~1e-5 steps
    for c in (0.34, 0.2, 0.5):
        worst = np.abs(expfree_relative_error(t, c, encoder="f16")).max()
        assert abs(worst - fp8.expfree_relative_error_bound(c)) < 1e-5, f"f16 c={c}: grid max {worst:.6f}"


def test_c_is_near_the_minimax_choice():
    candidates = np.linspace(0, 1, 2001)
    best = candidates[np.argmin([fp8.expfree_relative_error_bound(c) for c in candidates])]
    assert abs(best - 0.34) <= 0.05, f"minimax c = {best}"
    # before rounding, c centres the linear-mantissa error: c code steps scale values by about 2^(-c/8), and the
    # excess of 1 + f over 2^f peaks at f = 1/ln2 - 1, so c ≈ 4·log2(max (1+f)/2^f) = 0.344
    f = 1 / math.log(2) - 1
    assert abs(4 * math.log2((1 + f) / 2**f) - 0.34) < 0.01


@pytest.mark.parametrize("code_byte,encoder", [(0, "magic"), (1, "magic"), (None, "f16")])
def test_expfree_codes_follow_the_linear_rule(rng_seed, code_byte, encoder):
    rng, seed = rng_seed
    s = (rng.standard_normal((64, 256)) * 40).astype(np.float32)
    # two far-below-the-max scores per row, so the clamp is always exercised: one whose FMA result is positive
    # but under the magic constant, one whose result is negative
    s[:, -2], s[:, -1] = -1e4, -1e7
    scale_log2 = float(rng.uniform(0.05, 0.3))
    row_max = (s.max(axis=1) * np.float32(scale_log2)).astype(np.float32)
    codes = fp8.expfree_codes(s, scale_log2, row_max, code_byte=code_byte, encoder=encoder).astype(np.float64)
    ideal = 8 * (s * scale_log2 - row_max[:, None].astype(np.float64)) + 56 + 64 - 0.34
    # code_byte 1: K, C_row and y each round to a multiple of 2^-8 (<= 2^-9 each), then truncation after the
    # +0.5 rounds to the code (0.5). code_byte 0: K drops c (0.34), C_row rounds 8·m to an integer (0.5),
    # y rounds to the code (0.5). f16: the conversion rounds once (0.5) after float32 roundings of ~2^-17 steps.
    # 1e-3 covers f32(8·scale_log2) against the exact product.
    allowed = {1: 0.5 + 3 * 2.0**-9 + 1e-3, 0: 0.34 + 0.5 + 0.5 + 1e-3, None: 0.5 + 1e-3}[code_byte]
    assert np.abs(codes - np.maximum(ideal, 0)).max() <= allowed, f"seed={seed}"  # the clamp: no code below 0
    assert codes.max() <= 120 and codes.min() == 0, f"seed={seed}"


def test_expfree_special_inputs():
    s = np.float32([[10.0, -np.inf, 10.0 - 1.0 / 16, -200.0, 10 - 14.5]])
    codes = fp8.expfree_codes(s, 1.0, np.float32([10.0]))
    assert codes[0, 0] == 120 and codes[0, 1] == 0 and codes[0, 3] == 0  # 2^8 at the max; masked and tiny: 0
    assert fp8.expfree_decode(codes)[0, 0] == 1.0
    assert 1 <= codes[0, 4] <= 7  # "linear" keeps a subnormal code
    assert fp8.expfree_codes(s, 1.0, np.float32([10.0]), subnormal="flush")[0, 4] == 0
    codes, row_sum = fp8.expfree_probabilities(s, 1.0, np.float32([10.0]))
    assert row_sum.shape == (1,) and row_sum[0] == fp8.expfree_decode(codes).astype(np.float64).sum()
    with pytest.raises(ValueError):
        fp8.expfree_codes(s, 1.0, np.float32([10.0]), subnormal="round")
    with pytest.raises(ValueError):
        fp8.expfree_codes(s, 1.0, np.float32([10.0]), encoder="f32")


def test_expfree_f16_encoder_special_inputs():
    """The float16 encoder: the magic one's codes away from rounding ties; masked and negative codes 0; NaN
    scores give 0xff (an e4m3 NaN: cvt.rn.relu.f16x2's canonical NaN is 0x7fff)."""
    s = np.float32([[10.0, -np.inf, 10.0 - 1.0 / 16, -200.0, 10 - 14.5, np.nan]])
    codes = fp8.expfree_codes(s, 1.0, np.float32([10.0]), encoder="f16")
    assert codes[0, 0] == 120 and codes[0, 1] == 0 and codes[0, 3] == 0
    assert codes[0, 2] == fp8.expfree_codes(s, 1.0, np.float32([10.0]), encoder="magic")[0, 2]
    assert 1 <= codes[0, 4] <= 7 and codes[0, 5] == 0xFF
    assert np.isnan(fp8.expfree_decode(codes)[0, 5])
    assert fp8.expfree_codes(s, 1.0, np.float32([10.0]), subnormal="flush", encoder="f16")[0, 4] == 0


def test_expfree_f16_encoder_rounds_ties_to_even():
    """Codes exactly halfway (b = n + 0.5 in float32) go to the even neighbour, as cvt.rn does."""
    # t chosen so that 8 t + 120 - 0.34 lands on n + 0.5: with c = 0 and offset 8, b = 8 t + 120
    t = np.float32([-(120 - 40.5) / 8, -(120 - 41.5) / 8])
    codes = fp8.expfree_codes(t, 1.0, np.float32(0), c=0.0, encoder="f16")
    assert codes.ravel().tolist() == [40, 42]


def test_expfree_f16_scores_encoder(rng_seed):
    """The float16-scores encoder (Hopper's scores="fp16"): within one step of the float32 encoder's codes, and equal
    to them but where the float16 constants or the roundings move a code across a rounding boundary; masked scores
    and codes below 0 give 0; the row max gives 120 where |row max| <= 16 (log2 units), 119 or 120 beyond (the
    factor 8·scale_log2 carries 2^-11 of relative error and the row constant, past 256, a float16 unit of 0.25: at a
    row max of 16 the three roundings move y by at most 16/256 + 1/16 + 1/32 < 0.16, the room below 120 - c = 119.66);
    scores that are not float16 values are refused."""
    rng, seed = rng_seed
    s = (rng.standard_normal((64, 192)) * 300).astype(np.float16).astype(np.float32)
    s[:, -1] = -np.inf
    scale_log2 = float(np.float32(rng.uniform(0.005, 0.05)))
    row_max = (s.max(axis=1) * np.float32(scale_log2)).astype(np.float32)
    codes16 = fp8.expfree_codes(s, scale_log2, row_max, encoder="f16-scores").astype(np.int64)
    codes32 = fp8.expfree_codes(s, scale_log2, row_max, encoder="f16").astype(np.int64)
    assert np.abs(codes16 - codes32).max() <= 1, f"seed={seed}"
    assert (codes16 == codes32).mean() > 0.9, f"seed={seed}: {(codes16 == codes32).mean():.3f} of codes agree"
    top = codes16.max(axis=1)
    assert ((top == 120) | ((top == 119) & (np.abs(row_max) > 16))).all(), f"seed={seed}: {top.tolist()}"
    assert (codes16[:, -1] == 0).all(), f"seed={seed}"
    with pytest.raises(ValueError, match="float16 values"):
        fp8.expfree_codes(np.float32([[1.0 + 2.0**-12]]), scale_log2, np.float32([0.0]), encoder="f16-scores")


def test_expfree_f16_scores_rounds_ties_to_even():
    """1024 + y rounds to the even integer: y = 40.5 and 41.5 (exact float16 values) give 40 and 42."""
    t = np.float32([[-(120 - 40.5) / 8, -(120 - 41.5) / 8]])  # with c = 0, offset 8: b = 8 t + 120, exact
    codes = fp8.expfree_codes(t, 1.0, np.float32([0.0]), c=0.0, encoder="f16-scores")
    assert codes.ravel().tolist() == [40, 42]


def test_subnormal_rules_measured(rng_seed):
    """Relative L2 of P·V / rowsum(P) against exact softmax per row, for both subnormal rules, on row shapes from
    N(0, σ) scores to attention sinks over many tiny probabilities. "linear" is the default: no extra
    instruction, and its worst case is far better (sink + N(-14, 1): the flushed mass is half the row)."""
    rng, seed = rng_seed
    rows, keys = 16, 8192
    cases = {f"N(0,{sigma})": rng.standard_normal((rows, keys)) * sigma for sigma in (1, 4, 16)}
    for centre in (-12, -14):
        cases[f"sink+N({centre},1)"] = np.concatenate([np.zeros((rows, 1)), rng.standard_normal((rows, keys - 1)) + centre], 1)
    v = rng.standard_normal((keys, 64))
    worst = {}
    for name, t in cases.items():
        t = t.astype(np.float32)
        row_max = t.max(axis=1)
        p = np.exp2(t - row_max[:, None].astype(np.float64))
        want = p @ v / p.sum(axis=1, keepdims=True)
        line = []
        for rule in fp8.SUBNORMAL_RULES:
            codes, row_sum = fp8.expfree_probabilities(t, 1.0, row_max, subnormal=rule)
            error = relative_l2(fp8.expfree_decode(codes).astype(np.float64) @ v / row_sum[:, None], want)
            worst[rule] = max(worst.get(rule, 0), error)
            line.append(f"{rule} {error:.3e}")
        print(f"{name:16s}", "  ".join(line))
    assert worst["linear"] < worst["flush"], f"seed={seed} {worst}"
    assert worst["linear"] < 0.1, f"seed={seed} {worst}"


# The kernel pipeline against float64 attention

def p_rounding_attention(q, k, v, causal, softmax_scale):
    """Comparison point: exact max, P·256 rounded to e4m3 by ml_dtypes, divided by the row sum of rounded P."""
    seqlen_q, heads_q, seqlen_k, heads_kv = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    out = np.zeros(q.shape[:3] + v.shape[3:])
    visible = np.arange(seqlen_k)[None, :] <= np.arange(seqlen_q)[:, None] + seqlen_k - seqlen_q
    for b in range(q.shape[0]):
        for h in range(heads_q):
            kv = h // (heads_q // heads_kv)
            s = softmax_scale * q[b, :, h] @ k[b, :, kv].T
            s = np.where(visible | (not causal), s, -np.inf)
            p = np.exp(s - s.max(axis=1, keepdims=True)) * 256
            p = p.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
            out[b, :, h] = p @ v[b, :, kv] / p.sum(axis=1, keepdims=True)
    return out


def quantized_inputs(rng, shape_q, shape_k, shape_v, granularity):
    """N(0,1) q, k, v -> codes, descales for attention_fp8_model, and the dequantized float64 values."""
    result = []
    for shape in (shape_q, shape_k, shape_v):
        x = rng.standard_normal(shape)
        if granularity == "block":
            codes, exponents = fp8.quantize_blocks(x)
            descale = fp8.block_scales(exponents, shape[1], 128)
            result.append((codes, descale, fp8.dequantize_blocks(codes, exponents)))
        else:
            codes, descale = fp8.quantize_per_head(x)
            result.append((codes, descale, fp8.e4m3_decode(codes) * descale[:, None, :, None].astype(np.float64)))
    return result


@pytest.mark.parametrize("granularity", ["head", "block"])
def test_attention_model_error_near_p_rounding(rng_seed, granularity):
    rng, seed = rng_seed
    (qc, qd, q), (kc, kd, k), (vc, vd, v) = quantized_inputs(
        rng, (1, 512, 4, 128), (1, 512, 2, 128), (1, 512, 2, 128), granularity)
    ref, ref_lse = attention_reference(q, k, v, return_lse=True)
    out, lse = fp8.attention_fp8_model(qc, kc, vc, qd, kd, vd, return_lse=True)
    model_error = relative_l2(out, ref)
    rounding_error = relative_l2(p_rounding_attention(q, k, v, True, 128**-0.5), ref)
    print(f"kernel model {model_error:.3e}, P rounded by ml_dtypes {rounding_error:.3e}")
    assert model_error < 2 * rounding_error, f"seed={seed} {error_report(out, ref)} vs {rounding_error:.3e}"
    assert np.abs(lse - ref_lse).max() < math.log1p(fp8.expfree_relative_error_bound(0.34)), f"seed={seed}"


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (1, 300), (77, 300), (300, 300), (129, 130)])
def test_attention_model_shapes(rng_seed, seqlen_q, seqlen_k, causal):
    rng, seed = rng_seed
    (qc, qd, q), (kc, kd, k), (vc, vd, v) = quantized_inputs(
        rng, (2, seqlen_q, 4, 64), (2, seqlen_k, 2, 64), (2, seqlen_k, 2, 32), "head")
    scale = 0.2
    ref = attention_reference(q, k, v, causal=causal, softmax_scale=scale)
    out = fp8.attention_fp8_model(qc, kc, vc, qd, kd, vd, causal=causal, softmax_scale=scale)
    assert out.shape == ref.shape
    rounding_error = relative_l2(p_rounding_attention(q, k, v, causal, scale), ref)
    assert relative_l2(out, ref) <= 2 * rounding_error + 1e-12, f"seed={seed} {error_report(out, ref)}"
