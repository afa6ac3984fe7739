"""The conversions of gpu_arrays.py, which the GPU suites run on CuPy arrays, checked here on numpy arrays (the
same code) against ml_dtypes, bit for bit, over every code and random float32 values with their specials."""
import ml_dtypes
import numpy as np
import pytest

import gpu_arrays as ga


def _specials_and_random(rng):
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 448.0, 464.0, -500.0, 2.0**-9, 2.0**-10,
                         3 * 2.0**-11, 1e-45, 3.4e38, 65504.0], np.float32)
    spread = (rng.standard_normal(4096) * np.exp2(rng.integers(-140, 126, 4096))).astype(np.float32)
    halfway = np.arange(1 << 16, dtype=np.uint32) << 16 | 0x8000  # ties between two bfloat16 values
    return np.concatenate([specials, spread, halfway.view(np.float32)])


def test_to_bf16_is_ml_dtypes_round_to_nearest_even(rng):
    x = _specials_and_random(rng)
    got = ga.to_bf16(x)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16)
    number = ~np.isnan(x)
    assert got.dtype == ga.BF16
    assert np.array_equal(ga.bits(got)[number], ga.bits(want)[number])
    assert (ga.bits(got)[~number] == ga.BF16_NAN_BITS).all()


def test_to_float_is_exact_for_every_code():
    every_bf16 = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    every_e4m3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    for codes in (every_bf16, every_e4m3):
        with np.errstate(invalid="ignore"):  # bfloat16's signalling NaNs
            got, want, got64 = ga.to_float(codes), codes.astype(np.float32), ga.to_f64(codes)
            assert np.array_equal(got, want, equal_nan=True)
            assert np.array_equal(got64, want.astype(np.float64), equal_nan=True)


def test_to_e4m3_within_range_is_ml_dtypes(rng):
    x = _specials_and_random(rng)
    in_range = np.abs(x) < 464  # ml_dtypes gives NaN past it; e4m3_encode saturates (documented in fp8)
    got = ga.to_e4m3(x)
    assert got.dtype == ga.E4M3
    assert np.array_equal(ga.bits(got)[in_range], ga.bits(x[in_range].astype(ml_dtypes.float8_e4m3fn)))


@pytest.mark.parametrize("step", [1, 2], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [ga.BF16, ga.E4M3, np.dtype(np.float32)])
def test_copy_and_equal(rng, dtype, step):
    x = rng.standard_normal((3, 5)).astype(dtype)[:, ::step]
    y = ga.copy(x)
    assert y.flags.c_contiguous and ga.equal(x, y)
    ga.bits(y)[0, 0] ^= 1
    assert not ga.equal(x, y)
    assert ga.all_finite(x) and not ga.all_finite(np.full(3, np.nan, np.float32).astype(dtype))
