"""flashprefill_quantize's packed (varlen) form without a GPU: its validation through the real build/libflashprefill.so
(fake pointers, never dereferenced) and the numpy model the kernel must match bit for bit
(prepare.transform_varlen, fp8.quantize_blocks_varlen): each sequence quantized as a batch of one, blocks counted
from its first token, untouched slots and rows kept. The GPU side is tests/test_quantize_varlen_gpu.py."""
import ctypes

import numpy as np
import pytest

from flashprefill import _lib, fp8, prepare
from flashprefill._params import DType, QuantizeParams, Status, VLayout

INVALID = Status.ERROR_INVALID_ARGUMENT
NOT_SUPPORTED = Status.ERROR_NOT_SUPPORTED
X, CODES, EXPONENTS, CU = 0x7F0000000000, 0x7F1000000000, 0x7F2000000000, 0x7F3000000000
POISON_CODE, POISON_EXPONENT = 0x7F, 90  # a NaN code; an exponent no block of these inputs takes


@pytest.fixture(scope="module")
def lib():
    return _lib.lib()


def varlen(total=700, batch=3, max_seqlen=300, heads=4, dim=128, **fields):
    """Valid packed params: x and codes (total, heads, dim) contiguous, exponents (batch, heads, 3)."""
    p = QuantizeParams(x=X, codes=CODES, exponents=EXPONENTS, cu_seqlens=CU, batch=batch, heads=heads, dim=dim,
                       block_tokens=128, x_dtype=DType.BF16, total=total, max_seqlen=max_seqlen)
    for prefix in ("x", "codes"):
        for axis, stride in (("seq", heads * dim), ("head", dim), ("dim", 1)):
            setattr(p, f"{prefix}_stride_{axis}", stride)
    for name, value in fields.items():
        setattr(p, name, value)
    return p


def call(lib, p):
    status = Status(lib.flashprefill_quantize(ctypes.byref(p), None))
    return status, lib.flashprefill_last_error().decode()


CASES = [
    ("total=0", lambda: varlen(total=0), INVALID, "total must be > 0, got 0"),
    ("max_seqlen=0", lambda: varlen(max_seqlen=0), INVALID, "max_seqlen must be > 0, got 0"),
    ("batch=0", lambda: varlen(batch=0), INVALID, "batch must be > 0, got 0"),
    ("cu_seqlens misaligned", lambda: varlen(cu_seqlens=CU + 2), INVALID,
     "cu_seqlens = 0x7f3000000002 is not 4-byte aligned"),
    ("seqlen set", lambda: varlen(seqlen=300), INVALID,
     "with cu_seqlens, seqlen, x_stride_batch and codes_stride_batch are unused and must be 0 (got 300, 0, 0)"),
    ("x_stride_batch set", lambda: varlen(x_stride_batch=512), INVALID, "are unused and must be 0 (got 0, 512, 0)"),
    ("codes_stride_batch set", lambda: varlen(codes_stride_batch=512), INVALID, "(got 0, 0, 512)"),
    ("prepared", lambda: varlen(codes_layout=VLayout.PREPARED), NOT_SUPPORTED,
     "codes_layout PREPARED takes the equal-length form only (cu_seqlens NULL)"),
    ("x_stride_seq odd", lambda: varlen(x_stride_seq=516), INVALID,
     "x_stride_seq = 516 elements of 2 bytes is not a multiple of 16 bytes"),
    ("codes overlaps itself", lambda: varlen(codes_stride_seq=256), INVALID, "codes overlaps itself"),
    # codes span 700 * 512 bytes; x, bf16, twice that
    ("codes overlaps x", lambda: varlen(codes=X + 700 * 1024 - 16), INVALID, "codes overlaps x"),
    # exponents (3, 4, ceil(300 / 128) = 3): 36 bytes, sized by max_seqlen
    ("exponents inside codes", lambda: varlen(exponents=CODES + 700 * 512 - 35), INVALID,
     "exponents overlaps x or codes"),
    ("cu_seqlens inside codes", lambda: varlen(cu_seqlens=CODES + 700 * 512 - 8), INVALID,
     "cu_seqlens overlaps codes"),
    ("cu_seqlens over exponents", lambda: varlen(cu_seqlens=EXPONENTS - 12), INVALID,
     "cu_seqlens overlaps exponents"),
    ("dim 144", lambda: varlen(dim=144), NOT_SUPPORTED, "dim a multiple of 32 up to 256, got 144"),
]


@pytest.mark.parametrize("make, status, substring", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_arguments(lib, make, status, substring):
    got, message = call(lib, make())
    assert got == status and substring in message, f"{got.name}: {message}"


@pytest.mark.parametrize("make", [varlen, lambda: varlen(total=1, batch=1, max_seqlen=1),
                                  lambda: varlen(exponents=CODES + 700 * 512, cu_seqlens=CODES + 700 * 512 + 36),
                                  lambda: varlen(batch=65535, max_seqlen=1, heads=1, x_dtype=DType.FP32)])
def test_valid_arguments_reach_the_device_check(lib, make):
    """Valid packed params (exponents and cu_seqlens right after codes and exponents) pass validation; the fake
    pointers (or the missing GPU) stop them at the device check."""
    status, message = call(lib, make())
    assert status in (Status.ERROR_NO_DEVICE, INVALID) and "must be" not in message, f"{status.name}: {message}"


def _uneven(rng, shape):
    """N(0,1) times 2^-6..2^6 per 32 rows and head, one channel 30x larger (as the GPU test's inputs)."""
    x = rng.standard_normal(shape)
    rows, heads = shape[0], shape[1]
    x *= np.exp2(rng.integers(-6, 7, ((rows + 31) // 32, heads)))[np.arange(rows) // 32, :, None]
    x[..., 3] *= 30
    return x


@pytest.mark.parametrize("block", [16, 128, 1000])
@pytest.mark.parametrize("mode", ["plain", "rotate", "rotate_smooth"])
def test_equal_lengths_packed_are_the_equal_length_quantizer(rng, mode, block):
    """A batch of equal lengths packed one sequence after another quantizes to the equal-length model's codes and
    exponents, bit for bit (transform_varlen's subtraction per sequence included)."""
    batch, seqlen, heads, dim = 3, 200, 2, 64
    x = _uneven(rng, (batch * seqlen, heads, dim)).reshape(batch, seqlen, heads, dim)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if mode != "plain" else None
    subtract = prepare.key_mean(x) if mode == "rotate_smooth" else None
    cu_seqlens = np.arange(batch + 1) * seqlen
    packed = prepare.transform_varlen(x.reshape(-1, heads, dim), cu_seqlens, signs, subtract)
    codes, exponents = fp8.quantize_blocks_varlen(packed, cu_seqlens, seqlen, block)
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(x, signs, subtract), block)
    np.testing.assert_array_equal(codes, model_codes.reshape(-1, heads, dim))
    np.testing.assert_array_equal(exponents, model_exponents)


def test_sequences_are_quantized_alone(rng):
    """Lengths 0, 1, a block and a bit, rows before and after the sequences: each sequence's codes and exponents are
    those of it alone (its blocks from its own first token, its span floor and zero blocks its own); rows outside every
    sequence and slots past a sequence's blocks keep what they held."""
    heads, dim, block, max_seqlen = 2, 32, 16, 40
    cu_seqlens = np.array([2, 2, 3, 20, 22, 62])  # lengths 0, 1, 17, 2 and 40; rows 0, 1 before them
    total = int(cu_seqlens[-1]) + 3  # and three rows after them
    x = _uneven(rng, (total, heads, dim)).astype(np.float32)
    x[cu_seqlens[4]:cu_seqlens[4] + 16, 1] = 0  # a zero block: it takes its own sequence's largest exponent
    before_codes = rng.integers(0, 256, (total, heads, dim)).astype(np.uint8)
    before_exponents = np.full((5, heads, 3), POISON_EXPONENT, np.int8)
    codes, exponents = fp8.quantize_blocks_varlen(x, cu_seqlens, max_seqlen, block, codes=before_codes,
                                                  exponents=before_exponents)
    written = np.zeros(total, bool)
    for b, (begin, end) in enumerate(zip(cu_seqlens[:-1], cu_seqlens[1:])):
        blocks = -(-(end - begin) // block)
        assert (exponents[b, :, blocks:] == POISON_EXPONENT).all(), b
        if blocks == 0:
            continue
        alone_codes, alone_exponents = fp8.quantize_blocks(x[None, begin:end], block)
        np.testing.assert_array_equal(codes[begin:end], alone_codes[0])
        np.testing.assert_array_equal(exponents[b, :, :blocks], alone_exponents[0])
        written[begin:end] = True
    assert not written[:2].any() and not written[-3:].any()
    np.testing.assert_array_equal(codes[~written], before_codes[~written])
    assert exponents[4, 1, 0] == exponents[4, 1].max()


INVALID_SEQUENCES = {  # (cu_seqlens over 20 rows, max_seqlen, the invalid sequences)
    "decreasing": ([0, 5, 3, 3], 30, [1]), "past_total": ([0, 5, 25], 30, [1]), "negative": ([-1, 5, 9], 30, [0]),
    "past_max_seqlen": ([0, 9, 20], 10, [1])}


@pytest.mark.parametrize("cu_seqlens, max_seqlen, invalid", INVALID_SEQUENCES.values(), ids=INVALID_SEQUENCES)
def test_invalid_sequences_keep_their_rows_and_get_minus_128(rng, cu_seqlens, max_seqlen, invalid):
    """A sequence whose bounds are not valid (its end before its start, a negative start, past total = 20 rows,
    longer than max_seqlen) is not quantized: its exponent slots all -128, its rows kept; the valid ones as alone."""
    total, heads, dim = 20, 2, 32
    x = rng.standard_normal((total, heads, dim)).astype(np.float32)
    before = np.full((total, heads, dim), POISON_CODE, np.uint8)
    codes, exponents = fp8.quantize_blocks_varlen(x, cu_seqlens, max_seqlen, 8, codes=before)
    for b, (begin, end) in enumerate(zip(cu_seqlens[:-1], cu_seqlens[1:])):
        if b in invalid:
            assert (exponents[b] == -128).all(), b
        if b in invalid or end == begin:
            continue
        alone_codes, alone_exponents = fp8.quantize_blocks(x[None, begin:end], 8)
        np.testing.assert_array_equal(codes[begin:end], alone_codes[0])
        np.testing.assert_array_equal(exponents[b, :, :alone_exponents.shape[2]], alone_exponents[0])
    assert fp8.varlen_bounds(cu_seqlens, total, max_seqlen).count(None) == len(invalid)
    kept = np.ones(total, bool)
    for b, (begin, end) in enumerate(zip(cu_seqlens[:-1], cu_seqlens[1:])):
        if b not in invalid:
            kept[begin:end] = False
    assert (codes[kept] == POISON_CODE).all()
