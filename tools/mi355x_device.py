"""The device side of tools/mi355x_check.py: which array library provides ROCm device arrays (torch for ROCm, else
CuPy for ROCm), its HIP-event clock for tools/timing.py, and launches of AMD's aiter code objects through
hipModuleLaunchKernel (ctypes on libamdhip64: the library's own loader exports no launcher). A dry run swaps all of
it for numpy stand-ins (Host): nothing here has run on an MI355X, nor on any AMD GPU.
"""
import ctypes

import ml_dtypes
import numpy as np

from timing import HostClock

GFX950 = "gfx950"
HIP_LIBRARIES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6")


class Refusal(Exception):
    """The machine cannot run the check (no ROCm array library, no gfx950 device); the message says what is missing."""


def _arch(name):
    return name.decode() if isinstance(name, bytes) else str(name)


class Torch:
    """torch built for ROCm: torch.cuda is HIP there, its Events are hipEvents."""
    name = "torch"

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.clock = torch.cuda
        self.library = "hip" if getattr(torch.version, "hip", None) else "cuda"  # flashprefill's, for _lib.lib
        self.arch = _arch(getattr(torch.cuda.get_device_properties(device), "gcnArchName", ""))

    def to_device(self, x):
        x = np.ascontiguousarray(x)
        if x.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn)):
            dtype = self.torch.bfloat16 if x.dtype.itemsize == 2 else self.torch.float8_e4m3fn
            bits = self.torch.from_numpy(x.view(np.int16 if x.dtype.itemsize == 2 else np.uint8).copy())
            return bits.to(f"cuda:{self.device}").view(dtype)
        return self.torch.from_numpy(x.copy()).to(f"cuda:{self.device}")

    def to_host(self, x):
        if x.dtype in (self.torch.bfloat16, self.torch.float8_e4m3fn):
            bits = x.contiguous().view(self.torch.int16 if x.dtype == self.torch.bfloat16 else self.torch.uint8)
            return bits.cpu().numpy().view(ml_dtypes.bfloat16 if x.dtype == self.torch.bfloat16
                                           else ml_dtypes.float8_e4m3fn)
        return x.cpu().numpy()

    def pointer(self, x):
        return x.data_ptr()

    def stream(self):
        return self.torch.cuda.current_stream(self.device).cuda_stream


class _CupyEvent:
    """torch.cuda.Event's three methods on a CuPy (HIP) event."""

    def __init__(self, enable_timing=True):
        import cupy
        self.cupy, self.event = cupy, cupy.cuda.Event(disable_timing=not enable_timing)

    def record(self):
        self.event.record()

    def synchronize(self):
        self.event.synchronize()

    def elapsed_time(self, end):
        return self.cupy.cuda.get_elapsed_time(self.event, end.event)


class _CupyClock:
    Event = _CupyEvent

    @staticmethod
    def synchronize():
        import cupy
        cupy.cuda.get_current_stream().synchronize()


class Cupy:
    """CuPy built for ROCm (cupy.cuda.runtime.is_hip): its arrays carry bfloat16 and e4m3 as ml_dtypes dtypes."""
    name = "cupy"
    clock = _CupyClock

    def __init__(self, cupy, device):
        self.cupy, self.device = cupy, device
        self.library = "hip" if cupy.cuda.runtime.is_hip else "cuda"
        cupy.cuda.Device(device).use()
        self.arch = _arch(cupy.cuda.runtime.getDeviceProperties(device).get("gcnArchName", ""))

    def to_device(self, x):
        """bf16 and e4m3 travel as unsigned integers of their size, then are seen as their ml_dtypes dtype."""
        x = np.ascontiguousarray(x)
        if x.dtype.name in ("bfloat16", "float8_e4m3fn"):
            bits = self.cupy.asarray(x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8))
            return bits.view(x.dtype)
        return self.cupy.asarray(x)

    def to_host(self, x):
        if x.dtype.name in ("bfloat16", "float8_e4m3fn"):
            bits = self.cupy.asnumpy(x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8))
            return bits.view(x.dtype)
        return self.cupy.asnumpy(x)

    def pointer(self, x):
        return x.data.ptr

    def stream(self):
        return self.cupy.cuda.get_current_stream().ptr


class Host:
    """The dry run: numpy arrays stand for device arrays, the host's clock for HIP events."""
    name = "dry-run"
    clock = HostClock
    arch = GFX950
    device = 0
    library = "hip"

    def to_device(self, x):
        return np.array(x, copy=True)

    def to_host(self, x):
        return np.asarray(x)

    def pointer(self, x):
        return x.__array_interface__["data"][0]

    def stream(self):
        return 0


def _torch(device, tried):
    try:
        import torch
    except ImportError:
        tried.append("torch is not installed")
        return None
    if getattr(torch.version, "hip", None) and torch.cuda.is_available():
        return Torch(torch, device)
    tried.append(f"torch {torch.__version__} is not a ROCm build with a device (torch.version.hip "
                 f"{getattr(torch.version, 'hip', None)}, torch.cuda.is_available() {torch.cuda.is_available()})")
    return None


def _cupy(device, tried):
    try:
        import cupy
        if not cupy.cuda.runtime.is_hip:
            tried.append(f"cupy {cupy.__version__} is a CUDA build")
        elif cupy.cuda.runtime.getDeviceCount() <= device:
            tried.append(f"cupy {cupy.__version__} (ROCm) sees no device {device}")
        else:
            return Cupy(cupy, device)
    except ImportError:
        tried.append("cupy is not installed")
    except Exception as e:  # a CuPy without a working runtime raises its own error types
        tried.append(f"cupy: {e}")
    return None


def detect(device=0, dry_run=False):
    """The backend: Host for a dry run, else torch for ROCm, else CuPy for ROCm, on a gfx950 device; Refusal
    otherwise, saying what was found."""
    if dry_run:
        return Host()
    tried = []
    backend = _torch(device, tried) or _cupy(device, tried)
    if backend is None:
        raise Refusal("no ROCm array library with a device: install torch for ROCm or CuPy for ROCm (" +
                      "; ".join(tried) + "), or run with --dry-run")
    if not backend.arch.startswith(GFX950):
        raise Refusal(f"device {device} is {backend.arch}, not an MI355X ({GFX950}): these kernels are gfx950 code")
    return backend


# ---------------------------------------------------------------------------------------------------------------
# AMD's code objects, launched as their own launchers do (hipModuleLaunchKernel with the arguments as one buffer)

# hipModuleLaunchKernel's `extra` markers (hip_runtime_api.h: HIP_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END)
_BUFFER_POINTER, _BUFFER_SIZE, _END = 1, 2, 3


class HipModules:
    """Loads code objects with hipModuleLoad and launches their kernels on a stream (ctypes on libamdhip64)."""

    def __init__(self):
        errors = []
        for name in HIP_LIBRARIES:
            try:
                self.hip = ctypes.CDLL(name)
                break
            except OSError as e:
                errors.append(str(e))
        else:
            raise Refusal("libamdhip64 could not be loaded: " + "; ".join(errors))
        h = self.hip
        # hipError_t hipModuleLoad(hipModule_t *module, const char *fname);
        h.hipModuleLoad.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        # hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module, const char *kname);
        h.hipModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        # hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, gy, gz, bx, by, bz, unsigned shared_bytes,
        #                                  hipStream_t stream, void **kernelParams, void **extra);
        h.hipModuleLaunchKernel.argtypes = ([ctypes.c_void_p] + [ctypes.c_uint] * 7 +
                                            [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p])
        # const char *hipGetErrorString(hipError_t error);
        h.hipGetErrorString.argtypes, h.hipGetErrorString.restype = [ctypes.c_int], ctypes.c_char_p
        self.functions = {}

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.hip.hipGetErrorString(status).decode()} ({status})")

    def function(self, path, symbol):
        key = (str(path), symbol)
        if key not in self.functions:
            module, function = ctypes.c_void_p(), ctypes.c_void_p()
            self.check(self.hip.hipModuleLoad(ctypes.byref(module), str(path).encode()), f"hipModuleLoad {path}")
            self.check(self.hip.hipModuleGetFunction(ctypes.byref(function), module, symbol.encode()),
                       f"hipModuleGetFunction {symbol}")
            self.functions[key] = function
        return self.functions[key]

    def launch(self, path, launch, stream):
        """Enqueues an aiter_args.AiterLaunch of the code object at `path` on `stream` (a hipStream_t, int)."""
        function = self.function(path, launch.symbol)
        buffer = ctypes.create_string_buffer(launch.kernarg, len(launch.kernarg))
        size = ctypes.c_size_t(len(launch.kernarg))
        extra = (ctypes.c_void_p * 5)(_BUFFER_POINTER, ctypes.addressof(buffer), _BUFFER_SIZE,
                                      ctypes.addressof(size), _END)
        self.check(self.hip.hipModuleLaunchKernel(function, *launch.grid, launch.workitems, 1, 1, 0, stream, None,
                                                  extra), f"hipModuleLaunchKernel {launch.symbol}")


class HostModules:
    """The dry run's HipModules: checks that the code object and its kernel exist, and records each launch."""

    def __init__(self):
        self.launches = []

    def launch(self, path, launch, stream):
        if not path.is_file():
            raise RuntimeError(f"no code object {path}")
        if launch.symbol.encode() not in path.read_bytes():
            raise RuntimeError(f"{path} has no kernel {launch.symbol}")
        self.launches.append(launch)


def modules(backend):
    return HostModules() if isinstance(backend, Host) else HipModules()
