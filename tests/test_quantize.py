"""flashprefill_quantize without a GPU: its argument validation through the real build/libflashprefill.so (fake
pointers, never dereferenced), and the numpy model it must match bit for bit (prepare.transform,
fp8.quantize_blocks). The GPU side is tests/test_quantize_gpu.py."""
import ctypes

import numpy as np
import pytest

from flashprefill import _lib, fp8, prepare
from flashprefill._params import DType, QuantizeParams, Status, VLayout

INVALID = Status.ERROR_INVALID_ARGUMENT
NOT_SUPPORTED = Status.ERROR_NOT_SUPPORTED
X, CODES, EXPONENTS, SIGNS, SUBTRACT = 0x7F0000000000, 0x7F1000000000, 0x7F2000000000, 0x7F3000000000, 0x7F4000000000


@pytest.fixture(scope="module")
def lib():
    return _lib.lib()


def valid(batch=2, seqlen=300, heads=4, dim=128, x_dtype=DType.BF16):
    p = QuantizeParams(x=X, codes=CODES, exponents=EXPONENTS, signs=SIGNS, subtract=SUBTRACT, batch=batch,
                       seqlen=seqlen, heads=heads, dim=dim, block_tokens=128, x_dtype=x_dtype)
    for prefix in ("x", "codes"):
        for axis, stride in (("batch", seqlen * heads * dim), ("seq", heads * dim), ("head", dim), ("dim", 1)):
            setattr(p, f"{prefix}_stride_{axis}", stride)
    return p


def prepared(seqlen=300, heads=4, dim=128, **fields):
    """valid() with codes in v's prepared layout: rows of round_up(seqlen, 16) positions, (batch, heads, dim, rows)."""
    p = valid(seqlen=seqlen, heads=heads, dim=dim)
    pitch = -(-seqlen // 16) * 16
    p.codes_layout = VLayout.PREPARED
    p.codes_stride_batch, p.codes_stride_seq = heads * dim * pitch, 1
    p.codes_stride_head, p.codes_stride_dim = dim * pitch, pitch
    for name, value in fields.items():
        setattr(p, name, value)
    return p


def call(lib, p):
    status = Status(lib.flashprefill_quantize(ctypes.byref(p) if p is not None else None, None))
    return status, lib.flashprefill_last_error().decode()


def changed(**fields):
    def make():
        p = valid()
        for name, value in fields.items():
            setattr(p, name, value)
        return p
    return make


CASES = [
    *[(f"{name}=0", changed(**{name: 0}), INVALID, f"{name} must be > 0, got 0")
      for name in ("batch", "seqlen", "heads", "dim", "block_tokens")],
    ("x_dtype fp8", changed(x_dtype=DType.FP8_E4M3), INVALID, "x_dtype must be FLASHPREFILL_DTYPE_BF16 or _FP32"),
    ("x NULL", changed(x=None), INVALID, "x is NULL"),
    *[(f"struct_bytes={value}", changed(struct_bytes=value), INVALID,
       f"flashprefill_quantize_params struct is {value} bytes (its struct_bytes); this library (version ")
      for value in (0, 136, ctypes.sizeof(QuantizeParams) + 8)],  # 136: 0.7.1's struct
    ("codes NULL", changed(codes=None), INVALID, "codes is NULL"),
    ("exponents NULL", changed(exponents=None), INVALID, "exponents is NULL"),
    ("x misaligned", changed(x=X + 2), INVALID, "is not 16-byte aligned"),
    ("x_stride_dim", changed(x_stride_dim=2), INVALID, "x_stride_dim must be 1"),
    ("codes_stride_seq odd", changed(codes_stride_seq=4 * 128 + 8), INVALID,
     "codes_stride_seq = 520 elements of 1 bytes is not a multiple of 16 bytes"),
    ("codes overlaps itself", changed(codes_stride_head=64), INVALID, "codes overlaps itself"),
    ("codes overlaps x", changed(codes=X + 4096), INVALID, "codes overlaps x"),
    ("exponents inside codes", changed(exponents=CODES + 7), INVALID, "exponents overlaps x or codes"),
    ("signs misaligned", changed(signs=SIGNS + 2), INVALID, "signs = 0x7f3000000002 is not 4-byte aligned"),
    ("subtract misaligned", changed(subtract=SUBTRACT + 1), INVALID, "subtract = 0x7f4000000001 is not 4-byte"),
    *[(f"code_max {value}", changed(code_max=value), INVALID,
       f"code_max must be 0 (448) or a normal e4m3 value in [2^-6, 448], got {text}")
      for value, text in ((1.1, "1.1"), (-1.125, "-1.125"), (float("nan"), "nan"), (float("inf"), "inf"),
                          (480.0, "480"), (2.0**-7, "0.0078125"), (1.0625, "1.0625"))],
    ("dim 144", lambda: valid(dim=144), NOT_SUPPORTED, "dim a multiple of 32 up to 256, got 144"),
    ("dim 512", lambda: valid(dim=512), NOT_SUPPORTED, "got 512"),
    ("codes_layout 2", changed(codes_layout=2), INVALID, "codes_layout = 2 is not a flashprefill_v_layout"),
    ("prepared, seq stride", lambda: prepared(codes_stride_seq=128), INVALID,
     "codes_stride_seq must be 1 (the PREPARED layout: each row of keys contiguous), got 128"),
    ("prepared, pitch of 296", lambda: prepared(codes_stride_dim=296), INVALID,
     "codes_stride_dim = 296 elements of 1 bytes is not a multiple of 16 bytes"),
    ("prepared, rows overlap", lambda: prepared(codes_stride_dim=288), INVALID, "codes overlaps itself"),
    ("prepared, blocks of 200", lambda: prepared(block_tokens=200), NOT_SUPPORTED,
     "codes_layout PREPARED takes block_tokens a multiple of 16 (each group of 16 positions within one block), got "
     "200"),
]


@pytest.mark.parametrize("make, status, substring", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_arguments(lib, make, status, substring):
    got, message = call(lib, make())
    assert got == status and substring in message, f"{got.name}: {message}"


def test_null_params(lib):
    assert call(lib, None) == (INVALID, "params is NULL")


@pytest.mark.parametrize("make", [valid, lambda: valid(dim=192, x_dtype=DType.FP32), lambda: valid(seqlen=1),
                                  changed(code_max=1.125), changed(code_max=0.75), changed(code_max=448.0),
                                  changed(code_max=2.0**-6), prepared, lambda: prepared(seqlen=1, dim=192),
                                  lambda: prepared(block_tokens=16), lambda: prepared(codes_stride_dim=304)])
def test_valid_arguments_reach_the_device_check(lib, make):
    """Valid params pass validation; the fake pointers (or the missing GPU) stop them at the device check."""
    status, message = call(lib, make())
    assert status in (Status.ERROR_NO_DEVICE, INVALID) and "must be" not in message, f"{status.name}: {message}"


@pytest.mark.parametrize("dim", [1, 3, 32, 64, 128, 192, 200])
def test_transform_is_the_rotation(rng, dim):
    x = rng.standard_normal((2, 5, 3, dim))
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31)))
    h = signs[:, None] * prepare.hadamard(dim, 0) / prepare.rotation_signs(dim, 0)[:, None]
    y = prepare.transform(x, signs)  # float32 butterflies: a few float32 roundings per element
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, x @ h, atol=4e-6 * np.abs(x).max() * np.log2(2 * dim))
    mean = prepare.key_mean(x)
    np.testing.assert_array_equal(prepare.transform(x, subtract=mean), x.astype(np.float32) - mean[:, None])


def test_block_exponent_rules():
    """Zero blocks take the head's largest exponent (0 for an all-zero head); tiny values clamp at -127; a
    block more than EXPONENT_SPAN below its head's largest is raised to that floor."""
    x = np.zeros((1, 12, 3, 32), np.float32)
    x[0, 0:4, 0] = 1.0          # head 0: e = -8 (amax 1: 1 <= 448 * 2^-8)
    x[0, 8:12, 0] = 2.0**-100   # head 0, block 2: natural e -108, raised to -8 - 64
    x[0, 0:4, 1] = 1e-40        # head 1: float32 subnormal, clamped to -127; the zero blocks take -127 too
    _, exponents = fp8.quantize_blocks(x, block_tokens=4)
    assert exponents.tolist() == [[[-8, -8, -72], [-127, -127, -127], [0, 0, 0]]]


def test_nonfinite_blocks_count_as_zero():
    """A block holding inf or NaN takes e = 0 before the span floor: it counts toward its head's largest exponent and
    is raised like the others (the GPU quantizer's rule: cuda/quantize.cu finish_exponents)."""
    x = np.zeros((1, 12, 2, 32), np.float32)
    x[0, 0:4, 0] = 2.0**80       # head 0: e = 72
    x[0, 4:8, 0, 3] = np.inf     # inf: 0, raised to 72 - 64
    x[0, 0:4, 1, 1] = np.nan     # head 1: NaN counts as 0, so the head's largest is 0 ...
    x[0, 4:8, 1] = 1.0           # ... above this block's -8, and the zero blocks take 0
    codes, exponents = fp8.quantize_blocks(x, block_tokens=4)
    assert exponents.tolist() == [[[72, 8, 72], [0, -8, 0]]]
    assert codes[0, 4, 0, 3] == fp8.E4M3_MAX_CODE and codes[0, 0, 1, 1] == fp8.E4M3_NAN_CODE


def test_block_exponents_for_a_smaller_code_max(rng):
    """code_max = 1.125 (q's codes for float16 scores at dim 128): e is the smallest integer with amax <= 1.125 *
    2^e (boundaries exact), and every block's codes reach code_max / 2 (rounding may land on it) but never pass
    code_max."""
    x = np.zeros((1, 8, 1, 32), np.float32)
    for block, amax in enumerate((1.0, 1.125, 1.126, 2.25, 2.2501, 0.5625)):
        x[0, block, 0, 0] = -amax if block % 2 else amax
    _, exponents = fp8.quantize_blocks(x, block_tokens=1, code_max=1.125)
    assert exponents[0, 0, :6].tolist() == [0, 0, 1, 1, 2, -1]
    y = rng.standard_normal((2, 96, 3, 64)) * np.exp2(rng.integers(-20, 20, (2, 96, 3, 1)))
    for code_max in (1.125, 0.75, 448.0):
        codes, exponents = fp8.quantize_blocks(y, block_tokens=32, code_max=code_max)
        values = np.abs(fp8.e4m3_decode(codes)).reshape(2, 3, 32, 3, 64).max(axis=(2, 4)).transpose(0, 2, 1)
        assert (values <= code_max).all() and (values >= code_max / 2).all(), code_max


@pytest.mark.parametrize("code_max", [1.1, 0.0, 500.0, 2.0**-7])
def test_model_refuses_a_code_max_outside_e4m3(code_max):
    with pytest.raises(ValueError, match="code_max must be a normal e4m3 value"):
        fp8.quantize_blocks(np.ones((1, 4, 1, 32)), 4, code_max)
