"""FP8 numerics model: the e4m3 codec, the quantizers and a bit-exact model of the exp-free probability encoder.

Everything here is written against an array module ``xp`` (numpy or cupy, whichever holds the input) and uses
only operations both support, so the same code runs on host and device arrays. ml_dtypes is not used at run
time; the tests check this module against it.

e4m3 here is OCP e4m3fn: a code is ``sign<<7 | E<<3 | M``; normal (E >= 1) values are ``2^(E-7)·(1+M/8)``,
subnormal (E == 0) values ``M·2^-9``; the largest finite value is 448 (code 0x7e), codes 0x7f / 0xff are NaN,
and there is no infinity.
"""
import sys

import numpy as np

E4M3_MAX = 448.0
E4M3_NAN_CODE = 0x7F
E4M3_MAX_CODE = 0x7E
LOG2_E = 1.4426950408889634
EXPONENT_SPAN = 64  # quantize_blocks: the most the block exponents of one (batch, head) differ
ZERO_BLOCK = -128  # block_exponents of a block of zeros: below every exponent a quantizer writes


def array_module(x):
    """numpy or cupy, whichever module ``x`` belongs to. A CuPy array exists only once CuPy is imported, so CuPy is
    never imported here: numpy when it is not loaded."""
    cupy = sys.modules.get("cupy")
    return np if cupy is None else cupy.get_array_module(x)


def _decode_table():
    """float32[256]: the value of every e4m3fn code, built from the bit layout."""
    codes = np.arange(256)
    exponent, mantissa = (codes >> 3) & 0xF, (codes & 7).astype(np.float64)
    magnitude = np.where(exponent == 0, mantissa * 2.0**-9, np.ldexp(1.0 + mantissa / 8, exponent - 7))
    value = np.where(codes & 0x80, -magnitude, magnitude)
    return np.where((codes & 0x7F) == E4M3_NAN_CODE, np.nan, value).astype(np.float32)


_E4M3_VALUES = _decode_table()


def e4m3_decode(codes):
    """uint8 e4m3fn codes (any shape) -> float32 values of the same shape (NaN codes give NaN)."""
    xp = array_module(codes)
    return xp.asarray(_E4M3_VALUES)[codes.astype(xp.uint8)]


def e4m3_encode(x):
    """float32 values (any shape; other float dtypes are first cast to float32) -> uint8 e4m3fn codes.

    Round to nearest, ties to even, on the float32 bits; subnormals exact (smallest 2^-9, values below 2^-10
    round to ±0, keeping the sign). Rule for values outside the finite range: every magnitude above 448,
    infinities included, saturates to ±448 (code 0x7e | sign), as PTX ``cvt.rn.satfinite`` does; NaN gives
    0x7f. (ml_dtypes differs only there: it gives NaN for magnitudes >= 464 and for ±inf.)
    """
    xp = array_module(x)
    bits = xp.ascontiguousarray(xp.asarray(x, dtype=xp.float32)).view(xp.uint32)
    sign = (bits >> 31).astype(xp.uint8) << 7
    magnitude = bits & 0x7FFFFFFF
    exponent_f32 = magnitude >> 23
    # Normal e4m3 (|x| >= 2^-6, float32 exponent >= 121): rebias 127 -> 7, round 23 -> 3 mantissa bits.
    # A rounding carry moves into the exponent field, which is the right result.
    rebased = magnitude - xp.uint32(120 << 23)
    normal = (rebased + xp.uint32(0x7FFFF) + ((rebased >> 20) & 1)) >> 20
    normal = xp.minimum(normal, xp.uint32(E4M3_MAX_CODE))
    # Subnormal e4m3: code = round(|x| / 2^-9) = round(significand >> shift), shift = 141 - exponent_f32 >= 21
    # (float32 subnormals have no implicit bit and exponent 1); shift is capped at 31, which already gives 0.
    significand = xp.where(exponent_f32 > 0, (magnitude & 0x7FFFFF) | 0x800000, magnitude & 0x7FFFFF)
    shift = xp.minimum(xp.uint32(141) - xp.maximum(exponent_f32, xp.uint32(1)), xp.uint32(31))
    quotient = significand >> shift
    remainder = significand & ((xp.uint32(1) << shift) - xp.uint32(1))
    half = xp.uint32(1) << (shift - xp.uint32(1))
    round_up = (remainder > half) | ((remainder == half) & ((quotient & 1) == 1))
    subnormal = quotient + round_up.astype(xp.uint32)
    code = xp.where(exponent_f32 >= 121, normal, subnormal).astype(xp.uint8) | sign
    return xp.where(magnitude > 0x7F800000, xp.uint8(E4M3_NAN_CODE), code)


def block_scales(exponents, seqlen, block_tokens):
    """int8 (batch, heads, ceil(seqlen/block_tokens)) exponents -> float64 (batch, seqlen, heads) scales 2^e."""
    xp = array_module(exponents)
    token_block = xp.arange(seqlen) // block_tokens
    return xp.ldexp(1.0, exponents.astype(xp.int32)[:, :, token_block]).transpose(0, 2, 1)


def block_exponents(amax, code_max=E4M3_MAX):
    """int32 exponents of blocks whose largest magnitudes are `amax` (float32, any shape): the smallest e with
    amax <= code_max·2^e, clamped to [-127, 127]; 0 where amax is inf or NaN; ZERO_BLOCK where it is 0.
    code_max: a normal e4m3 value in [2^-6, 448]."""
    if code_max not in _E4M3_VALUES[(_E4M3_VALUES >= 2.0**-6) & (_E4M3_VALUES <= E4M3_MAX)]:
        raise ValueError(f"code_max must be a normal e4m3 value in [2^-6, 448], got {code_max!r}")
    xp = array_module(amax)
    # amax = f·2^k and code_max = g·2^c, f and g in [0.5, 1): amax <= code_max·2^e  <=>  e >= k - c + (f > g).
    code_fraction, code_power = np.frexp(np.float64(code_max))
    fraction, power = xp.frexp(xp.asarray(amax).astype(xp.float64))
    exponent = xp.clip(power.astype(xp.int32) - int(code_power) + (fraction > code_fraction).astype(xp.int32),
                       -127, 127)
    exponent = xp.where(xp.isfinite(amax), exponent, 0)  # inf or NaN in the block
    return xp.where(amax == 0, ZERO_BLOCK, exponent).astype(xp.int32)


def quantize_blocks(x, block_tokens=128, code_max=E4M3_MAX):
    """Per-block power-of-two quantization: x ≈ e4m3_decode(codes) · 2^e.

    x: float (batch, seq, heads, dim), rounded to float32 first (exact for bf16/fp16/fp32 inputs).
    code_max: the largest magnitude of the codes, a normal e4m3 value (448; for q with
    float16 scores, the library's bound: policy.query(...).q_code_max).
    Returns codes uint8 (batch, seq, heads, dim) and exponents int8 (batch, heads, ceil(seq/block_tokens)),
    one per block of ``block_tokens`` tokens × dim of one head; the last block may be short.
    e is the smallest integer with amax/2^e <= code_max, so the block's largest magnitude lands in
    (code_max/2, code_max], clamped to [-127, 127], except that the exponents of one (batch, head) span at most
    EXPONENT_SPAN (64): a block further below its head's largest is quantized at that floor, which loses only values
    under 2^-55 of the head's largest magnitude (the Hopper kernel keeps O in units of the current v block, exact
    within that span). Blocks that are all zero take their head's largest exponent (0 if none); blocks holding inf/NaN
    take e = 0 before the span floor, i.e. they count toward the head's largest exponent and are raised like the
    others (as the GPU quantizer does). Dividing by 2^e is done in float64 and is exact; the e4m3 rounding
    (e4m3_encode) is the only error.
    The library's GPU quantizer (flashprefill_quantize) computes the same bits.
    """
    if not isinstance(block_tokens, (int, np.integer)) or block_tokens <= 0:
        raise ValueError(f"block_tokens must be an int > 0, got {block_tokens!r}")
    xp = array_module(x)
    x32 = xp.asarray(x, dtype=xp.float32)
    batch, seqlen, heads, dim = x32.shape
    n_blocks = -(-seqlen // block_tokens)
    padded = xp.zeros((batch, n_blocks * block_tokens, heads, dim), dtype=xp.float32)
    padded[:, :seqlen] = xp.abs(x32)
    amax = padded.reshape(batch, n_blocks, block_tokens, heads, dim).max(axis=(2, 4)).transpose(0, 2, 1)
    exponent = block_exponents(amax, code_max)
    counted = exponent != ZERO_BLOCK
    head_max = xp.where(counted, exponent, -(1 << 30)).max(axis=2, keepdims=True)
    head_max = xp.where(counted.any(axis=2, keepdims=True), head_max, 0)
    exponent = xp.where(counted, xp.maximum(exponent, head_max - EXPONENT_SPAN), head_max)
    exponents = xp.ascontiguousarray(exponent.astype(xp.int8))  # contiguous, as BlockScales takes them
    scaled = x32.astype(xp.float64) / block_scales(exponents, seqlen, block_tokens)[..., None]
    return e4m3_encode(scaled.astype(xp.float32)), exponents


def varlen_bounds(cu_seqlens, total, max_seqlen):
    """[(begin, end)] of each sequence of a packed batch (host ints), None for one whose bounds are not valid (begin
    < 0, end < begin, end > total, or longer than max_seqlen): flashprefill_quantize leaves its rows and fills its
    exponent slots with -128."""
    bounds = [int(b) for b in np.asarray(cu_seqlens)]
    return [(begin, end) if 0 <= begin <= end <= total and end - begin <= max_seqlen else None
            for begin, end in zip(bounds[:-1], bounds[1:])]


def quantize_blocks_varlen(x, cu_seqlens, max_seqlen, block_tokens=128, code_max=E4M3_MAX, codes=None,
                           exponents=None):
    """quantize_blocks of each sequence of a packed (varlen) batch, as flashprefill_quantize with cu_seqlens.

    x: float (total, heads, dim) (prepare.transform_varlen of the input); cu_seqlens: host ints (batch + 1).
    codes, exponents: what the outputs held before, uint8 (total, heads, dim) and int8 (batch, heads,
    ceil(max_seqlen / block_tokens)) (default zeros), copied: rows outside every sequence and exponent slots past a
    sequence's blocks keep their values; a sequence whose bounds are not valid (varlen_bounds) keeps its rows and gets
    -128 in every slot. Returns the new codes and exponents.
    """
    xp = array_module(x)
    total, heads, dim = x.shape
    slots = -(-max_seqlen // block_tokens)
    codes = xp.zeros((total, heads, dim), xp.uint8) if codes is None else codes.copy()
    exponents = xp.zeros((len(cu_seqlens) - 1, heads, slots), xp.int8) if exponents is None else exponents.copy()
    for b, bound in enumerate(varlen_bounds(cu_seqlens, total, max_seqlen)):
        if bound is None:
            exponents[b] = -128
        elif bound[1] > bound[0]:
            begin, end = bound
            sequence_codes, sequence_exponents = quantize_blocks(x[None, begin:end], block_tokens, code_max)
            codes[begin:end] = sequence_codes[0]
            exponents[b, :, :sequence_exponents.shape[2]] = sequence_exponents[0]
    return codes, exponents


def dequantize_blocks(codes, exponents, block_tokens=128):
    """Inverse of quantize_blocks: uint8 codes (batch, seq, heads, dim) -> float64 of that shape, exact."""
    scales = block_scales(exponents, codes.shape[1], block_tokens)
    return e4m3_decode(codes).astype(scales.dtype) * scales[..., None]


def f16_scores_q_code_max_without_library(dim_qk):
    """The bound on q's code magnitudes under which float16 scores cannot overflow, derived here from e4m3's values
    (the largest m with m * 448 * dim_qk <= 65504: 1.125 at 128, 0.75 at 192) for the numpy model where no library
    can be loaded. With a library, ask it: policy.query(backend, dim_qk, dim_v, scores="fp16").q_code_max, which
    tests/test_policy.py holds equal to this."""
    values = np.sort(np.abs(e4m3_decode(np.arange(E4M3_MAX_CODE + 1, dtype=np.uint8))))
    return float(values[values * E4M3_MAX * dim_qk <= 65504.0].max())


def _descale(amax, code_max):
    """amax / code_max, or 1 where amax is 0 or not finite (a tensor or head holding inf or NaN: as quantize_blocks
    gives such a block e = 0), in float32: never a NaN or infinite descale."""
    xp = array_module(amax)
    usable = xp.isfinite(amax) & (amax > 0)
    return xp.where(usable, amax / xp.float32(code_max), xp.float32(1.0)).astype(xp.float32)


def quantize_per_tensor(x):
    """FlashAttention-3 convention: x ≈ e4m3_decode(codes) · descale with descale = amax/448.

    x: float (any shape). Returns codes uint8 (x's shape) and descale float32 0-d array. An all-zero x takes
    descale 1; so does an x holding inf or NaN, as quantize_blocks treats such a block: its finite values saturate at
    ±448, inf gives ±448 and NaN the NaN code (e4m3_encode), and every finite value stays finite.
    """
    xp = array_module(x)
    x32 = xp.asarray(x, dtype=xp.float32)
    descale = _descale(xp.abs(x32).max(), E4M3_MAX)
    return e4m3_encode(x32 / descale), descale


def quantize_per_head(x, code_max=E4M3_MAX):
    """As quantize_per_tensor with one descale per (batch, head): x float (batch, seq, heads, dim) ->
    codes uint8 (batch, seq, heads, dim), descale float32 (batch, heads). code_max: the largest magnitude the codes
    may take, an e4m3 value (448; for q with float16 scores, policy.query(...).q_code_max). A head holding inf or NaN
    takes descale 1 (its codes then reach ±448, past a smaller code_max, as quantize_blocks' e = 0 blocks do)."""
    xp = array_module(x)
    x32 = xp.asarray(x, dtype=xp.float32)
    descale = _descale(xp.abs(x32).max(axis=(1, 3)), code_max)
    return e4m3_encode(x32 / descale[:, None, :, None]), descale


def fma_f32(a, b, c):
    """Correctly rounded float32 fused multiply-add a·b + c (what the GPU's FFMA does), elementwise.

    a, b, c: float32 arrays (broadcastable). The float64 product of two float32 is exact; the float64 sum is
    rounded, and its error is recovered exactly (TwoSum). A plain cast to float32 is then correct except when
    the float64 sum sits exactly on a float32 midpoint while the exact sum does not: there the sum is moved one
    float64 ulp towards the exact value before the cast. Valid when the result is a normal float32; infinities
    propagate as in IEEE arithmetic.
    """
    xp = array_module(a)
    product = a.astype(xp.float64) * b.astype(xp.float64)
    addend = xp.asarray(c, dtype=xp.float32).astype(xp.float64)
    total = product + addend
    with np.errstate(invalid="ignore"):
        product_part = total - addend
        error = (addend - (total - product_part)) + (product - product_part)
    low_bits = xp.ascontiguousarray(total).view(xp.uint64) & xp.uint64((1 << 29) - 1)
    on_midpoint = (low_bits == xp.uint64(1 << 28)) & (error != 0) & xp.isfinite(error)
    nudged = xp.nextafter(total, xp.where(error > 0, xp.inf, -xp.inf))
    return xp.where(on_midpoint, nudged, total).astype(xp.float32)


# Exp-free FP8 probabilities (docs/numerics.md, "Exp-free codes").
#
# For p' = 2^u (u = t + offset_log2, t <= 0 the log2-domain score minus the row max), the e4m3 code of a normal
# value is b = 8·(floor(u) + 7) + 8·(mantissa fraction). Taking the mantissa as linear in u, 2^f ≈ 1 + f, gives
# b ≈ 8u + 56. 1 + f lies above 2^f by up to 6.1% (at f = 1/ln2 - 1); subtracting c code steps centres that
# error: c = 0.349 balances it at ±3.0%, and the kernels' c = 0.34 gives +3.07% / -2.90% before b is rounded to an
# integer. Rounding adds up to half a code step, a relative 1/16 at the bottom of a binade;
# expfree_relative_error_bound gives the exact worst case (7.55% for c = 0.34; the c minimising it is 0.370,
# at 7.26%, so the choice within that range matters little).
#
# The kernel gets the rounded integer from one FFMA by adding a "magic" constant 1.5·2^k: the sum's unit in the
# last place is 2^(k-23), so the float's low bits hold the rounded value. With k = 23 (code_byte 0) the per-row
# constant C_row is itself a float32 integer, which drops c and the fraction of 8·m: each row and tile gets its
# own rounding offset of up to half a code step. With k = 15 (code_byte 1) there are 8 fraction bits below the
# code; the code is byte 1 of the float, and adding 0.5 to C_row turns the byte's truncation into rounding.
# Either byte is picked by the same byte permute (PRMT) that packs four codes per register; an integer max
# clamps codes below 0. (Both kernels did this before kernel v12; the model keeps it for comparison.)
#
# encoder "f16" (both kernels now) needs no magic and no clamp: the FMA computes y = b·2^-24 (every constant
# scaled by 2^-24, which changes no float32 rounding), and one conversion rounds two such y to float16
# subnormals (unit 2^-24, up to 1023) whose bits are round(b), ties to even, or 0 where b < 0: Hopper's
# cvt.rn.relu.f16x2.f32, gfx950's v_cvt_pk_f16_f32 with clamp (to [0, 1]).
#
# encoder "f16-scores" (Hopper with FLASHPREFILL_SCORES_FP16, cuda/fwd/f16_scores.cuh): the scores are float16 and so
# is the arithmetic: m = f16(8·scale_log2), c = f16(K - 8·max) (K - 8·max in float32 first, as above),
# y = relu(s·m + c) rounded once to float16 (fma.rn.relu.f16x2), then 1024 + y rounded to float16 (add.rn.f16x2),
# whose low byte is the code: between 1024 and 2048 one float16 unit is one code step.

EXPFREE_MAGIC = {0: 1.5 * 2.0**23, 1: 1.5 * 2.0**15}
SUBNORMAL_RULES = ("linear", "flush")
ENCODERS = ("magic", "f16", "f16-scores")


def expfree_relative_error_bound(c):
    """Worst |decode(b)/2^u - 1| over u for b = round(8u + 56 - c) in the normal range, exactly.

    Code 56 + M (M = 0..7) is chosen for u in [(M - 0.5 + c)/8, (M + 0.5 + c)/8) (one binade; the pattern
    repeats) and its value 1 + M/8 is fixed while 2^u grows, so the extremes sit at the interval ends.
    """
    mantissa = np.arange(8.0)
    over = (1 + mantissa / 8) * 2.0 ** (-(mantissa - 0.5 + c) / 8) - 1
    under = 1 - (1 + mantissa / 8) * 2.0 ** (-(mantissa + 0.5 + c) / 8)
    return float(max(over.max(), under.max()))


def expfree_codes(s, scale_log2, row_max_log2, offset_log2=8, c=0.34, subnormal="linear", code_byte=1,
                  encoder="f16"):
    """Bit-exact model of the kernel's exp-free encoder: e4m3 codes of p' ≈ 2^(s·scale_log2 - m + offset_log2).

    s: float32 raw scores q·k (rows, cols) or any (..., cols); masked entries -inf (they give code 0).
    scale_log2: float, softmax_scale·log2(e).
    row_max_log2: float32 (...,) finite running row max in log2 units (max of s·scale_log2 as float32 FMUL).
    offset_log2: int, p' = 256 at the row max for the default 8 (code 120; 2^9 would pass 448).
    c: the linear-mantissa correction in code steps (see the section comment).
    subnormal: "linear" keeps the clamped byte, so codes 1..7 are read as subnormals M·2^-9 where the
        linear rule meant 2^-7·(1 + M/8) (too small by a factor 2M/(8+M)) and code 0 as zero; "flush" maps
        codes 1..7 to 0 (one more instruction). Either way p' below about 2^-7 (p below 2^-15 of the row
        max) is lost. Measured (test_subnormal_rules_measured, P·V/rowsum per row): equal on N(0,1) rows; on
        an attention sink over 8k keys at N(-14,1) log2 units linear 4-6e-2, flush 1.0-1.5e-1; at N(-12,1)
        linear 7e-3, flush 5e-3. Hence the default "linear".
    code_byte: 0 or 1, the byte of the FFMA result that holds the code (magic 1.5·2^23 or 1.5·2^15). Measured
        kernel-only relative L2 of attention_fp8_model on N(0,1), hd128, S=512-4096: 2.2-2.5e-2 for 1,
        3.1-3.4e-2 for 0, against 1.8-2.1e-2 for P rounded by ml_dtypes at the exact max. Hence the default 1.
    encoder: "f16" (both kernels; code_byte unused), "f16-scores" (Hopper's float16 scores, whose fast form it
        models: s must hold float16 values, |row max| <= 256 and 8·scale_log2 a normal float16) or "magic" (the
        earlier integer-clamp encoder).
    NaN scores give code 0 with "magic" (the clamp keeps NaN's bits, whose code byte is 0); with "f16" they
    give 0xff as on Hopper (float16 NaN's low byte, an e4m3 NaN; gfx950's clamp turns NaN into 0: code 0).

    The float32 steps, as the kernels do them ("magic"):
        scale8 = f32(8·scale_log2); K = f32(magic + 56 - c + 8·offset_log2 + 0.5·code_byte)   (host)
        C_row = fmaf(-8, m, K)                                     once per row and tile
        y = fmaf(s, scale8, C_row); bits = max_s32(bits(y), bits(magic)); code = byte code_byte of bits
    ("f16"): K = f32(56 - c + 8·offset_log2); C_row = fmaf(-8, m, K); y = fmaf(s, scale8, C_row);
        code = low byte of the float16 bits of relu(y·2^-24) rounded to nearest even.
    Returns uint8 codes shaped like s.
    """
    if subnormal not in SUBNORMAL_RULES:
        raise ValueError(f"subnormal must be one of {SUBNORMAL_RULES}, got {subnormal!r}")
    if encoder not in ENCODERS:
        raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")
    xp = array_module(s)
    if encoder in ("f16", "f16-scores"):
        encode = _f16_subnormal_codes if encoder == "f16" else _f16_scores_codes
        codes = encode(xp, s, scale_log2, row_max_log2, offset_log2, c)
        return xp.where(codes < 8, xp.uint8(0), codes) if subnormal == "flush" else codes
    magic = EXPFREE_MAGIC[code_byte]
    scale8 = xp.asarray(8 * scale_log2, dtype=xp.float32)
    row_constant_base = xp.asarray(magic + 56 - c + 8 * offset_log2 + 0.5 * code_byte, dtype=xp.float32)
    row_max = xp.asarray(row_max_log2, dtype=xp.float32)
    row_constant = fma_f32(xp.full(row_max.shape, -8, dtype=xp.float32), row_max, row_constant_base)
    y = fma_f32(xp.asarray(s, dtype=xp.float32), scale8, row_constant[..., None])
    magic_bits = int(np.float32(magic).view(np.int32))
    bits = xp.maximum(xp.ascontiguousarray(y).view(xp.int32), magic_bits)
    codes = ((bits >> (8 * code_byte)) & 0xFF).astype(xp.uint8)
    if subnormal == "flush":
        codes = xp.where(codes < 8, xp.uint8(0), codes)
    return codes


def _f16_subnormal_codes(xp, s, scale_log2, row_max_log2, offset_log2, c):
    """expfree_codes' "f16" encoder (the kernels' FMA and float16 conversion)."""
    scale8 = xp.asarray(8 * scale_log2, dtype=xp.float32)
    row_constant_base = xp.asarray(56 - c + 8 * offset_log2, dtype=xp.float32)
    row_max = xp.asarray(row_max_log2, dtype=xp.float32)
    row_constant = fma_f32(xp.full(row_max.shape, -8, dtype=xp.float32), row_max, row_constant_base)
    y = fma_f32(xp.asarray(s, dtype=xp.float32), scale8, row_constant[..., None])
    with np.errstate(invalid="ignore"):
        y = xp.where(y < 0, xp.float32(0), y)  # relu
    half = (y * xp.float32(2.0**-24)).astype(xp.float16)  # exact scaling, then the conversion's one rounding
    codes = (xp.ascontiguousarray(half).view(xp.uint16) & 0xFF).astype(xp.uint8)
    return xp.where(xp.isnan(y), xp.uint8(0xFF), codes)  # the conversion's canonical NaN is 0x7fff


def _f16_scores_codes(xp, s, scale_log2, row_max_log2, offset_log2, c):
    """expfree_codes' "f16-scores" encoder: float16 arithmetic on float16 scores. Each step's exact value is formed
    in float64 (products and sums of these float16 values are exact there) and rounded once to float16."""
    s16 = xp.asarray(s, dtype=xp.float64)
    if not bool(xp.all((s16.astype(xp.float16).astype(xp.float64) == s16) | ~xp.isfinite(s16))):
        raise ValueError("encoder 'f16-scores' takes scores that are float16 values")
    multiplier = float(np.float16(np.float32(8 * scale_log2)))
    row_constant = (xp.float32(56 - c + 8 * offset_log2) - xp.float32(8) * xp.asarray(row_max_log2, xp.float32))
    row_constant = row_constant.astype(xp.float16).astype(xp.float64)
    y = (s16 * multiplier + row_constant[..., None])
    y = xp.where(y > 0, y, 0.0).astype(xp.float16).astype(xp.float64)  # fma.rn.relu.f16x2
    shifted = (y + 1024).astype(xp.float16).astype(xp.float64)  # add.rn.f16x2 of 1024
    return (shifted - 1024).astype(xp.uint8)


def expfree_decode(codes, offset_log2=8):
    """uint8 codes from expfree_codes -> float32 probabilities relative to the row max, decode(code)·2^-offset."""
    return e4m3_decode(codes) * np.float32(2.0**-offset_log2)


def expfree_probabilities(s, scale_log2, row_max_log2, offset_log2=8, c=0.34, subnormal="linear", code_byte=1,
                          encoder="f16"):
    """Codes as expfree_codes, plus float64 (...,) row sums of the decoded probabilities (what the kernel sums:
    the probabilities P·V actually used, relative to the row max)."""
    codes = expfree_codes(s, scale_log2, row_max_log2, offset_log2, c, subnormal, code_byte, encoder)
    return codes, expfree_decode(codes, offset_log2).astype(np.float64).sum(axis=-1)


def _dequantize(codes, descale):
    """uint8 codes (batch, seq, heads, dim) and a descale of shape (), (batch, heads) or (batch, seq, heads)
    -> float64 values."""
    xp = array_module(codes)
    descale = xp.asarray(descale, dtype=xp.float64)
    if descale.ndim == 2:
        descale = descale[:, None, :, None]
    elif descale.ndim == 3:
        descale = descale[..., None]
    return e4m3_decode(codes).astype(xp.float64) * descale


def attention_fp8_model(q_codes, k_codes, v_codes, q_descale, k_descale, v_descale, *, causal=True,
                        softmax_scale=None, kv_tile=128, offset_log2=8, c=0.34, subnormal="linear", code_byte=1,
                        encoder="f16", return_lse=False):
    """Emulation of the FP8 kernel pipeline (float64 except where the kernel rounds to float32 or e4m3).

    q_codes uint8 (batch, seqlen_q, heads_q, dim_qk); k_codes uint8 (batch, seqlen_k, heads_kv, dim_qk);
    v_codes uint8 (batch, seqlen_k, heads_kv, dim_v). Each descale is float of shape () (per tensor),
    (batch, heads) (per head) or (batch, seq, heads) (per token; per-block exponents via block_scales).
    Mask, GQA and softmax_scale as attention_reference. Per KV tile of kv_tile keys, in order: S = Q·K^T rounded
    to float32; running row max m = max(m, f32(max(S)·scale_log2)); P codes by expfree_codes at m;
    accumulator and row sum rescaled by 2^(m_old - m) exactly; O += decode(P)·V; row sum += sum(decode(P)).
    Tiles go in increasing key order; a kernel that walks them from the diagonal down (as FA3 does) encodes
    each tile at a different running max, so bit-exact comparisons must follow the kernel's order.
    V's scales multiply decode(P)·V here; folding a power-of-two V scale into the P code (code + 8e) is the
    same while codes stay normal. Not modelled: float32 accumulation inside the matrix products, ex2.approx
    in the rescale.
    Returns out float64 (batch, seqlen_q, heads_q, dim_v) (zero for rows that see no key), and with
    return_lse the natural-log sum of exp float64 (batch, heads_q, seqlen_q) of the encoded probabilities.
    """
    xp = array_module(q_codes)
    q, k, v = _dequantize(q_codes, q_descale), _dequantize(k_codes, k_descale), _dequantize(v_codes, v_descale)
    batch, seqlen_q, heads_q, dim_qk = q.shape
    seqlen_k, heads_kv, dim_v = v.shape[1], v.shape[2], v.shape[3]
    group = heads_q // heads_kv
    scale_log2 = (dim_qk**-0.5 if softmax_scale is None else softmax_scale) * LOG2_E
    last_key = xp.arange(seqlen_q)[:, None] + (seqlen_k - seqlen_q) if causal else None
    out = xp.zeros((batch, seqlen_q, heads_q, dim_v))
    lse = xp.full((batch, heads_q, seqlen_q), -np.inf)
    for b in range(batch):
        for h in range(heads_q):
            qh, kh, vh = q[b, :, h], k[b, :, h // group], v[b, :, h // group]
            row_max = xp.full(seqlen_q, -np.inf, dtype=xp.float32)
            acc, row_sum = xp.zeros((seqlen_q, dim_v)), xp.zeros(seqlen_q)
            for start in range(0, seqlen_k, kv_tile):
                s = (qh @ kh[start:start + kv_tile].T).astype(xp.float32)
                if causal:
                    keys = xp.arange(start, start + s.shape[1])[None, :]
                    s = xp.where(keys <= last_key, s, xp.float32(-np.inf))
                new_max = xp.maximum(row_max, s.max(axis=1) * xp.float32(scale_log2))
                seen = xp.isfinite(new_max)
                encode_max = xp.where(seen, new_max, xp.float32(0))
                rescale = xp.where(xp.isfinite(row_max), xp.exp2(row_max.astype(xp.float64) - encode_max), 0.0)
                codes = expfree_codes(s, scale_log2, encode_max, offset_log2, c, subnormal, code_byte, encoder)
                p = expfree_decode(codes, offset_log2).astype(xp.float64)
                acc = acc * rescale[:, None] + p @ vh[start:start + kv_tile]
                row_sum = row_sum * rescale + p.sum(axis=1)
                row_max = new_max
            nonzero = row_sum > 0
            out[b, :, h] = acc / xp.where(nonzero, row_sum, 1.0)[:, None]
            with np.errstate(divide="ignore"):
                lse[b, h] = xp.where(nonzero, (row_max + xp.log2(row_sum)) / LOG2_E, -np.inf)
    return (out, lse) if return_lse else out
