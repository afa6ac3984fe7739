"""The array adapter (python/flashprefill/_arrays.py) on paths that need no GPU: DeviceArray, fake
__cuda_array_interface__ objects, fake DLPack producers built with ctypes, host arrays, dtypes, strides, streams.
"""
import ctypes
import sys
import types

import ml_dtypes
import numpy
import pytest

from flashprefill import _arrays
from flashprefill._arrays import DeviceArray, adapt

PTR = 0x7F0000000000


# ---------------------------------------------------------------------------------------------------------
# DeviceArray and __cuda_array_interface__

def test_device_array_descriptor():
    array = DeviceArray(PTR, (2, 5, 3, 64), "bfloat16", device=1)
    t = adapt(array, "q", stream=7)
    assert (t.ptr, t.shape, t.strides, t.dtype, t.device) == (PTR, (2, 5, 3, 64), (960, 192, 64, 1), "bfloat16", 1)
    assert t.source is array and t.is_contiguous()


def test_device_array_element_strides_round_trip():
    array = DeviceArray(PTR, (2, 5, 3, 64), ml_dtypes.float8_e4m3fn, strides=(4096, 256, 64, 1))
    cai = array.__cuda_array_interface__
    assert (cai["typestr"], cai["strides"], cai["data"], cai["version"]) == (
        numpy.dtype(ml_dtypes.float8_e4m3fn).str, (4096, 256, 64, 1), (PTR, False), 3)
    t = adapt(array, "k", stream=0)
    assert (t.strides, t.dtype) == ((4096, 256, 64, 1), "float8_e4m3fn")
    assert not t.is_contiguous()


@pytest.mark.parametrize("dtype, name", [
    ("bfloat16", "bfloat16"), (ml_dtypes.bfloat16, "bfloat16"), (numpy.dtype(ml_dtypes.bfloat16), "bfloat16"),
    ("float8_e4m3fn", "float8_e4m3fn"), (ml_dtypes.float8_e4m3fn, "float8_e4m3fn"),
    (numpy.float32, "float32"), ("int8", "int8"), (numpy.int32, "int32"), ("uint8", "uint8"),
])
def test_dtype_mapping(dtype, name):
    assert _arrays.numpy_dtype(dtype).name == name
    assert adapt(DeviceArray(PTR, (4,), dtype), "x", stream=0).dtype == name


@pytest.mark.parametrize("dtype", ["float16", numpy.float64, ml_dtypes.float8_e5m2, "int64"])
def test_unsupported_dtypes(dtype):
    with pytest.raises(TypeError, match="is not one of bfloat16, float8_e4m3fn, float32, int8, int32, uint8"):
        DeviceArray(PTR, (4,), dtype)


class FakeCAI:
    """A producer known only by its __cuda_array_interface__ (and optionally a numpy .dtype)."""

    def __init__(self, **cai):
        self.__cuda_array_interface__ = {"version": 3, "data": (PTR, False), **cai}


@pytest.fixture
def pointer_device(monkeypatch):
    monkeypatch.setattr(_arrays, "_pointer_device", lambda ptr, name: 3)


def test_cai_byte_strides_become_element_strides(pointer_device):
    t = adapt(FakeCAI(shape=(2, 4, 8), typestr="<f4", strides=(256, 64, 4)), "scale", stream=0)
    assert (t.ptr, t.shape, t.strides, t.dtype, t.device) == (PTR, (2, 4, 8), (64, 16, 1), "float32", 3)


def test_cai_contiguous_when_strides_absent(pointer_device):
    assert adapt(FakeCAI(shape=(3, 5), typestr="|i1"), "e", stream=0).strides == (5, 1)


def test_cai_stride_not_multiple_of_element_rejected(pointer_device):
    with pytest.raises(ValueError, match=r"q: stride 6 bytes of dim 1 is not a multiple of the element size \(4"):
        adapt(FakeCAI(shape=(2, 3), typestr="<f4", strides=(24, 6)), "q", stream=0)


def test_cai_void_typestr_is_ambiguous(pointer_device):
    with pytest.raises(TypeError, match="ambiguous"):
        adapt(FakeCAI(shape=(4,), typestr="<V2"), "q", stream=0)


def test_cai_ml_dtypes_dtype_resolves_void_typestr(pointer_device):
    array = FakeCAI(shape=(4,), typestr="<V2")
    array.dtype = numpy.dtype(ml_dtypes.bfloat16)
    assert adapt(array, "q", stream=0).dtype == "bfloat16"


@pytest.mark.parametrize("typestr", [">f4", "<f2", "<i8"])
def test_cai_unsupported_typestr(pointer_device, typestr):
    with pytest.raises(TypeError, match="expected one of"):
        adapt(FakeCAI(shape=(4,), typestr=typestr), "q", stream=0)


def test_cai_read_only_output_rejected(pointer_device):
    array = FakeCAI(shape=(4,), typestr="<f4")
    array.__cuda_array_interface__["data"] = (PTR, True)
    assert adapt(array, "v", stream=0).ptr == PTR
    with pytest.raises(ValueError, match="out is read-only"):
        adapt(array, "out", stream=0, writable=True)


def test_cai_masked_rejected(pointer_device):
    with pytest.raises(TypeError, match="masked"):
        adapt(FakeCAI(shape=(4,), typestr="<f4", mask=object()), "q", stream=0)


@pytest.mark.parametrize("producer, consumer, waits", [
    (None, 5, False),  # v3: no synchronisation needed
    (5, 5, False),
    (1, 0, False),     # both the legacy default stream
    (0, 1, False),
    (5, 7, True),
    (2, 0, True),      # per-thread default vs legacy default
])
def test_cai_stream_is_honoured(pointer_device, monkeypatch, producer, consumer, waits):
    waited = []
    monkeypatch.setattr(_arrays, "wait_stream", lambda p, c: waited.append((p, c)))
    adapt(FakeCAI(shape=(4,), typestr="<f4", stream=producer), "q", stream=consumer)
    assert waited == ([(producer, consumer)] if waits else [])


def test_cai_no_wait_without_a_consumer_stream(pointer_device, monkeypatch):
    monkeypatch.setattr(_arrays, "wait_stream", lambda p, c: pytest.fail("must not wait"))
    adapt(FakeCAI(shape=(4,), typestr="<f4", stream=5), "q", stream=None)


# ---------------------------------------------------------------------------------------------------------
# Host arrays and non-arrays

@pytest.mark.parametrize("host", [numpy.zeros((2, 3), numpy.float32), numpy.zeros(4, ml_dtypes.bfloat16)],
                         ids=["numpy float32", "numpy bfloat16"])
def test_host_arrays_rejected(host):
    with pytest.raises(TypeError, match="q is a host array; pass a device array"):
        adapt(host, "q", stream=0)
    with pytest.raises(TypeError, match="q is a host array"):
        _arrays.device_of(host, "q")


def test_non_arrays_rejected():
    with pytest.raises(TypeError, match="k is None"):
        adapt(None, "k", stream=0)
    with pytest.raises(TypeError, match="k: list is not a device array"):
        adapt([1.0, 2.0], "k", stream=0)


# ---------------------------------------------------------------------------------------------------------
# DLPack, with producers built from ctypes

# PyObject *PyCapsule_New(void *pointer, const char *name, PyCapsule_Destructor destructor);
capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
CAPSULE_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}  # live as long as the capsules
KDL_BFLOAT, KDL_FLOAT, KDL_FLOAT8_E4M3FN = 4, 2, 10


class FakeDLPackProducer:
    """Exports one DLTensor through __dlpack__ and records the stream it was asked for and the deleter calls."""

    def __init__(self, shape, strides, dtype=(KDL_BFLOAT, 16, 1), device=(_arrays.KDL_CUDA, 0), byte_offset=0,
                 versioned=True, flags=0, version=(1, 1), legacy_signature=False):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        self.dtype, self.device, self.byte_offset = dtype, device, byte_offset
        self.versioned, self.flags, self.version = versioned, flags, version
        self.legacy_signature = legacy_signature
        self.deleted, self.streams, self.capsule = [], [], None
        self.deleter = _arrays.DLPACK_DELETER(self.deleted.append)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        if self.legacy_signature and kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.streams.append(stream)
        versioned = self.versioned and kwargs.get("max_version", (0, 0)) >= (1, 0)
        dl_tensor = _arrays.DLTensor(
            data=PTR, device=_arrays.DLDevice(*self.device), ndim=len(self.shape),
            dtype=_arrays.DLDataType(*self.dtype), shape=self.shape,
            strides=self.strides, byte_offset=self.byte_offset)
        if versioned:
            self.managed = _arrays.DLManagedTensorVersioned(
                version=_arrays.DLPackVersion(*self.version), deleter=self.deleter, flags=self.flags,
                dl_tensor=dl_tensor)
        else:
            self.managed = _arrays.DLManagedTensor(dl_tensor=dl_tensor, deleter=self.deleter)
        self.capsule = capsule_new(ctypes.addressof(self.managed), CAPSULE_NAMES[versioned], None)
        return self.capsule


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_dlpack_import_and_release(versioned):
    producer = FakeDLPackProducer((2, 7, 4, 64), (3584, 512, 64, 1), byte_offset=256, versioned=versioned)
    t = adapt(producer, "q", stream=0x1234)
    assert (t.ptr, t.shape, t.strides, t.dtype, t.device) == (
        PTR + 256, (2, 7, 4, 64), (3584, 512, 64, 1), "bfloat16", 0)
    assert t.source is producer
    assert producer.streams == [0x1234]
    assert _arrays._capsule_get_name(producer.capsule) == (b"used_dltensor_versioned" if versioned
                                                           else b"used_dltensor")
    assert producer.deleted == []
    t.release()
    assert producer.deleted == [ctypes.addressof(producer.managed)]
    t.release()
    assert len(producer.deleted) == 1


def test_dlpack_producer_without_max_version():
    producer = FakeDLPackProducer((4,), (1,), legacy_signature=True)
    t = adapt(producer, "q", stream=9)
    assert t.shape == (4,) and producer.streams == [9]
    t.release()
    assert len(producer.deleted) == 1


@pytest.mark.parametrize("stream, asked", [(0, 1), (1, 1), (2, 2), (0x55, 0x55), (None, -1)])
def test_dlpack_stream_spelling(stream, asked):
    """DLPack names the legacy default stream 1 (0 is refused there); -1 asks for no synchronisation."""
    producer = FakeDLPackProducer((4,), (1,))
    adapt(producer, "q", stream=stream).release()
    assert producer.streams == [asked]


@pytest.mark.parametrize("dtype, name", [((KDL_BFLOAT, 16, 1), "bfloat16"),
                                         ((KDL_FLOAT8_E4M3FN, 8, 1), "float8_e4m3fn"),
                                         ((KDL_FLOAT, 32, 1), "float32"), ((0, 8, 1), "int8"),
                                         ((0, 32, 1), "int32"), ((1, 8, 1), "uint8")])
def test_dlpack_dtypes(dtype, name):
    t = adapt(FakeDLPackProducer((4,), (1,), dtype=dtype), "x", stream=0)
    assert t.dtype == name
    t.release()


@pytest.mark.parametrize("dtype", [(KDL_FLOAT, 16, 1), (KDL_BFLOAT, 16, 2), (12, 8, 1), (0, 64, 1)],
                         ids=["float16", "bfloat16x2", "float8_e5m2", "int64"])
def test_dlpack_unsupported_dtype_rejected_and_released(dtype):
    producer = FakeDLPackProducer((4,), (1,), dtype=dtype)
    with pytest.raises(TypeError, match="DLPack dtype"):
        adapt(producer, "q", stream=0)
    assert len(producer.deleted) == 1


def test_dlpack_null_strides_mean_row_major():
    t = adapt(FakeDLPackProducer((2, 3, 4), None, versioned=False), "q", stream=0)
    assert t.strides == (12, 4, 1)
    t.release()


def test_dlpack_read_only_output_rejected():
    producer = FakeDLPackProducer((4,), (1,), flags=_arrays.DLPACK_FLAG_READ_ONLY)
    with pytest.raises(ValueError, match="out is read-only"):
        adapt(producer, "out", stream=0, writable=True)
    assert len(producer.deleted) == 1


def test_dlpack_major_version_mismatch_released():
    producer = FakeDLPackProducer((4,), (1,), version=(2, 0))
    with pytest.raises(TypeError, match="major version 2"):
        adapt(producer, "q", stream=0)
    assert len(producer.deleted) == 1


@pytest.mark.parametrize("device, error", [((_arrays.KDL_CPU, 0), "q is a host array"),
                                           ((_arrays.KDL_CUDA_HOST, 0), "q is a host array"),
                                           ((4, 0), "DLPack device type 4")])
def test_dlpack_non_gpu_devices_rejected(device, error):
    producer = FakeDLPackProducer((4,), (1,), device=device)
    with pytest.raises(TypeError, match=error):
        adapt(producer, "q", stream=0)
    assert producer.streams == []  # refused before export


def test_dlpack_device_of():
    assert _arrays.device_of(FakeDLPackProducer((4,), (1,), device=(_arrays.KDL_CUDA, 3)), "q") == 3


@pytest.mark.parametrize("device, backend", [((_arrays.KDL_CUDA, 0), "cuda"), ((_arrays.KDL_ROCM, 1), "hip")])
def test_backend_of_dlpack_device(device, backend):
    assert _arrays.backend_of(FakeDLPackProducer((4,), (1,), device=device), "q") == backend


def test_rocm_arrays_go_to_the_gfx950_library():
    """torch-on-ROCm-like arrays (DLPack kDLROCM) reach libflashprefill_gfx950.so: here, without ROCm, its
    clean NO_DEVICE, not the CUDA library's answer."""
    import flashprefill as fp
    from flashprefill import _lib
    if not any(path.exists() for path in _lib.candidates("hip")):
        pytest.fail("build/libflashprefill_gfx950.so is missing: run `make amd`")
    rocm = (_arrays.KDL_ROCM, 0)
    shape, strides = (1, 64, 2, 128), (64 * 2 * 128, 2 * 128, 128, 1)
    q, k, v = (FakeDLPackProducer(shape, strides, device=rocm) for _ in range(3))
    out = FakeDLPackProducer(shape, strides, device=rocm, byte_offset=1 << 20)  # apart from the inputs
    with pytest.raises(fp.Error) as e:
        fp.attention(q, k, v, out=out, stream=0)
    assert e.value.status == fp.Status.ERROR_NO_DEVICE and "libamdhip64" in e.value.message


def test_dlpack_import_released_when_dropped():
    producer = FakeDLPackProducer((4,), (1,))
    adapt(producer, "q", stream=0)
    assert len(producer.deleted) == 1  # CPython frees the unreferenced import at once


def test_consumed_capsule_rejected():
    producer = FakeDLPackProducer((4,), (1,))
    capsule = producer.__dlpack__(stream=1, max_version=(1, 1))
    _arrays.DLPackImport(capsule, producer, "q").release()
    with pytest.raises(TypeError, match="used_dltensor_versioned"):
        _arrays.DLPackImport(capsule, producer, "q")


# ---------------------------------------------------------------------------------------------------------
# Streams

def test_explicit_streams():
    assert _arrays.resolve_stream(42, None, 0) == 42
    assert _arrays.resolve_stream(types.SimpleNamespace(ptr=43), None, 0) == 43          # CuPy
    assert _arrays.resolve_stream(types.SimpleNamespace(cuda_stream=44), None, 0) == 44  # torch
    with pytest.raises(TypeError, match="stream must be"):
        _arrays.resolve_stream("default", None, 0)


def test_default_stream_without_cupy_or_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert _arrays.resolve_stream(None, DeviceArray(PTR, (4,), "int8"), 0) == 0


def test_default_stream_is_cupys_current(monkeypatch):
    current = types.SimpleNamespace(cuda=types.SimpleNamespace(get_current_stream=lambda device: types.SimpleNamespace(
        ptr=0x77 + device)))
    monkeypatch.setitem(sys.modules, "cupy", current)
    assert _arrays.resolve_stream(None, DeviceArray(PTR, (4,), "int8"), 2) == 0x79
