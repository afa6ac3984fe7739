"""The public API: attention, supports, quantize_fp8, quantize_qkv, prepare_v, version, and the Error they raise.

Layout of every tensor: (batch, seq, heads, dim), the last dim contiguous; other strides come from the arrays.
Arrays: CuPy, torch on CUDA, anything with `__dlpack__` or `__cuda_array_interface__`, or DeviceArray
(see _arrays.py). bf16 is ml_dtypes.bfloat16 / torch.bfloat16; fp8 is OCP e4m3fn, ml_dtypes.float8_e4m3fn /
torch.float8_e4m3fn. FP8 descales: see scales.py.
"""
import contextlib
import ctypes
import dataclasses
import functools
import math

import numpy

from . import _arrays, _devices, _lib, fp8, policy, prepare, prepared_v
from ._errors import Error, NoDeviceError
from ._params import DType, Params, PrepareVParams, QuantizeParams, Status, VLayout
from .policy import IN_DTYPES as _IN_DTYPES, PROBABILITIES as _PROBABILITIES, SCORES as _SCORES
from .policy import V_LAYOUTS as _V_LAYOUTS
from .prepared_v import PreparedV
from .scales import BlockScales, descale

_QUANTIZE_DTYPES = {"bfloat16": DType.BF16, "float32": DType.FP32}
_INT32_MAX = 2**31 - 1
# supports() without `out`: attention would allocate a row-major bf16 out; validation never dereferences
# pointers, so a 16-byte aligned stand-in checks that call.
_STAND_IN_OUT_PTR = 1 << 12
_OUT_AXES = "batch, seqlen_q, heads_q, dim_v"


def _check(status, library):
    if status == Status.ERROR_NO_DEVICE:
        raise NoDeviceError(library.flashprefill_last_error().decode())
    if status != Status.SUCCESS:
        raise Error(status, library.flashprefill_last_error().decode())


def version(backend="cuda"):
    """The C library's version, e.g. "0.2.0"; backend "cuda" (NVIDIA) or "hip" (AMD gfx950)."""
    return _lib.lib(backend).flashprefill_version().decode()


def _check_input_dtypes(q, k, v):
    if q.dtype not in _IN_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"q, k, v must be all bfloat16 or all float8_e4m3fn, got {q.dtype}, {k.dtype}, {v.dtype}")


def _check_int32(problem, what):
    if max(problem) > _INT32_MAX:
        raise ValueError(f"a dimension of {what} exceeds 2^31 - 1: {problem}")


def _problem(q, k, v):
    """(batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim_qk, dim_v) of the q, k, v Tensors, after the checks
    the C ABI cannot make (it receives one shape for the three)."""
    for tensor, name in ((q, "q"), (k, "k"), (v, "v")):
        if len(tensor.shape) != 4:
            raise ValueError(f"{name} must be 4-d (batch, seq, heads, dim), got shape {tensor.shape}")
    _check_input_dtypes(q, k, v)
    batch, seqlen_q, heads_q, dim_qk = q.shape
    _, seqlen_k, heads_kv, dim_v = v.shape
    if k.shape != (batch, seqlen_k, heads_kv, dim_qk) or v.shape[0] != batch:
        raise ValueError(f"shapes do not match: q {q.shape}, k {k.shape}, v {v.shape}; expected q (batch, seqlen_q, "
                         "heads_q, dim_qk), k (batch, seqlen_k, heads_kv, dim_qk), v (batch, seqlen_k, heads_kv, dim_v)")
    problem = (batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim_qk, dim_v)
    _check_int32(problem, "q, k, v")
    return problem


def _adapt(obj, name, stream, keep, writable=False):
    tensor = _arrays.adapt(obj, name, stream, writable)
    keep.append(tensor)
    return tensor


def _release(keep):
    for tensor in keep:
        tensor.release()


@contextlib.contextmanager
def _library_call(like, name, stream):
    """(library, device, stream handle, keep) for one call on the device of `like` (named `name`), that device
    current meanwhile; the arrays imported into `keep` are released on exit."""
    backend = _arrays.backend_of(like, name)
    library = _lib.lib(backend)
    _devices.require(like, name, backend)
    device = _arrays.device_of(like, name)
    handle = _arrays.resolve_stream(stream, like, device)
    keep = []
    with _arrays.on_device(like, device):
        try:
            yield library, device, handle, keep
        finally:
            _release(keep)


@contextlib.contextmanager
def _host_call(like, name):
    """(library, keep) for a call that asks the library of `like` (named `name`) without the GPU (supports); the
    arrays imported into `keep` are released on exit."""
    library = _lib.lib(_arrays.backend_of(like, name))
    keep = []
    try:
        yield library, keep
    finally:
        _release(keep)


def _check_same_device(keep, device, name):
    for tensor in keep:
        if tensor.device != device:
            raise ValueError(f"every array must be on {name}'s device {device}; one is on device {tensor.device}")


def _adapt_v(v, stream, keep):
    """v's Tensor as (batch, seqlen_k, heads_kv, dim_v), and its layout: a PreparedV's rows of keys are that
    tensor with the keys contiguous (stride 1) and reordered, which the strides of the ABI express but for the order."""
    if not isinstance(v, PreparedV):
        return _adapt(v, "v", stream, keep), VLayout.DEFAULT
    data = _adapt(v.data, "v.data", stream, keep)
    if len(data.shape) != 4 or data.strides[3] != 1:
        raise ValueError(f"PreparedV.data must be 4-d (batch, heads_kv, dim_v, positions) with each row contiguous, "
                         f"got shape {data.shape}, strides {data.strides}")
    if not isinstance(v.seqlen, int) or v.seqlen <= 0 or prepared_v.positions(v.seqlen) > data.shape[3]:
        raise ValueError(f"PreparedV.seqlen = {v.seqlen!r} does not fit its rows of {data.shape[3]} positions "
                         "(seqlen rounded up to 16 at most)")
    batch, heads, dim, _ = data.shape
    view = dataclasses.replace(data, shape=(batch, v.seqlen, heads, dim),
                               strides=(data.strides[0], 1, data.strides[1], data.strides[2]))
    return view, VLayout.PREPARED


def _adapt_out(out, shape, axes, stream, keep):
    """out's Tensor, bfloat16 of `shape` (whose axes are named `axes`): the same check for a call and its supports."""
    ot = _adapt(out, "out", stream, keep, writable=True)
    if ot.dtype != "bfloat16" or ot.shape != shape:
        raise ValueError(f"out must be bfloat16 of shape ({axes}) = {shape}, got {ot.dtype} {ot.shape}")
    return ot


def _adapt_lse(lse, return_lse, shape, axes, like, stream, keep):
    """(lse, its pointer) of a call: None without return_lse; else the caller's lse, checked to be contiguous float32 of
    `shape` (whose axes are named `axes`), or a new one of `like`'s library."""
    if not return_lse:
        if lse is not None:
            raise ValueError("lse is written only with return_lse=True")
        return None, None
    if lse is None:
        lse = _arrays.empty(shape, "float32", like, stream)
    lt = _adapt(lse, "lse", stream, keep, writable=True)
    if lt.dtype != "float32" or lt.shape != shape or not lt.is_contiguous():
        raise ValueError(f"lse must be contiguous float32 of shape ({axes}) = {shape}, got {lt.dtype} {lt.shape} with "
                         f"strides {lt.strides}")
    return lse, lt.ptr


def _out_view(out, shape, axes, keep):
    """(ptr, strides) of supports' out: the caller's, checked, else the stand-in for the row-major one the call
    would allocate."""
    if out is None:
        return _STAND_IN_OUT_PTR, _arrays.contiguous_strides(shape)
    ot = _adapt_out(out, shape, axes, None, keep)
    return ot.ptr, ot.strides


def _supported(status, library):
    """supports()'s answer from the library's status: True, False (NOT_SUPPORTED), or the Error."""
    if status == Status.ERROR_NOT_SUPPORTED:
        return False
    _check(status, library)
    return True


def _flag(value, name):
    """A flag argument as 0 or 1; bool, or the ints 0 and 1 (numpy's too), nothing else."""
    if isinstance(value, (bool, int, numpy.bool_, numpy.integer)) and value in (0, 1):
        return int(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def _params(q, k, v, out, lse_ptr, problem, causal, softmax_scale, descales, probabilities, scores,
            v_layout=VLayout.DEFAULT):
    """Params from the Tensors q, k, v and (ptr, strides) of out; descales: (q, k, v) Descale."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim_qk, dim_v = problem
    if probabilities not in _PROBABILITIES:
        raise ValueError(f"probabilities must be one of {sorted(_PROBABILITIES)}, got {probabilities!r}")
    if scores not in _SCORES:
        raise ValueError(f"scores must be one of {sorted(_SCORES)}, got {scores!r}")
    p = Params(q=q.ptr, k=k.ptr, v=v.ptr, out=out[0], lse=lse_ptr, batch=batch, seqlen_q=seqlen_q,
               seqlen_k=seqlen_k, heads_q=heads_q, heads_kv=heads_kv, dim_qk=dim_qk, dim_v=dim_v,
               in_dtype=_IN_DTYPES[k.dtype], out_dtype=DType.BF16, causal=_flag(causal, "causal"),
               # A dim_qk <= 0 is the C side's to report; the default scale must not fail before it does.
               softmax_scale=1 / math.sqrt(max(dim_qk, 1)) if softmax_scale is None else softmax_scale,
               q_descale=descales[0], k_descale=descales[1], v_descale=descales[2],
               probabilities=_PROBABILITIES[probabilities], scores=_SCORES[scores], v_layout=v_layout)
    for prefix, strides in (("q", q.strides), ("k", k.strides), ("v", v.strides), ("out", out[1])):
        for axis, stride in zip(("batch", "seq", "head", "dim"), strides):
            setattr(p, f"{prefix}_stride_{axis}", stride)
    return p


def _descales(problem, q_descale, k_descale, v_descale, stream, keep):
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, _, _ = problem
    return tuple(descale(value, name, batch=batch, heads=heads, heads_kv=heads_kv, seqlen=seqlen, stream=stream,
                         keep=keep)
                 for value, name, heads, seqlen in ((q_descale, "q_descale", heads_q, seqlen_q),
                                                    (k_descale, "k_descale", heads_kv, seqlen_k),
                                                    (v_descale, "v_descale", heads_kv, seqlen_k)))


def attention(q, k, v, *, causal=True, softmax_scale=None, q_descale=None, k_descale=None, v_descale=None,
              probabilities="default", scores="default", out=None, return_lse=False, lse=None, stream=None):
    """Causal (or full) attention forward: out = softmax(softmax_scale · q·kᵀ [masked]) · v.

    q: (batch, seqlen_q, heads_q, dim_qk); k: (batch, seqlen_k, heads_kv, dim_qk);
    v: (batch, seqlen_k, heads_kv, dim_v); all bfloat16 or all float8_e4m3fn device arrays; heads_q a multiple
    of heads_kv (query head h reads KV head h // (heads_q // heads_kv)). fp8 with default probabilities: v may be a
    PreparedV (prepare_v), which the Hopper kernels load without transposing it (faster).
    causal: bool; query i sees key j iff j <= i + seqlen_k - seqlen_q (aligned bottom-right); needs seqlen_q <=
    seqlen_k.
    softmax_scale: float, default 1/sqrt(dim_qk).
    q_descale, k_descale, v_descale: fp8 only; None, float32 factors or BlockScales (see scales.py).
    probabilities: fp8 only. "default": P of P.V as e4m3 codes computed without an exponential (fastest;
    each probability up to 7.55% off). "fp16": P as float16 and V widened exactly to float16, P.V at the 16-bit
    tensor rate: slower, and the error drops to the floor set by rounding the inputs to e4m3.
    scores: how S = q·kᵀ is accumulated (fp8 with default probabilities; bf16's is float32). "fp32": in float32.
    "fp16": in float16 (faster: the row max and the codes on packed halves), which cannot overflow once q's codes
    lie within ±1.125 (dim_qk 128) or ±0.75 (dim_qk 192): a group of 64 query rows whose codes pass that bound
    has them divided by the least power of two that brings them within it, rounded to e4m3 again (exact but where
    a code becomes subnormal), its scores' scale multiplied alike. A float16 score is off by up to 2^-11 of its
    magnitude, so the kernel's own error grows with the range of the scores; quantize_qkv(scores="fp16") gives
    codes within the bound. Hopper kernels with 192-key tiles (descales None, factors, or BlockScales of a multiple
    of 384 tokens) and 128-key tiles (BlockScales of a multiple of 128). "default": "fp16" where such a kernel takes
    the call, else "fp32" (end to end from
    float inputs the two measure within 1% of each other: docs/numerics.md).
    out: optional bfloat16 (batch, seqlen_q, heads_q, dim_v) device array to write; by default a new one of
    q's library (torch for torch, else CuPy).
    return_lse: also return lse, float32 (batch, heads_q, seqlen_q), the natural log of sum_j exp(scale·q·k_j).
    lse: optional contiguous float32 (batch, heads_q, seqlen_q) device array to write the lse into (return_lse=True);
    by default a new one of q's library.
    stream: int cudaStream_t, CuPy stream or torch stream; default the current stream of q's library.
    Returns out, or (out, lse). Enqueues the work and returns without waiting.
    Raises Error (status, message) when the library refuses the call (e.g. Status.ERROR_NOT_SUPPORTED), NoDeviceError
    (an Error) where no GPU, driver or CuPy can serve it, before any GPU runtime call; TypeError / ValueError for
    arrays and arguments the library cannot take at all.
    """
    with _library_call(q, "q", stream) as (library, device, handle, keep):
        qt, kt = (_adapt(x, name, handle, keep) for x, name in ((q, "q"), (k, "k")))
        vt, v_layout = _adapt_v(v, handle, keep)
        problem = _problem(qt, kt, vt)
        batch, seqlen_q, _, heads_q, _, _, dim_v = problem
        out_shape = (batch, seqlen_q, heads_q, dim_v)
        if out is None:
            out = _arrays.empty(out_shape, "bfloat16", q, handle)
        ot = _adapt_out(out, out_shape, _OUT_AXES, handle, keep)
        lse, lse_ptr = _adapt_lse(lse, return_lse, (batch, heads_q, seqlen_q), "batch, heads_q, seqlen_q", q, handle,
                                  keep)
        _check_same_device(keep, device, "q")
        descales = _descales(problem, q_descale, k_descale, v_descale, handle, keep)
        params = _params(qt, kt, vt, (ot.ptr, ot.strides), lse_ptr, problem, causal, softmax_scale, descales,
                         probabilities, scores, v_layout)
        _check(library.flashprefill_forward(ctypes.byref(params), handle), library)
    return (out, lse) if return_lse else out


def supports(q, k, v, *, causal=True, softmax_scale=None, q_descale=None, k_descale=None, v_descale=None,
             probabilities="default", scores="default", out=None):
    """Whether this build has a kernel for attention(q, k, v, ...) with these arguments, without touching the
    GPU or the data. Arguments as attention. True / False (Status.ERROR_NOT_SUPPORTED); raises Error with
    Status.ERROR_INVALID_ARGUMENT when the call could never be valid."""
    with _host_call(q, "q") as (library, keep):
        # stream None: no synchronisation with the producers, since nothing is read.
        qt, kt = (_adapt(x, name, None, keep) for x, name in ((q, "q"), (k, "k")))
        vt, v_layout = _adapt_v(v, None, keep)
        problem = _problem(qt, kt, vt)
        batch, seqlen_q, _, heads_q, _, _, dim_v = problem
        out_view = _out_view(out, (batch, seqlen_q, heads_q, dim_v), _OUT_AXES, keep)
        descales = _descales(problem, q_descale, k_descale, v_descale, None, keep)
        params = _params(qt, kt, vt, out_view, None, problem, causal, softmax_scale, descales, probabilities,
                         scores, v_layout)
        status = library.flashprefill_supports(ctypes.byref(params))
    return _supported(status, library)


def quantize_fp8(x, block=128, *, signs=None, subtract=None, code_max=448.0, layout="default", codes=None,
                 exponents=None, cu_seqlens=None, max_seqlen=None, stream=None):
    """Per-block power-of-two FP8 quantization on the GPU (flashprefill_quantize): x ≈ codes · 2^exponents[b, h,
    token // block], after an optional rotation and smoothing of each token row: y = H diag(signs) (x - subtract).

    x: bfloat16 or float32 device array (batch, seq, heads, dim), CuPy or torch; dim a multiple of 32 up to 256.
    signs: None, or float32 device array (dim,) of +1 / -1 (prepare.rotation_signs); the same for q and k.
    subtract: None, or float32 device array (batch, heads, dim), contiguous (prepare.key_mean, for k).
    code_max: the largest magnitude of the codes, a normal e4m3 value (448; policy.query(...).q_code_max for q
    with float16 scores).
    layout: "default", or "prepared" for v on Hopper: the codes come as a PreparedV, written straight in the layout
    prepare_v would give them (no second pass; block a multiple of 16).
    codes, exponents: optional outputs to write (float8_e4m3fn (batch, seq, heads, dim), any strides the ABI
    takes, or with layout "prepared" (batch, heads, dim, positions) as prepare_v's `out`; int8 (batch, heads,
    ceil(seq / block)), contiguous); by default new arrays of x's library.
    cu_seqlens, max_seqlen: a packed (varlen) batch, as attention's varlen form: x (total, heads, dim), sequence b its
    rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1 (cu_seqlens: int32 device array (batch + 1,), contiguous; max_seqlen:
    int, the largest length, given since reading it from the device would wait for it). Each sequence's blocks
    count from its first token; codes (total, heads, dim), exponents (batch, heads, ceil(max_seqlen / block)),
    subtract (batch, heads, dim) one vector per sequence; layout "default" only. Slots past a sequence's blocks and
    rows outside every sequence are left as they are; a sequence whose bounds are not valid gets -128 in every slot.
    Returns (codes, BlockScales(exponents, block)); pass the BlockScales as the tensor's descale.
    Bit-identical to fp8.quantize_blocks(prepare.transform(x, signs, subtract), block, code_max) (and, prepared,
    to prepare_v of that; packed, to fp8.quantize_blocks_varlen(prepare.transform_varlen(...))). Enqueued on `stream`
    (default: the current stream of x's library).
    """
    if layout not in _V_LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(_V_LAYOUTS)}, got {layout!r}")
    if not isinstance(block, int) or block <= 0:
        raise ValueError(f"block must be an int > 0, got {block!r}")
    varlen = cu_seqlens is not None
    if varlen and layout != "default":
        raise ValueError(f"layout {layout!r} takes the equal-length form (cu_seqlens None)")
    if varlen and not (isinstance(max_seqlen, int) and max_seqlen > 0):
        raise ValueError(f"cu_seqlens needs max_seqlen, an int > 0 (the largest length), got {max_seqlen!r}")
    with _library_call(x, "x", stream) as (library, device, handle, keep):
        xt = _adapt(x, "x", handle, keep)
        if xt.dtype not in _QUANTIZE_DTYPES:
            raise TypeError(f"x must be bfloat16 or float32, got {xt.dtype}")
        if varlen:
            st = _adapt(cu_seqlens, "cu_seqlens", handle, keep)
            shape, batch, seqlen = _varlen_quantize_shape(xt, st)
            slots = max_seqlen
        else:
            if len(xt.shape) != 4:
                raise ValueError(f"x must be 4-d (batch, seq, heads, dim), got shape {xt.shape}")
            shape, (batch, seqlen) = xt.shape, xt.shape[:2]
            slots = seqlen
        heads, dim = shape[-2:]
        blocks = -(-slots // block)
        prepared = layout == "prepared"
        if codes is None:
            codes_shape = (batch, heads, dim, prepared_v.positions(seqlen)) if prepared else shape
            codes = _arrays.empty(codes_shape, "float8_e4m3fn", x, handle)
        if exponents is None:
            exponents = _arrays.empty((batch, heads, blocks), "int8", x, handle)
        ct = _adapt(codes, "codes", handle, keep, writable=True)
        et = _adapt(exponents, "exponents", handle, keep, writable=True)
        if prepared:
            _check_prepared_out(ct, "codes", batch, seqlen, heads, dim)
        elif ct.dtype != "float8_e4m3fn" or ct.shape != xt.shape:
            raise ValueError(f"codes must be float8_e4m3fn of x's shape {xt.shape}, got {ct.dtype} {ct.shape}")
        if et.dtype != "int8" or et.shape != (batch, heads, blocks) or not et.is_contiguous():
            raise ValueError(f"exponents must be contiguous int8 of shape (batch, heads, ceil("
                             f"{'max_seqlen' if varlen else 'seq'} / block)) = {(batch, heads, blocks)}, got "
                             f"{et.dtype} {et.shape} with strides {et.strides}")
        extra = {}
        for value, name, expected in ((signs, "signs", (dim,)), (subtract, "subtract", (batch, heads, dim))):
            if value is None:
                continue
            tensor = _adapt(value, name, handle, keep)
            if tensor.dtype != "float32" or tensor.shape != expected or not tensor.is_contiguous():
                raise ValueError(f"{name} must be a contiguous float32 array of shape {expected}, got {tensor.dtype} "
                                 f"{tensor.shape} with strides {tensor.strides}")
            extra[name] = tensor.ptr
        _check_same_device(keep, device, "x")
        if varlen:
            extra.update(cu_seqlens=st.ptr, total=shape[0], max_seqlen=max_seqlen)
        params = QuantizeParams(x=xt.ptr, codes=ct.ptr, exponents=et.ptr, batch=batch, seqlen=0 if varlen else seqlen,
                                heads=heads, dim=dim, block_tokens=block, x_dtype=_QUANTIZE_DTYPES[xt.dtype],
                                code_max=code_max, codes_layout=_V_LAYOUTS[layout], **extra)
        # a prepared output (batch, heads, dim, positions) as the ABI's (batch, seq, heads, dim) strides; a packed one
        # as one batch of total rows (stride_batch 0)
        codes_strides = (ct.strides[0], ct.strides[3], ct.strides[1], ct.strides[2]) if prepared else ct.strides
        for prefix, strides in (("x", xt.strides), ("codes", codes_strides)):
            for axis, stride in zip(("batch", "seq", "head", "dim"), (0, *strides) if varlen else strides):
                setattr(params, f"{prefix}_stride_{axis}", stride)
        _check(library.flashprefill_quantize(ctypes.byref(params), handle), library)
    return (PreparedV(codes, seqlen) if prepared else codes), BlockScales(exponents, block)


def _varlen_quantize_shape(xt, st):
    """(x's shape, batch, 0) of a packed quantize_fp8 call, after the checks of x and cu_seqlens the ABI cannot make."""
    if len(xt.shape) != 3:
        raise ValueError(f"with cu_seqlens, x must be 3-d (total, heads, dim), got shape {xt.shape}")
    if st.dtype != "int32" or len(st.shape) != 1 or st.shape[0] < 2 or not st.is_contiguous():
        raise ValueError(f"cu_seqlens must be contiguous int32 of shape (batch + 1,), batch >= 1, got {st.dtype} "
                         f"{st.shape} with strides {st.strides}")
    return xt.shape, st.shape[0] - 1, 0


def _check_prepared_out(t, name, batch, seqlen, heads, dim):
    """A v output in the prepared layout: float8_e4m3fn (batch, heads, dim, >= positions(seq)), rows contiguous."""
    if t.dtype != "float8_e4m3fn" or len(t.shape) != 4 or t.shape[:3] != (batch, heads, dim) or \
            t.shape[3] < prepared_v.positions(seqlen) or t.strides[3] != 1:
        raise ValueError(f"{name} must be float8_e4m3fn (batch, heads, dim, >= seq rounded up to 16) = "
                         f"{(batch, heads, dim, prepared_v.positions(seqlen))} with each row contiguous, got "
                         f"{t.dtype} {t.shape} with strides {t.strides}")


def prepare_v(v, *, out=None, stream=None):
    """fp8 v (float8_e4m3fn device array (batch, seq, heads, dim), CuPy or torch) -> PreparedV: the same codes in
    the layout the Hopper fp8 kernels load without transposing (flashprefill_prepare_v, prepared_v.py), for
    attention(q, k, prepared, ...) with v's descale unchanged. One pass over v's bytes.

    out: optional float8_e4m3fn device array (batch, heads, dim, positions) to write, positions at least seq
    rounded up to 16, each row contiguous; by default a new one of v's library with positions = seq rounded up
    to 16. Enqueued on `stream` (default: the current stream of v's library).
    """
    with _library_call(v, "v", stream) as (library, device, handle, keep):
        vt = _adapt(v, "v", handle, keep)
        if len(vt.shape) != 4 or vt.dtype != "float8_e4m3fn":
            raise ValueError(f"v must be 4-d (batch, seq, heads, dim) float8_e4m3fn, got {vt.dtype} {vt.shape}")
        batch, seqlen, heads, dim = vt.shape
        if out is None:
            out = _arrays.empty((batch, heads, dim, prepared_v.positions(seqlen)), "float8_e4m3fn", v, handle)
        ot = _adapt(out, "out", handle, keep, writable=True)
        _check_prepared_out(ot, "out", batch, seqlen, heads, dim)
        _check_same_device(keep, device, "v")
        params = PrepareVParams(v=vt.ptr, prepared=ot.ptr, batch=batch, seqlen=seqlen, heads=heads, dim=dim,
                                prepared_stride_batch=ot.strides[0], prepared_stride_head=ot.strides[1],
                                prepared_stride_dim=ot.strides[2])
        for axis, stride in zip(("batch", "seq", "head", "dim"), vt.strides):
            setattr(params, f"v_stride_{axis}", stride)
        _check(library.flashprefill_prepare_v(ctypes.byref(params), handle), library)
    return PreparedV(out, seqlen)


def quantize_qkv(q, k, v, *, rotate=True, smooth_k=False, per_block="auto", seed=0, scores="auto",
                 v_layout="auto", probabilities="default"):
    """q, k, v (float device arrays (batch, seq, heads, dim), CuPy or torch) -> a dict of fp8 q, k, v and
    q_descale, k_descale, v_descale ready for attention(**prepared): q and k rotated by the same random-sign
    Hadamard (exact for q k^T; spreads outlier channels before rounding; `seed` picks the signs), k optionally
    smoothed (its mean over tokens subtracted, per (batch, head)), then quantized.

    per_block=tokens: BlockScales, one power-of-two exponent per `tokens` tokens of a head, from the
    library's GPU quantizer (quantize_fp8, the rotation fused into it); inputs that are neither bfloat16 nor float32
    are rounded to float32 first. per_block=None: FlashAttention-3-style factors, one per (batch, kv head),
    computed with CuPy (prepare.quantize_qkv; about 40 ms at 16k tokens, 32/8 heads: for comparisons, not speed).
    per_block="auto" (the default): the block the library serving q's device prefers for these options (the
    multiple its fastest kernel takes, policy.query: 384 on Hopper with e4m3 probabilities, 128 with "fp16" ones,
    64 on gfx950).
    scores="fp16": q's codes within the bound of attention's float16 scores (±1.125 at dim 128, ±0.75 at 192: its
    factor amax / bound, or its blocks' exponents for that bound) and scores="fp16" in the dict, so that
    attention(**prepared) takes them. "fp32": q's codes up to 448, float32 scores.
    v_layout="prepared": v as a PreparedV, which the Hopper kernels load without transposing it (written in that
    layout by the quantizer itself where per_block is a multiple of 16 tokens, else by prepare_v).
    scores="auto", v_layout="auto" (the defaults): the fastest the library serving q's device runs with these
    scales, as it states them (policy.query): on Hopper (the CUDA build) float16 scores (the kernels with 192-key
    tiles where per_block is a multiple of 384 tokens or None, else those with 128-key tiles) and v prepared; "fp32"
    and "default" on gfx950 and with probabilities="fp16".
    The choice is in the dict ("scores" always, and v's type). End to end from float inputs, float16 scores measure the
    same error as float32 ones (docs/numerics.md).
    probabilities: the P of the attention these inputs are for, "default" or "fp16" (then also in the dict).
    """
    if scores not in ("auto", "fp16", "fp32"):
        raise ValueError(f"scores must be 'auto', 'fp16' or 'fp32', got {scores!r}")
    if v_layout not in ("default", "prepared", "auto"):
        raise ValueError(f"v_layout must be 'auto', 'default' or 'prepared', got {v_layout!r}")
    if probabilities not in _PROBABILITIES:
        raise ValueError(f"probabilities must be one of {sorted(_PROBABILITIES)}, got {probabilities!r}")
    if probabilities == "fp16" and (scores == "fp16" or v_layout == "prepared"):
        raise ValueError("probabilities='fp16' takes float32 scores and v in its default layout, got "
                         f"scores={scores!r}, v_layout={v_layout!r}")
    backend = _arrays.backend_of(q, "q")
    _lib.lib(backend)
    _devices.require(q, "q", backend)
    dims = (q.shape[-1], v.shape[-1])
    if per_block == "auto":
        per_block = _preferred_block(backend, dims, probabilities, scores)
    scores, v_layout = _resolve_auto(q, dims, per_block, probabilities, scores, v_layout)
    out = _quantize_qkv(q, k, v, rotate, smooth_k, per_block, seed, scores, v_layout)
    if v_layout == "prepared" and not isinstance(out["v"], PreparedV):
        out["v"] = prepare_v(out["v"])
    if probabilities == "fp16":
        out["probabilities"] = probabilities
    return out


def _preferred_block(backend, dims, probabilities, scores):
    """quantize_qkv's per_block="auto": the tokens per block of the fastest kernel for the options."""
    chosen = policy.query(backend, *dims, probabilities=probabilities, scores="default" if scores == "auto" else scores)
    if chosen is None or chosen.preferred_block_tokens == 0:
        raise Error(Status.ERROR_NOT_SUPPORTED, f"no fp8 kernel of the {backend} library takes per-block scales at "
                    f"dim_qk {dims[0]}, dim_v {dims[1]} with probabilities={probabilities!r}, scores={scores!r}")
    return chosen.preferred_block_tokens


def _resolve_auto(q, dims, per_block, probabilities, scores, v_layout):
    """quantize_qkv's "auto" scores and v_layout as (scores, v_layout) for (dim_qk, dim_v) = dims: what the library
    serving q runs fastest with these scales (policy.query: the first kernel of its table that takes them)."""
    backend = _arrays.backend_of(q, "q")
    if scores == "auto":
        chosen = policy.query(backend, *dims, probabilities=probabilities, per_block=per_block)
        scores = chosen.scores if chosen else "fp32"
    if v_layout == "auto":
        # whether its kernels read v prepared at all (asked with per-head factors, which every fp8 kernel takes); a
        # prepared v holds e4m3 codes for e4m3 probabilities only
        prepared = probabilities == "default" and policy.query(backend, *dims, scores=scores, v_layout="prepared")
        v_layout = "prepared" if prepared else "default"
    return scores, v_layout


def _quantize_qkv(q, k, v, rotate, smooth_k, per_block, seed, scores, v_layout):
    """quantize_qkv's codes and descales; v as a PreparedV where the quantizer writes that layout itself (v_layout
    "prepared", blocks of the multiple the library states), else as every tensor."""
    backend, dims = _arrays.backend_of(q, "q"), (q.shape[-1], v.shape[-1])
    q_code_max = _q_code_max(backend, dims, scores)
    out = {"scores": scores}
    if per_block is not None:
        signs = _device_signs(q.shape[-1], seed, q) if rotate else None
        multiple = _prepared_v_multiple(backend, dims) if v_layout == "prepared" else 0
        v_prepared = multiple > 0 and per_block % multiple == 0
        for name, x in (("q", q), ("k", k), ("v", v)):
            if not _is_dtype(x, ("bfloat16", "float32")):
                x = x.float() if _arrays.is_torch(x) else x.astype("float32")
            mean = _key_mean(x) if name == "k" and smooth_k else None
            out[name], out[f"{name}_descale"] = quantize_fp8(
                x, per_block, signs=None if name == "v" else signs, subtract=mean,
                code_max=q_code_max if name == "q" else fp8.E4M3_MAX,
                layout="prepared" if name == "v" and v_prepared else "default")
        return out
    torch_inputs = _arrays.is_torch(q)
    if torch_inputs:
        import cupy
        import torch
        q, k, v = (cupy.from_dlpack(x) for x in (q, k, v))
    prepared = prepare.quantize_qkv(q, k, v, rotate=rotate, smooth_k=smooth_k, seed=seed, q_code_max=q_code_max)
    for name in "qkv":
        codes, descale = prepared[name], prepared[f"{name}_descale"]
        if torch_inputs:
            codes, descale = torch.from_dlpack(codes).view(torch.float8_e4m3fn), torch.from_dlpack(descale)
        else:
            codes = _arrays.cupy_view(codes, "float8_e4m3fn")
        out[name], out[f"{name}_descale"] = codes, descale
    return out


def _q_code_max(backend, dims, scores):
    """The largest magnitude of q's codes: 448 for float32 scores; for "fp16" the bound the library's float16-score
    kernels take at dims (policy.query, with per-head factors, which every such kernel takes)."""
    if scores != "fp16":
        return fp8.E4M3_MAX
    chosen = policy.query(backend, *dims, scores="fp16")
    if chosen is None:
        raise Error(Status.ERROR_NOT_SUPPORTED, f"no kernel of the {backend} library computes float16 scores at "
                    f"dim_qk {dims[0]}, dim_v {dims[1]}")
    return chosen.q_code_max


def _prepared_v_multiple(backend, dims):
    """The block sizes (a multiple of this) for which the quantizer writes v prepared itself; others take prepare_v."""
    chosen = policy.query(backend, *dims, v_layout="prepared")
    return chosen.prepared_v_block_tokens_multiple if chosen else 0


def _device_signs(dim, seed, like):
    """prepare.rotation_signs(dim, seed) as float32 on the device and library of `like` (torch or CuPy), copied there
    once per (dim, seed, library, device): a host-to-device copy in every call costs more host time than the
    quantizer's launches."""
    return _cached_signs(dim, seed, _arrays.is_torch(like), _arrays.device_of(like, "q"))


@functools.lru_cache(maxsize=32)
def _cached_signs(dim, seed, torch_array, device):
    host = prepare.rotation_signs(dim, seed)
    if torch_array:
        import torch
        return torch.from_numpy(host).to(f"cuda:{device}")
    import cupy
    with cupy.cuda.Device(device):
        return cupy.asarray(host)


def _is_dtype(x, names):
    return str(x.dtype).removeprefix("torch.") in names


def _key_mean(k):
    """prepare.key_mean on the device: float32 (batch, heads, dim), the mean over tokens taken in float64."""
    if _arrays.is_torch(k):
        return k.double().mean(dim=1).float().contiguous()
    return prepare.key_mean(k)
