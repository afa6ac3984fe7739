"""Whether a device can serve a call, asked before any GPU runtime call that could raise its own exception.

Without a driver or a device, CuPy raises CUDARuntimeError from its first runtime call (setting the current
device, reading the current stream, allocating); without CuPy, `import cupy` raises ModuleNotFoundError. The API
asks here first, so that each of those is a NoDeviceError saying which. CuPy is imported by a call that needs it,
never by `import flashprefill`.
"""
import functools
import sys

from ._errors import NoDeviceError

# cudaError_t codes (the same numbers under ROCm's hipError_t for these two) that a missing GPU gives.
_RUNTIME_REASONS = {
    35: "the GPU driver is missing, or older than CuPy's CUDA runtime (cudaErrorInsufficientDriver)",
    100: "no GPU is visible to the runtime (cudaErrorNoDevice)",
}


def cupy(purpose):
    """The CuPy module for `purpose` (e.g. "allocating out"); NoDeviceError where CuPy is not installed."""
    try:
        import cupy as module
    except ImportError as e:
        raise NoDeviceError(f"{purpose} needs CuPy, which is not installed ({e}); install cupy-cuda13x (NVIDIA) or "
                            "cupy-rocm (AMD), or pass torch tensors") from e
    return module


@functools.cache
def _cupy_reason(backend):
    """Why CuPy can reach no device of `backend` ("cuda", "hip") (a string), or None when it sees one or is not
    that backend's runtime; asked once per process."""
    try:
        import cupy as module
    except ImportError:
        return None  # the calls that need CuPy say so themselves (cupy())
    runtime = module.cuda.runtime
    if runtime.is_hip != (backend == "hip"):
        return None  # the other vendor's CuPy: the library's own device check answers
    try:
        count = runtime.getDeviceCount()
    except runtime.CUDARuntimeError as e:
        return _RUNTIME_REASONS.get(getattr(e, "status", None), f"the GPU runtime failed: {e}")
    return None if count > 0 else "the runtime sees 0 devices"


def require(like, name, backend):
    """NoDeviceError unless a device of `backend` can serve a call on `like` (named `name`). A torch tensor on a GPU
    proves one (torch made it there); for every other array CuPy, where installed for that backend, is asked once;
    otherwise the library's own device check answers (ERROR_NO_DEVICE), and the calls that would need CuPy raise
    NoDeviceError."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return
    reason = _cupy_reason(backend)
    if reason is not None:
        raise NoDeviceError(f"no usable GPU for {name}: {reason}")


def runtime_error(e, name):
    """NoDeviceError for a CUDARuntimeError `e` raised while asking the runtime about `name`."""
    return NoDeviceError(f"the GPU runtime could not be asked about {name}: "
                         f"{_RUNTIME_REASONS.get(getattr(e, 'status', None), e)}")
