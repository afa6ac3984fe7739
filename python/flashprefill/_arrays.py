"""Array adaptation: every kind of device array a caller may pass becomes one `Tensor` descriptor.

Accepted, in this order of preference:
  * CuPy arrays, read through their `__cuda_array_interface__` and their numpy dtype (CuPy carries
    ml_dtypes.bfloat16 / ml_dtypes.float8_e4m3fn as ordinary numpy dtypes);
  * `__dlpack__` producers on a CUDA device (torch tensors: torch refuses `__cuda_array_interface__` for
    bfloat16, while DLPack names bfloat16 and float8_e4m3fn exactly and hands over the stream);
  * anything else with `__cuda_array_interface__` (v0-v3), `DeviceArray` among them.
Host arrays (numpy, CPU tensors) are refused.

Streams. DLPack producers are asked to make the data ready on our stream (`__dlpack__(stream=...)`).
A `__cuda_array_interface__` v3 'stream' entry that differs from ours makes our stream wait for it through
an event (CuPy's runtime bindings), as the interface asks of consumers.
"""
import contextlib
import ctypes
import dataclasses
import functools
import sys

import ml_dtypes
import numpy

from . import _devices

# Element sizes of the dtypes the library takes, by numpy name.
# int32: varlen offsets, lengths and page tables; uint8: the varlen workspace.
ITEMSIZE = {"bfloat16": 2, "float8_e4m3fn": 1, "float32": 4, "int8": 1, "int32": 4, "uint8": 1}
_NUMPY_DTYPES = {
    "bfloat16": numpy.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": numpy.dtype(ml_dtypes.float8_e4m3fn),
    "float32": numpy.dtype(numpy.float32),
    "int8": numpy.dtype(numpy.int8),
    "int32": numpy.dtype(numpy.int32),
    "uint8": numpy.dtype(numpy.uint8),
}
_UNSIGNED_OF_SIZE = {1: numpy.uint8, 2: numpy.uint16, 4: numpy.uint32}


def numpy_dtype(dtype):
    """The numpy dtype of `dtype` (a name of ITEMSIZE, a numpy or ml_dtypes dtype); TypeError otherwise."""
    name = dtype if isinstance(dtype, str) else numpy.dtype(dtype).name
    if name not in _NUMPY_DTYPES:
        raise TypeError(f"dtype {dtype!r} is not one of {', '.join(ITEMSIZE)}")
    return _NUMPY_DTYPES[name]


@functools.lru_cache(maxsize=256)
def contiguous_strides(shape):
    """Row-major strides in elements (shape: a tuple; cached, as each call meets the same few shapes)."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _host_array_error(name):
    return TypeError(f"{name} is a host array; pass a device array (CuPy, torch on CUDA, or DeviceArray)")


class DeviceArray:
    """Device memory given by a raw pointer, for callers without an array library.

    ptr: device address (int); shape: tuple; dtype: 'bfloat16', 'float8_e4m3fn', 'float32', 'int8', 'int32' or the
    matching numpy / ml_dtypes dtype; strides: in ELEMENTS, as in the C ABI (None: row-major);
    device: CUDA device ordinal; owner: any object that keeps the memory alive.
    Exposes `__cuda_array_interface__` (v3, no stream: the caller orders its own work).
    """

    def __init__(self, ptr, shape, dtype, strides=None, device=0, owner=None):
        self.ptr = int(ptr)
        if not 0 <= self.ptr < 2**64:
            raise ValueError(f"ptr = {ptr!r} is not a 64-bit address")
        self.shape = tuple(int(n) for n in shape)
        self.dtype = numpy_dtype(dtype)
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(int(s) for s in strides)
        if len(self.strides) != len(self.shape):
            raise ValueError(f"strides {self.strides} do not match shape {self.shape}")
        self.device = int(device)
        self.owner = owner

    @property
    def __cuda_array_interface__(self):
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "strides": tuple(s * self.dtype.itemsize for s in self.strides),
            "stream": None,
        }

    def __repr__(self):
        return (f"DeviceArray(ptr={self.ptr:#x}, shape={self.shape}, dtype={self.dtype.name}, "
                f"strides={self.strides}, device={self.device})")


@dataclasses.dataclass(frozen=True)
class Tensor:
    """What the C ABI needs of one array. Call release() once the library call has been enqueued."""
    ptr: int
    shape: tuple
    strides: tuple  # in elements
    dtype: str      # a key of ITEMSIZE
    device: int
    source: object  # the caller's object: keeps the memory alive, and tells which library to allocate with
    imported: object = None  # the DLPack import, whose deleter release() calls

    def release(self):
        if self.imported is not None:
            self.imported.release()

    def is_contiguous(self):
        return all(s == c for n, s, c in zip(self.shape, self.strides, contiguous_strides(self.shape)) if n != 1)


# ---------------------------------------------------------------------------------------------------------
# __cuda_array_interface__

def _cupy_ndarray():
    cupy = sys.modules.get("cupy")
    return None if cupy is None else cupy.ndarray


@functools.lru_cache(maxsize=64)
def _dtype_name(typestr, declared):
    """The ITEMSIZE name of an array with this typestr and declared dtype (None where it has none), or None.
    Cached: numpy's dtype construction and .name cost microseconds, and every call meets the same few pairs."""
    typestr = numpy.dtype(typestr)
    if declared is not None and declared.name in ITEMSIZE and declared.itemsize == typestr.itemsize:
        return declared.name
    if typestr.kind != "V" and typestr.byteorder != ">" and typestr.name in ITEMSIZE:
        return typestr.name
    return None


def _cai_dtype(obj, cai, name):
    try:
        declared = numpy.dtype(obj.dtype)  # CuPy and DeviceArray: names bfloat16 / float8 exactly
    except (AttributeError, TypeError):
        declared = None
    dtype = _dtype_name(cai["typestr"], declared)
    if dtype is not None:
        return dtype
    typestr = numpy.dtype(cai["typestr"])
    raise TypeError(f"{name} has dtype {declared if declared is not None else typestr.str} "
                    f"(typestr {cai['typestr']!r}); expected one of {', '.join(ITEMSIZE)}"
                    + ("; a typestr 'V' is ambiguous: give the object a .dtype of ml_dtypes, or use DeviceArray"
                       if typestr.kind == "V" else ""))


def element_strides(byte_strides, itemsize, name):
    """Strides in elements from strides in bytes; ValueError if one is not a multiple of the element size."""
    for axis, stride in enumerate(byte_strides):
        if stride % itemsize:
            raise ValueError(f"{name}: stride {stride} bytes of dim {axis} is not a multiple of the element size "
                             f"({itemsize} bytes)")
    return tuple(int(s) // itemsize for s in byte_strides)


def _pointer_device(ptr, name):
    try:
        from cupy.cuda import runtime
    except ImportError as e:
        raise TypeError(f"{name}: finding the device of a __cuda_array_interface__ pointer needs CuPy; "
                        "pass a DeviceArray with its device") from e
    try:
        return runtime.pointerGetAttributes(ptr).device
    except runtime.CUDARuntimeError as e:
        raise _devices.runtime_error(e, name) from e


def _cai_device(obj, cai, name):
    if isinstance(obj, DeviceArray):
        return obj.device
    device = getattr(obj, "device", None)
    if hasattr(device, "id"):  # CuPy
        return int(device.id)
    return _pointer_device(cai["data"][0], name)


def _same_stream(a, b):
    # 0 (the NULL handle) and 1 (cudaStreamLegacy) both name the legacy default stream.
    return (a or 1) == (b or 1)


def wait_stream(producer, consumer):
    """Makes stream `consumer` wait for the work enqueued so far on stream `producer` (no host wait)."""
    from cupy.cuda import runtime
    event = runtime.eventCreateWithFlags(runtime.eventDisableTiming)
    try:
        runtime.eventRecord(event, producer)
        runtime.streamWaitEvent(consumer, event, 0)
    finally:
        runtime.eventDestroy(event)


def _from_cai(obj, name, stream, writable):
    cai = obj.__cuda_array_interface__
    if cai.get("mask") is not None:
        raise TypeError(f"{name} is a masked array")
    ptr, readonly = cai["data"]
    if writable and readonly:
        raise ValueError(f"{name} is read-only")
    dtype = _cai_dtype(obj, cai, name)
    shape = tuple(int(n) for n in cai["shape"])
    byte_strides = cai.get("strides")
    strides = (contiguous_strides(shape) if byte_strides is None
               else element_strides(byte_strides, ITEMSIZE[dtype], name))
    producer = cai.get("stream")  # v3: None means "no synchronisation needed"
    if producer is not None and stream is not None and not _same_stream(producer, stream):
        wait_stream(producer, stream)
    return Tensor(int(ptr or 0), shape, strides, dtype, _cai_device(obj, cai, name), obj)


# ---------------------------------------------------------------------------------------------------------
# DLPack (dlpack.h, DLPack 1.1: dmlc/dlpack include/dlpack/dlpack.h)

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_ROCM = 1, 2, 3, 10
# The library that serves each DLPack device type: NVIDIA (CUDA) or AMD (HIP, the gfx950 backend).
BACKEND_OF_DLPACK_DEVICE = {KDL_CUDA: "cuda", KDL_ROCM: "hip"}
DLPACK_FLAG_READ_ONLY = 1 << 0
# (DLDataTypeCode, bits, lanes) -> dtype; kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLFloat8_e4m3fn = 10.
_DLPACK_DTYPES = {(0, 8, 1): "int8", (0, 32, 1): "int32", (1, 8, 1): "uint8", (2, 32, 1): "float32",
                  (4, 16, 1): "bfloat16", (10, 8, 1): "float8_e4m3fn"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),  # elements; NULL means row-major (before DLPack 1.0)
        ("byte_offset", ctypes.c_uint64),
    ]


# void (*deleter)(DLManagedTensor *self): called with the GIL held, which every producer's deleter tolerates.
DLPACK_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    """Capsule "dltensor" (legacy)."""
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DLPACK_DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    """Capsule "dltensor_versioned" (DLPack >= 1.0)."""
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DLPACK_DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Capsule names: PyCapsule_SetName keeps the pointer, so the renamed names must live as long as the module.
_CAPSULES = {
    b"dltensor": (DLManagedTensor, b"used_dltensor"),
    b"dltensor_versioned": (DLManagedTensorVersioned, b"used_dltensor_versioned"),
}
# const char *PyCapsule_GetName(PyObject *capsule);
_capsule_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
# void *PyCapsule_GetPointer(PyObject *capsule, const char *name);
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
# int PyCapsule_SetName(PyObject *capsule, const char *name);
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))


class DLPackImport:
    """A consumed DLPack capsule: owns the managed tensor until release() calls its deleter."""

    def __init__(self, capsule, producer, name):
        self.managed = None
        capsule_name = _capsule_get_name(capsule)
        if capsule_name not in _CAPSULES:
            raise TypeError(f"{name}: __dlpack__ returned a capsule named {capsule_name!r}, not an unused DLPack "
                            "tensor")
        layout, used_name = _CAPSULES[capsule_name]
        address = _capsule_get_pointer(capsule, capsule_name)
        _capsule_set_name(capsule, used_name)  # from here on the capsule's destructor leaves it to us
        self.managed = layout.from_address(address)
        self.producer = producer
        if layout is DLManagedTensorVersioned and self.managed.version.major != 1:
            major = self.managed.version.major
            self.release()
            raise TypeError(f"{name}: DLPack major version {major} is not 1")

    @property
    def read_only(self):
        return isinstance(self.managed, DLManagedTensorVersioned) and bool(self.managed.flags & DLPACK_FLAG_READ_ONLY)

    def release(self):
        managed, self.managed = self.managed, None
        if managed is not None and managed.deleter:
            managed.deleter(ctypes.addressof(managed))

    def __del__(self):
        self.release()


def _dlpack_stream(stream):
    # DLPack spells the legacy default stream 1 (0 is ambiguous there and refused), and "no synchronisation" -1.
    return -1 if stream is None else stream or 1


def _export_dlpack(obj, stream):
    try:
        return obj.__dlpack__(stream=_dlpack_stream(stream), max_version=(1, 1))
    except TypeError:  # a producer from before DLPack 1.0 takes no max_version
        return obj.__dlpack__(stream=_dlpack_stream(stream))


def tensor_from_capsule(capsule, producer, name, writable):
    """The Tensor of a DLPack capsule; the Tensor owns the import (release() calls the deleter)."""
    imported = DLPackImport(capsule, producer, name)
    try:
        dl = imported.managed.dl_tensor
        if dl.device.device_type in (KDL_CPU, KDL_CUDA_HOST):
            raise _host_array_error(name)
        if dl.device.device_type not in BACKEND_OF_DLPACK_DEVICE:
            raise TypeError(f"{name} lives on DLPack device type {dl.device.device_type}; pass a CUDA or ROCm array")
        key = (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
        if key not in _DLPACK_DTYPES:
            raise TypeError(f"{name} has DLPack dtype (code {key[0]}, bits {key[1]}, lanes {key[2]}); expected one "
                            f"of {', '.join(ITEMSIZE)}")
        if writable and imported.read_only:
            raise ValueError(f"{name} is read-only")
        shape = tuple(dl.shape[i] for i in range(dl.ndim))
        strides = tuple(dl.strides[i] for i in range(dl.ndim)) if dl.strides else contiguous_strides(shape)
        return Tensor((dl.data or 0) + dl.byte_offset, shape, strides, _DLPACK_DTYPES[key], dl.device.device_id,
                      producer, imported)
    except BaseException:
        imported.release()
        raise


def _dlpack_device(obj, name):
    device_type, device_id = obj.__dlpack_device__()
    if device_type in (KDL_CPU, KDL_CUDA_HOST):
        raise _host_array_error(name)
    if device_type not in BACKEND_OF_DLPACK_DEVICE:
        raise TypeError(f"{name} lives on DLPack device type {device_type}; pass a CUDA or ROCm array")
    return int(device_id)


# ---------------------------------------------------------------------------------------------------------
# Entry points

def _uses_dlpack(obj):
    return (not isinstance(obj, _cupy_ndarray() or ()) and hasattr(obj, "__dlpack__")
            and hasattr(obj, "__dlpack_device__"))


def _check_device_array(obj, name):
    if obj is None:
        raise TypeError(f"{name} is None")
    if not (_uses_dlpack(obj) or hasattr(obj, "__cuda_array_interface__")):
        if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
            raise _host_array_error(name)
        raise TypeError(f"{name}: {type(obj).__name__} is not a device array (it has neither "
                        "__cuda_array_interface__ nor __dlpack__)")


def backend_of(obj, name):
    """"cuda" or "hip": which build of the library serves this device array. DLPack producers say so by their
    device type (torch on ROCm: kDLROCM); CuPy by the runtime it was built for; other
    `__cuda_array_interface__` producers are CUDA."""
    _check_device_array(obj, name)
    if _uses_dlpack(obj):
        return BACKEND_OF_DLPACK_DEVICE.get(obj.__dlpack_device__()[0], "cuda")
    cupy_ndarray = _cupy_ndarray()
    if cupy_ndarray is not None and isinstance(obj, cupy_ndarray):
        import cupy
        return "hip" if cupy.cuda.runtime.is_hip else "cuda"
    return "cuda"


def device_of(obj, name):
    """The CUDA device ordinal of a device array, without importing its data."""
    _check_device_array(obj, name)
    if _uses_dlpack(obj):
        return _dlpack_device(obj, name)
    return _cai_device(obj, obj.__cuda_array_interface__, name)


# torch dtypes read directly (the rest go through DLPack, which names or refuses them), keyed by the torch dtype
# itself once torch is imported: str(dtype) costs a microsecond a tensor.
_TORCH_DTYPE_NAMES = tuple(ITEMSIZE)


@functools.lru_cache(maxsize=1)
def _torch_dtypes():
    torch = sys.modules["torch"]
    return {getattr(torch, name): name for name in _TORCH_DTYPE_NAMES if hasattr(torch, name)}


def _from_torch(obj, stream):
    """A torch GPU tensor read directly (data_ptr, stride), or None where DLPack must do it: DLPack's export and
    import cost tens of microseconds a tensor, a call's largest host cost. Only where no synchronisation is
    needed, i.e. `stream` is torch's current stream on the tensor's device (or None), which torch orders its own
    work on; and only where DLPack would accept the tensor (no autograd, a dtype of ITEMSIZE)."""
    if not is_torch(obj) or not obj.is_cuda or obj.requires_grad:
        return None
    dtype = _torch_dtypes().get(obj.dtype)
    if dtype is None:
        return None
    device = obj.get_device()
    if stream is not None and not _same_stream(stream, torch_current_stream(device)):
        return None
    return Tensor(obj.data_ptr(), tuple(obj.shape), tuple(obj.stride()), dtype, device, obj)


def adapt(obj, name, stream, writable=False):
    """The Tensor of `obj`, its data ready for work enqueued on `stream` (a cudaStream_t handle, int; None when
    nothing will read the data, so no synchronisation is asked for). A torch GPU tensor is read before the
    generic checks, which it passes: a varlen call adapts ten arrays."""
    direct = _from_torch(obj, stream)
    if direct is not None:
        return direct
    _check_device_array(obj, name)
    if _uses_dlpack(obj):
        _dlpack_device(obj, name)
        return tensor_from_capsule(_export_dlpack(obj, stream), obj, name, writable)
    return _from_cai(obj, name, stream, writable)


def torch_current_stream(device):
    """torch's current cudaStream_t on `device` (an int), through torch's raw accessor where it has one: the
    public torch.cuda.current_stream builds a Stream object, several microseconds a call."""
    raw = _torch_raw_stream()
    return raw(device) if raw is not None else sys.modules["torch"].cuda.current_stream(device).cuda_stream


@functools.lru_cache(maxsize=1)
def _torch_raw_stream():
    return getattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream", None)


def is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def resolve_stream(stream, like, device):
    """The cudaStream_t handle to enqueue on: `stream` itself (int, CuPy `.ptr`, torch `.cuda_stream`), else the
    current stream of `like`'s library on `device` (torch, else CuPy when imported), else 0 (legacy default)."""
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attribute in ("ptr", "cuda_stream"):
            handle = getattr(stream, attribute, None)
            if isinstance(handle, int):
                return handle
        raise TypeError(f"stream must be an int handle, a CuPy stream or a torch stream, not {type(stream).__name__}")
    if is_torch(like):
        return torch_current_stream(device)
    cupy = sys.modules.get("cupy")
    return cupy.cuda.get_current_stream(device).ptr if cupy is not None else 0


class _StreamHandle:
    """A raw cudaStream_t in the CUDA stream protocol (`__cuda_stream__`), for CuPy."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def synchronize(stream, like):
    """Waits on the host until the work enqueued on `stream` (a cudaStream_t handle) has run, through `like`'s
    library (torch, else CuPy)."""
    if is_torch(like):
        sys.modules["torch"].cuda.ExternalStream(stream).synchronize()
        return
    _devices.cupy("synchronizing a stream").cuda.runtime.streamSynchronize(stream)


def on_device(like, device):
    """A context in which `device` is the current device, set through `like`'s library (torch, CuPy); other
    producers (DeviceArray, foreign DLPack) leave the caller's current device as it is."""
    if is_torch(like):
        return sys.modules["torch"].cuda.device(device)
    cupy_ndarray = _cupy_ndarray()
    if cupy_ndarray is not None and isinstance(like, cupy_ndarray):
        import cupy
        return cupy.cuda.Device(device)
    return contextlib.nullcontext()


def empty(shape, dtype, like, stream):
    """A new row-major device array of the library of `like` (torch for torch, else CuPy) on the current device,
    allocated in the order of `stream` so that freeing it later cannot race the work enqueued there."""
    if is_torch(like):
        torch = sys.modules["torch"]
        device = torch.cuda.current_device()
        scope = (contextlib.nullcontext() if _same_stream(torch_current_stream(device), stream)
                 else torch.cuda.stream(torch.cuda.ExternalStream(stream)))
        with scope:
            return torch.empty(shape, dtype=getattr(torch, dtype), device=device)
    cupy = _devices.cupy(f"allocating a {dtype} array {shape}")
    scope = (contextlib.nullcontext() if _same_stream(cupy.cuda.get_current_stream().ptr, stream)
             else cupy.cuda.Stream.from_external(_StreamHandle(stream)))
    with scope:
        return cupy_empty(shape, dtype)


def cupy_empty(shape, dtype):
    """cupy.empty for one of ITEMSIZE's dtypes."""
    cupy = _devices.cupy(f"allocating a {dtype} array {shape}")
    return cupy_view(cupy.empty(shape, _UNSIGNED_OF_SIZE[ITEMSIZE[dtype]]), dtype)


def cupy_view(array, dtype):
    """A CuPy array of unsigned storage seen as `dtype` (a name of ITEMSIZE, same element size)."""
    return array.view(numpy_dtype(dtype))

