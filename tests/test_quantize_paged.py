"""flashprefill_quantize_paged without a GPU: its validation through the real build/libflashprefill.so (fake pointers,
never dereferenced), and the numpy model the kernel must match bit for bit (paged.quantize_paged_model) held to the
contract of include/flashprefill.h: a page's exponent is the one of all its rows written at once however they were
appended, each value within one e4m3 unit of it, the same codes wherever a value's code is normal. The GPU side is
tests/test_quantize_paged_gpu.py."""
import ctypes

import ml_dtypes
import numpy as np
import pytest

from flashprefill import _lib, fp8, paged, prepare
from flashprefill._params import DType, QuantizePagedParams, Status

INVALID = Status.ERROR_INVALID_ARGUMENT
NOT_SUPPORTED = Status.ERROR_NOT_SUPPORTED
X, SLOTS, CODES, EXPONENTS, SIGNS = 0x7F0000000000, 0x7F1000000000, 0x7F2000000000, 0x7F3000000000, 0x7F4000000000
EMPTY = paged.PAGE_EMPTY


@pytest.fixture(scope="module")
def lib():
    return _lib.lib()


def valid(tokens=37, heads_kv=2, dim=128, num_pages=50, page_size=16, **fields):
    """Valid params: x (tokens, heads_kv, dim) bf16 and the cache (num_pages, page_size, heads_kv, dim), contiguous."""
    p = QuantizePagedParams(x=X, slot_mapping=SLOTS, codes=CODES, exponents=EXPONENTS, signs=SIGNS, tokens=tokens,
                            heads_kv=heads_kv, dim=dim, num_pages=num_pages, page_size=page_size, x_dtype=DType.BF16,
                            x_stride_token=heads_kv * dim, x_stride_head=dim, x_stride_dim=1,
                            codes_stride_page=page_size * heads_kv * dim, codes_stride_row=heads_kv * dim,
                            codes_stride_head=dim, codes_stride_dim=1)
    for name, value in fields.items():
        setattr(p, name, value)
    return p


def call(lib, p):
    status = Status(lib.flashprefill_quantize_paged(ctypes.byref(p) if p is not None else None, None))
    return status, lib.flashprefill_last_error().decode()


CACHE_BYTES = 50 * 16 * 2 * 128
CASES = [
    *[(f"{name}=0", lambda name=name: valid(**{name: 0}), INVALID, f"{name} must be > 0, got 0")
      for name in ("tokens", "heads_kv", "dim", "num_pages", "page_size")],
    *[(f"struct_bytes={value}", lambda value=value: valid(struct_bytes=value), INVALID,
       f"flashprefill_quantize_paged_params struct is {value} bytes (its struct_bytes); this library (version ")
      for value in (0, ctypes.sizeof(QuantizePagedParams) - 8, ctypes.sizeof(QuantizePagedParams) + 8)],
    ("slots past int32", lambda: valid(num_pages=1 << 20, page_size=1 << 11), INVALID,
     "num_pages x page_size = 2147483648 slots do not fit slot_mapping's int32"),
    ("x_dtype fp8", lambda: valid(x_dtype=DType.FP8_E4M3), INVALID, "x_dtype must be FLASHPREFILL_DTYPE_BF16 or _FP32"),
    ("x NULL", lambda: valid(x=None), INVALID, "x is NULL"),
    ("codes NULL", lambda: valid(codes=None), INVALID, "codes is NULL"),
    ("slot_mapping NULL", lambda: valid(slot_mapping=None), INVALID, "slot_mapping is NULL"),
    ("exponents NULL", lambda: valid(exponents=None), INVALID, "exponents is NULL"),
    ("x misaligned", lambda: valid(x=X + 2), INVALID, "x = 0x7f0000000002 is not 16-byte aligned"),
    ("slot_mapping misaligned", lambda: valid(slot_mapping=SLOTS + 2), INVALID,
     "slot_mapping = 0x7f1000000002 is not 4-byte aligned"),
    ("signs misaligned", lambda: valid(signs=SIGNS + 1), INVALID, "signs = 0x7f4000000001 is not 4-byte aligned"),
    ("x_stride_dim", lambda: valid(x_stride_dim=2), INVALID, "x_stride_dim must be 1"),
    ("codes_stride_dim", lambda: valid(codes_stride_dim=0), INVALID, "codes_stride_dim must be 1"),
    ("codes_stride_row odd", lambda: valid(codes_stride_row=2 * 128 + 8), INVALID,
     "codes_stride_row = 264 elements of 1 bytes is not a multiple of 16 bytes"),
    ("pages overlap", lambda: valid(codes_stride_page=16 * 128), INVALID, "codes overlaps itself"),
    ("codes overlaps x", lambda: valid(codes=X + 4096), INVALID, "codes overlaps x"),
    ("exponents inside codes", lambda: valid(exponents=CODES + CACHE_BYTES - 99), INVALID,
     "exponents overlaps x or codes"),
    ("slot_mapping inside codes", lambda: valid(slot_mapping=CODES + 64), INVALID, "slot_mapping overlaps codes"),
    ("slot_mapping over exponents", lambda: valid(slot_mapping=EXPONENTS + 96), INVALID,
     "slot_mapping overlaps exponents"),
    ("dim 144", lambda: valid(dim=144), NOT_SUPPORTED, "dim a multiple of 32 up to 256, got 144"),
    ("dim 288", lambda: valid(dim=288), NOT_SUPPORTED, "got 288"),
]


@pytest.mark.parametrize("make, status, substring", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_arguments(lib, make, status, substring):
    got, message = call(lib, make())
    assert got == status and substring in message, f"{got.name}: {message}"


def test_null_params(lib):
    assert call(lib, None) == (INVALID, "params is NULL")


@pytest.mark.parametrize("make", [valid, lambda: valid(tokens=1, page_size=1, num_pages=1, signs=None),
                                  lambda: valid(dim=256, x_dtype=DType.FP32, page_size=272),
                                  lambda: valid(exponents=CODES + CACHE_BYTES, slot_mapping=CODES + CACHE_BYTES + 100),
                                  lambda: valid(num_pages=(1 << 20) - 1, page_size=1 << 11)])
def test_valid_arguments_reach_the_device_check(lib, make):
    """Valid params (any page size; exponents and slot_mapping right after the cache; 2^31 - 2^11 slots) pass
    validation; the fake pointers (or the missing GPU) stop them at the device check."""
    status, message = call(lib, make())
    assert status in (Status.ERROR_NO_DEVICE, INVALID) and "must be" not in message, f"{status.name}: {message}"


# ---------------------------------------------------------------------------------------------------------------
# The model


def _rows(rng, tokens, heads, dim):
    """N(0,1) rows, each times 2^-8..2^8: the page exponents grow as tokens arrive, re-encoding the codes there."""
    return rng.standard_normal((tokens, heads, dim)) * np.exp2(rng.integers(-8, 9, (tokens, 1, 1)))


def _garbage_cache(rng, num_pages, page_size, heads, dim):
    """A cache of random bytes (NaN codes among them), every page empty."""
    codes = rng.integers(0, 256, (num_pages, page_size, heads, dim)).astype(np.uint8)
    return codes, np.full((num_pages, heads), EMPTY, np.int8)


def sequence_slots(rng, lengths, num_pages, page_size):
    """Slots of sequences of `lengths` tokens, each on its own random pages: [slots of sequence s] (int arrays)."""
    pages = rng.permutation(num_pages)
    slots, used = [], 0
    for length in lengths:
        count = -(-length // page_size)
        own = pages[used:used + count]
        used += count
        token = np.arange(length)
        slots.append(own[token // page_size] * page_size + token % page_size)
    return slots


def _unit_bound(y, exponent):
    """The largest error a stored value may have (include/flashprefill.h): half the e4m3 unit of y where its code at
    `exponent` is normal, the subnormal unit 2^(exponent - 9) otherwise."""
    scale = np.ldexp(1.0, exponent.astype(np.int32))
    magnitude = np.abs(y) / scale
    normal = magnitude >= 2.0**-6
    half_unit = np.ldexp(1.0, np.floor(np.log2(np.where(normal, magnitude, 1.0))).astype(np.int32) - 4)
    return np.where(normal, half_unit, 2.0**-9) * scale, normal


@pytest.mark.parametrize("page_size", [1, 16, 48])
@pytest.mark.parametrize("rotate", [False, True])
def test_one_token_at_a_time_ends_where_all_at_once_does(rng, rotate, page_size):
    """Sequences appended a token per call (every sequence's next token in one call, as a decode step) and written
    whole in one call: the same exponents; every value within one e4m3 unit of the final exponent (half a unit where
    its code is normal); the same codes wherever the value is normal at that exponent; exponents that grew on the
    way (codes re-encoded); pages no token went to as they were, and at once the rows no token went to."""
    heads, dim, num_pages = 2, 64, 40
    lengths = [int(n) for n in rng.integers(1, 3 * page_size + 2, 4)]
    slots = sequence_slots(rng, lengths, num_pages, page_size)
    x = [_rows(rng, n, heads, dim) for n in lengths]
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if rotate else None
    before = _garbage_cache(rng, num_pages, page_size, heads, dim)
    at_once = paged.quantize_paged_model(np.concatenate(x), np.concatenate(slots), *before, signs)
    stepped, grew = before, False
    for step in range(max(lengths)):
        live = [s for s in range(len(lengths)) if step < lengths[s]]
        previous = stepped[1]
        stepped = paged.quantize_paged_model(np.stack([x[s][step] for s in live]),
                                             np.array([slots[s][step] for s in live]), *stepped, signs)
        grew |= bool(((previous != EMPTY) & (stepped[1] > previous)).any())
    np.testing.assert_array_equal(stepped[1], at_once[1])
    assert grew or page_size == 1, "no page's exponent grew: nothing was re-encoded"
    all_slots = np.concatenate(slots)
    page_of, row_of = all_slots // page_size, all_slots % page_size
    y = prepare.transform(np.concatenate(x)[None], signs)[0].astype(np.float64)
    exponent = at_once[1][page_of][:, :, None]
    bound, normal = _unit_bound(y, exponent)
    for cache in (stepped, at_once):
        excess = np.abs(paged.dequantize_paged(*cache)[page_of, row_of] - y) - bound
        assert (excess <= 0).all(), f"{(excess > 0).sum()} values past the bound, worst {excess.max():.3g}"
    np.testing.assert_array_equal(stepped[0][page_of, row_of][normal], at_once[0][page_of, row_of][normal])
    unwritten = np.ones((num_pages, page_size), bool)
    unwritten[page_of, row_of] = False
    np.testing.assert_array_equal(at_once[0][unwritten], before[0][unwritten])  # empty pages: nothing re-encoded
    untouched = np.setdiff1d(np.arange(num_pages), page_of)
    np.testing.assert_array_equal(stepped[0][untouched], before[0][untouched])
    assert (stepped[1][untouched] == EMPTY).all()


@pytest.mark.parametrize("page_size", [16, 64])
def test_a_prompt_at_once_is_the_block_quantizer_with_pages_as_blocks(rng, page_size):
    """A whole prompt written at once into empty pages: per page, the exponents and codes of fp8.quantize_blocks with
    blocks of page_size tokens (inputs whose blocks have no span floor and no zeros), the pages in any order; the
    rows of its last page past the prompt untouched."""
    heads, dim, length, num_pages = 3, 128, 5 * page_size - 3, 12
    x = rng.standard_normal((length, heads, dim))
    slots = sequence_slots(rng, [length], num_pages, page_size)[0]
    codes, exponents = _garbage_cache(rng, num_pages, page_size, heads, dim)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31)))
    new_codes, new_exponents = paged.quantize_paged_model(x, slots, codes, exponents, signs)
    block_codes, block_exponents = fp8.quantize_blocks(prepare.transform(x[None], signs), page_size)
    pages = slots[::page_size] // page_size
    np.testing.assert_array_equal(new_exponents[pages], block_exponents[0].T)
    np.testing.assert_array_equal(new_codes[slots // page_size, slots % page_size], block_codes[0])
    last_rows = slots[-1] % page_size + 1
    np.testing.assert_array_equal(new_codes[pages[-1], last_rows:], codes[pages[-1], last_rows:])


def test_page_exponent_rules():
    """Zero rows into an empty page: -127; a later nonzero row raises it, the zeros stay zero; a smaller row keeps
    the page's exponent (and loses digits there); inf or NaN: 0 (and 448 / the NaN code)."""
    dim, page_size = 32, 4
    codes, exponents = np.full((3, page_size, 1, dim), 0x55, np.uint8), np.full((3, 1), EMPTY, np.int8)
    step = paged.quantize_paged_model(np.zeros((1, 1, dim)), [0], codes, exponents)
    assert step[1][0, 0] == -127 and (step[0][0, 0] == 0).all() and (step[0][0, 1:] == 0x55).all()
    one = np.zeros((1, 1, dim))
    one[0, 0, 0] = 1.0  # e = -8 (1 <= 448 * 2^-8)
    step = paged.quantize_paged_model(one, [1], *step)
    assert step[1][0, 0] == -8 and (step[0][0, 0] == 0).all() and step[0][0, 1, 0, 0] == 0x78  # 256: 1 * 2^8
    step = paged.quantize_paged_model(one * 2.0**-20, [2], *step)  # needs -28; keeps -8: 2^-12 is code 0
    assert step[1][0, 0] == -8 and step[0][0, 2, 0, 0] == 0 and step[0][0, 1, 0, 0] == 0x78
    special = np.ones((2, 1, dim))
    special[0, 0, 3], special[1, 0, 5] = np.inf, np.nan
    step = paged.quantize_paged_model(special, [4, 9], *step)
    assert step[1][1, 0] == 0 and step[1][2, 0] == 0
    assert step[0][1, 0, 0, 3] == fp8.E4M3_MAX_CODE and step[0][2, 1, 0, 5] == fp8.E4M3_NAN_CODE


def test_reencoding_divides_by_a_power_of_two(rng):
    """The page's codes at a grown exponent: e4m3(decode(code) 2^-shift) with round to nearest even, as ml_dtypes
    rounds; exact for normal results; NaN codes give 0x7f; shifts past 40 binades give +-0."""
    codes = np.arange(256, dtype=np.uint8)
    finite = (codes & 0x7F) != fp8.E4M3_NAN_CODE
    for shift in (0, 1, 2, 3, 5, 9, 12, 40, 200):
        got = paged.reencode(codes, shift)
        expected = (fp8.e4m3_decode(codes).astype(np.float64) * 2.0**-shift).astype(ml_dtypes.float8_e4m3fn)
        np.testing.assert_array_equal(got[finite], expected.view(np.uint8)[finite])
        assert (got[~finite] == fp8.E4M3_NAN_CODE).all()
    assert paged.reencode(np.array([0x03, 0x05, 0x83], np.uint8), 1).tolist() == [0x02, 0x02, 0x82]  # 1.5 -> 2 ...
    assert (paged.reencode(codes[finite], 200) & 0x7F == 0).all()


def test_skipped_tokens_write_nothing(rng):
    """Slots < 0 (vLLM's padding) and past the cache are skipped: the cache as if they were not there."""
    heads, dim, num_pages, page_size = 2, 32, 4, 8
    x = rng.standard_normal((5, heads, dim))
    slots = np.array([-1, 3, 4, num_pages * page_size, 9])
    cache = _garbage_cache(rng, num_pages, page_size, heads, dim)
    with_skips = paged.quantize_paged_model(x, slots, *cache)
    kept = slots >= 0
    kept[3] = False
    without = paged.quantize_paged_model(x[kept], slots[kept], *cache)
    np.testing.assert_array_equal(with_skips[0], without[0])
    np.testing.assert_array_equal(with_skips[1], without[1])
    assert (with_skips[1][2:] == EMPTY).all()
