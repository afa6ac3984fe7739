"""A stand-in for the few parts of torch that flashprefill's array adapter reads of a torch tensor (python/flashprefill
/_arrays.py: _from_torch, torch_current_stream, is_torch), so that its torch path runs on a host without torch or a
GPU: module() goes into sys.modules["torch"] for a test, with clear_caches() before and after it."""
import types

from flashprefill import _arrays

CURRENT_STREAM = 0x5000  # what torch._C._cuda_getCurrentRawStream answers for every device


class Dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


class Tensor:
    """A tensor's metadata: data_ptr(), shape, stride() in elements, dtype, is_cuda, get_device(), requires_grad;
    a CPU one also offers DLPack (device type 1), as torch's do."""

    def __init__(self, ptr, shape, dtype, strides=None, device=0, is_cuda=True, requires_grad=False):
        self._ptr, self.shape, self.dtype, self._device = ptr, tuple(shape), dtype, device
        self._strides = tuple(strides) if strides is not None else _arrays.contiguous_strides(self.shape)
        self.is_cuda, self.requires_grad = is_cuda, requires_grad

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides

    def get_device(self):
        return self._device if self.is_cuda else -1

    def __dlpack__(self, **kwargs):
        raise AssertionError("the adapter exported a tensor through DLPack")

    def __dlpack_device__(self):
        return (2, self._device) if self.is_cuda else (1, 0)


def module():
    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    for name in _arrays.ITEMSIZE:
        setattr(torch, name, Dtype(name))
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: CURRENT_STREAM)
    return torch


def clear_caches():
    """The adapter's caches of what it read of torch (dtypes, the raw stream accessor): cleared around a test."""
    _arrays._torch_dtypes.cache_clear()
    _arrays._torch_raw_stream.cache_clear()
