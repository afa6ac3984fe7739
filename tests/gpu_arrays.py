"""Arrays for the GPU suites through CuPy, the project's stack (torch is needed only for the comparisons with torch's
own kernels): the library's dtypes on the device, conversions with round to nearest even, copies both ways.

CuPy holds bfloat16 and float8_e4m3fn as ml_dtypes dtypes over unsigned storage, without arithmetic, so the
conversions work on the bits. Every conversion takes numpy arrays as well as CuPy ones (the same code, through
fp8.array_module), which tests/test_gpu_arrays.py checks on the host against ml_dtypes.
"""
import ml_dtypes
import numpy as np

from flashprefill import fp8

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
_STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
BF16_NAN_BITS = 0x7FC0


def bits(x):
    """x's elements as unsigned integers of their size (a view)."""
    return x.view(_STORAGE[x.dtype.itemsize])


def to_bf16(x):
    """Floats -> bfloat16 (through float32, as torch's .to(bfloat16) of a float32), round to nearest even; NaN
    gives the quiet NaN 0x7fc0 (as torch), infinities stay infinite."""
    xp = fp8.array_module(x)
    word = xp.ascontiguousarray(xp.asarray(x, dtype=xp.float32)).view(xp.uint32)
    rounded = (word + xp.uint32(0x7FFF) + ((word >> 16) & xp.uint32(1))) >> 16
    nan = (word & xp.uint32(0x7FFFFFFF)) > xp.uint32(0x7F800000)
    return xp.where(nan, xp.uint32(BF16_NAN_BITS), rounded).astype(xp.uint16).view(BF16)


def to_e4m3(x):
    """Floats -> float8_e4m3fn through float32, round to nearest even (fp8.e4m3_encode: magnitudes past 448
    saturate, NaN gives the NaN code)."""
    return fp8.e4m3_encode(x).view(E4M3)


def to_float(x, dtype=np.float32):
    """bfloat16, float8_e4m3fn or any numeric array -> float32 (or `dtype`), exactly."""
    xp = fp8.array_module(x)
    if x.dtype == BF16:
        x = (bits(x).astype(xp.uint32) << 16).view(xp.float32)
    elif x.dtype == E4M3:
        x = fp8.e4m3_decode(bits(x))
    return x.astype(dtype)


def to_f64(x):
    return to_float(x, np.float64)


def copy(x):
    """A new contiguous array of x's dtype and values (through its bits: CuPy has no copy kernel for ml_dtypes
    dtypes)."""
    return bits(x).copy(order="C").view(x.dtype)


def equal(a, b):
    """Whether a and b hold the same bits (NaN equal to the same NaN)."""
    xp = fp8.array_module(a)
    return a.shape == b.shape and a.dtype == b.dtype and bool(xp.array_equal(bits(a), bits(b)))


def all_finite(x):
    xp = fp8.array_module(x)
    return bool(xp.isfinite(to_float(x)).all())


# ---------------------------------------------------------------------------------------------------------
# Device only (CuPy imported here, in the call: importing this module needs no GPU)

def cupy():
    import cupy as module
    return module


def to_device(host):
    """A numpy array (ml_dtypes dtypes too) on the current device, same dtype and shape, contiguous."""
    return cupy().asarray(bits(np.ascontiguousarray(host))).view(host.dtype)


def to_host(x):
    """A device array on the host (numpy), same dtype and shape."""
    return cupy().asnumpy(bits(x)).view(x.dtype)


def host_f64(x):
    """A device array on the host as float64."""
    return to_f64(to_host(x))


def full(shape, value, dtype):
    """A new device array of `dtype` (BF16, E4M3 or a numpy dtype) holding `value` everywhere (NaN too)."""
    dtype = np.dtype(dtype)
    one = np.array([value], np.float32)
    code = to_bf16(one) if dtype == BF16 else to_e4m3(one) if dtype == E4M3 else one.astype(dtype)
    return cupy().full(shape, bits(code)[0], bits(code).dtype).view(dtype)


def poisoned_bf16(shape):
    """A bfloat16 output to write, NaN everywhere: an element the kernel leaves unwritten stays NaN."""
    return full(shape, np.nan, BF16)


def randn(shape, seed):
    """float32 N(0, 1) on the device from `seed`."""
    return cupy().random.RandomState(seed).standard_normal(shape, dtype=np.float32)


def randint(low, high, shape, seed):
    """int64 uniform in [low, high) on the device from `seed`."""
    return cupy().random.RandomState(seed).randint(low, high, shape).astype(np.int64)


def synchronize():
    cupy().cuda.runtime.deviceSynchronize()
