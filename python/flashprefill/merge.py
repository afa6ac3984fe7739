"""merge_state: two attention results of the same queries over disjoint keys combined into the result over both
(flashprefill_merge_state): cascade attention over a shared prefix, context parallelism."""
import ctypes

from . import _arrays
from ._errors import Error
from ._params import DType, MergeStateParams, Status
from .api import _adapt, _check, _check_same_device, _library_call

_DTYPES = {"bfloat16": DType.BF16, "float32": DType.FP32}


def _check_out(t, name, shape):
    if t.dtype not in _DTYPES or len(t.shape) != 4 or t.shape != shape:
        raise ValueError(f"{name} must be bfloat16 or float32 of shape (batch, seqlen_q, heads_q, dim_v) = {shape}, "
                         f"got {t.dtype} {t.shape}")


def _check_lse(t, name, shape):
    if t.dtype != "float32" or t.shape != shape or not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous float32 of shape (batch, heads_q, seqlen_q) = {shape}, got "
                         f"{t.dtype} {t.shape} with strides {t.strides}")


def merge_state(out_a, lse_a, out_b, lse_b, out=None, lse_out=None, stream=None):
    """(out_a, lse_a) and (out_b, lse_b), attention of the same queries over disjoint sets of keys (as
    attention(..., return_lse=True) returns them), merged into the attention over both keys:
    lse = log(exp(lse_a) + exp(lse_b)), out = exp(lse_a − lse)·out_a + exp(lse_b − lse)·out_b, in float32.

    out_a, out_b: (batch, seqlen_q, heads_q, dim_v) device arrays, both bfloat16 or both float32, the last dim
    contiguous, other strides multiples of 16 bytes; dim_v a multiple of 8. lse_a, lse_b: contiguous float32
    (batch, heads_q, seqlen_q), natural log.
    out: optional bfloat16 or float32 array of out_a's shape to write (out_a or out_b itself merges in place); by
    default a new one of out_a's dtype and library. lse_out: optional contiguous float32 (batch, heads_q, seqlen_q)
    (lse_a or lse_b itself in place); by default a new one.
    A part with lse −inf (it saw no key; attention writes out 0 there) has weight 0: the merge is the other part
    exactly; both −inf give lse −inf and out 0. An lse of NaN or +inf makes the row NaN; a NaN in out_a or out_b
    reaches its column (reference.merge_state_reference states the rule).
    stream: as attention's. Returns (out, lse_out); enqueues the work and returns without waiting. Raises Error
    (Status.ERROR_NOT_SUPPORTED on gfx950, which has no kernel yet), TypeError / ValueError as attention does.
    """
    with _library_call(out_a, "out_a", stream) as (library, device, handle, keep):
        if not hasattr(library, "flashprefill_merge_state"):
            raise Error(Status.ERROR_NOT_SUPPORTED, f"this library (version {library.flashprefill_version().decode()})"
                        " has no flashprefill_merge_state, which came in 0.9.0")
        at, bt = (_adapt(x, name, handle, keep) for x, name in ((out_a, "out_a"), (out_b, "out_b")))
        shape = at.shape
        _check_out(at, "out_a", shape)
        _check_out(bt, "out_b", shape)
        if bt.dtype != at.dtype:
            raise TypeError(f"out_a and out_b must have one dtype, got {at.dtype} and {bt.dtype}")
        batch, seqlen_q, heads_q, dim_v = shape
        lse_shape = (batch, heads_q, seqlen_q)
        lse_a_t, lse_b_t = (_adapt(x, name, handle, keep) for x, name in ((lse_a, "lse_a"), (lse_b, "lse_b")))
        _check_lse(lse_a_t, "lse_a", lse_shape)
        _check_lse(lse_b_t, "lse_b", lse_shape)
        if out is None:
            out = _arrays.empty(shape, at.dtype, out_a, handle)
        if lse_out is None:
            lse_out = _arrays.empty(lse_shape, "float32", out_a, handle)
        ot = _adapt(out, "out", handle, keep, writable=True)
        _check_out(ot, "out", shape)
        lse_t = _adapt(lse_out, "lse_out", handle, keep, writable=True)
        _check_lse(lse_t, "lse_out", lse_shape)
        _check_same_device(keep, device, "out_a")
        params = MergeStateParams(out_a=at.ptr, out_b=bt.ptr, out=ot.ptr, lse_a=lse_a_t.ptr, lse_b=lse_b_t.ptr,
                                  lse=lse_t.ptr, batch=batch, seqlen_q=seqlen_q, heads_q=heads_q, dim_v=dim_v,
                                  in_dtype=_DTYPES[at.dtype], out_dtype=_DTYPES[ot.dtype])
        for prefix, strides in (("out_a", at.strides), ("out_b", bt.strides), ("out", ot.strides)):
            for axis, stride in zip(("batch", "seq", "head", "dim"), strides):
                setattr(params, f"{prefix}_stride_{axis}", stride)
        _check(library.flashprefill_merge_state(ctypes.byref(params), handle), library)
    return out, lse_out
