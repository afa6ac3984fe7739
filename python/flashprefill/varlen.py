"""attention_varlen, supports_varlen, varlen_workspace_bytes: variable-length batches and paged KV caches
(FlashAttention's varlen forms), through the fields flashprefill_params took at 0.10.0.

Varlen: the sequences of a batch lie one after another along one token axis: q (total_q, heads_q, dim_qk), k
(total_k, heads_kv, dim_qk), v (total_k, heads_kv, dim_v). Sequence b's queries are rows cu_seqlens_q[b] ..
cu_seqlens_q[b + 1] - 1, its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b] + seqlen_k(b) - 1, where seqlen_k(b) is
seqused_k[b] if given, else cu_seqlens_k[b + 1] - cu_seqlens_k[b].
Paged: k and v are caches (num_pages, page_size, heads_kv, dim); key j of sequence b lies in page
block_table[b, j // page_size], row j % page_size; sequence b has seqused_k[b] keys.

The offsets, lengths and page ids are int32 device arrays that the kernels read: Python checks their dtypes and
shapes, a check kernel on the stream their values; where one is wrong it writes NaN to all of out and lse and its
reason to the workspace, which check=True reads back (a host wait) and raises.
"""
import ctypes
import dataclasses

import numpy

from . import _arrays
from ._errors import Error
from ._params import DType, Status
from .api import (_INT32_MAX, _adapt, _adapt_lse, _adapt_out, _check, _check_input_dtypes, _check_int32,
                  _check_same_device, _flag, _host_call, _library_call, _out_view, _params, _supported)
from .prepared_v import PreparedV
from .scales import descale

_OUT_AXES = "total_q, heads_q, dim_v"
# supports_varlen without a workspace: validation dereferences no pointer, so an aligned stand-in far from any
# array's addresses checks the call the allocated workspace would make.
_STAND_IN_WORKSPACE_PTR = 1 << 60
_MESSAGE_BYTES = 512


@dataclasses.dataclass(frozen=True)
class _Options:
    """The numerics of a call, as attention takes them."""
    causal: object
    softmax_scale: object
    q_descale: object
    k_descale: object
    v_descale: object
    probabilities: object
    scores: object


@dataclasses.dataclass(frozen=True)
class _Batch:
    """A varlen call's arrays after Python's checks: q, k, v as the ABI's 4-d views, its shapes, its 0.10.0 fields."""
    q: _arrays.Tensor
    k: _arrays.Tensor
    v: _arrays.Tensor
    problem: tuple  # (batch, max_seqlen_q, max_seqlen_k, heads_q, heads_kv, dim_qk, dim_v)
    total_q: int
    pages: object  # (num_pages, page_size) of a paged cache, else None
    fields: dict  # the fields of flashprefill_params appended at 0.10.0, but the workspace

    @property
    def out_shape(self):
        return self.total_q, self.problem[3], self.problem[6]


def _require(library, function):
    if not hasattr(library, function):
        raise Error(Status.ERROR_NOT_SUPPORTED, f"this library (version {library.flashprefill_version().decode()}) "
                    f"has no {function}: varlen batches and paged KV caches need the library that validates them")


def _max_seqlen(value, name):
    if isinstance(value, (bool, numpy.bool_)) or not isinstance(value, (int, numpy.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if not 0 <= value <= _INT32_MAX:
        raise ValueError(f"{name} must be in [0, 2^31 - 1], got {value}")
    return int(value)


def _index_array(obj, name, stream, keep):
    """The Tensor of a contiguous int32 device array (offsets, lengths, page ids)."""
    try:
        t = _adapt(obj, name, stream, keep)
    except TypeError as e:
        raise TypeError(f"{name} must be an int32 device array: {e}") from e
    if t.dtype != "int32":
        raise TypeError(f"{name} must be int32, got {t.dtype}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got strides {t.strides} (elements) for shape {t.shape}")
    return t


def _with_shape(t, name, shape, described):
    if t.shape != shape:
        raise ValueError(f"{name} must have shape {described} = {shape}, got {t.shape}")
    return t


def _seqlen_arrays(cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, stream, keep):
    """(batch, {field: pointer or value}) of the offsets, lengths and page table, checked against each other."""
    cu_q = _index_array(cu_seqlens_q, "cu_seqlens_q", stream, keep)
    if len(cu_q.shape) != 1 or cu_q.shape[0] < 2:
        raise ValueError(f"cu_seqlens_q must be 1-d (batch + 1,) with batch >= 1, got shape {cu_q.shape}")
    batch = cu_q.shape[0] - 1
    fields = {"cu_seqlens_q": cu_q.ptr}
    if block_table is None:
        if cu_seqlens_k is None:
            raise ValueError("cu_seqlens_k is required without block_table (k and v are (total_k, heads_kv, dim))")
        cu_k = _index_array(cu_seqlens_k, "cu_seqlens_k", stream, keep)
        fields["cu_seqlens_k"] = _with_shape(cu_k, "cu_seqlens_k", (batch + 1,), "(batch + 1,), as cu_seqlens_q").ptr
    else:
        if cu_seqlens_k is not None:
            raise ValueError("cu_seqlens_k must be None with block_table: the keys lie in the pages, seqused_k counts "
                             "them")
        if seqused_k is None:
            raise ValueError("seqused_k is required with block_table: it counts each sequence's keys in its pages")
        table = _index_array(block_table, "block_table", stream, keep)
        if len(table.shape) != 2 or table.shape[0] != batch or table.shape[1] < 1:
            raise ValueError(f"block_table must have shape (batch, max_pages) = ({batch}, >= 1), got {table.shape}")
        fields.update(block_table=table.ptr, block_table_stride=table.shape[1])
    if seqused_k is not None:
        used = _index_array(seqused_k, "seqused_k", stream, keep)
        fields["seqused_k"] = _with_shape(used, "seqused_k", (batch,), "(batch,)").ptr
    return batch, fields


def _kv_views(qt, kt, vt, paged):
    """k and v as the ABI's 4-d views, and ((num_pages, page_size) or None, total_k), after the shape checks."""
    kv_axes, ndim = ("(num_pages, page_size, heads_kv, dim)", 4) if paged else ("(total_k, heads_kv, dim)", 3)
    for tensor, name in ((kt, "k"), (vt, "v")):
        if len(tensor.shape) != ndim:
            raise ValueError(f"{name} must be {ndim}-d {kv_axes} {'with' if paged else 'without'} block_table, got "
                             f"shape {tensor.shape}")
    *rows, heads_kv, dim_v = vt.shape
    if kt.shape != (*rows, heads_kv, qt.shape[2]):
        raise ValueError(f"shapes do not match: q {qt.shape}, k {kt.shape}, v {vt.shape}; expected q (total_q, heads_q, "
                         f"dim_qk), k and v {kv_axes} of dim_qk and dim_v")
    if paged:  # the page is the ABI's batch axis
        return kt, vt, tuple(rows), 0
    return _batch_view(kt), _batch_view(vt), None, rows[0]


def _batch_view(t):
    """A 3-d (tokens, heads, dim) Tensor as the ABI's 4-d one of batch stride 0 (varlen: *_stride_batch unused)."""
    return _arrays.Tensor(t.ptr, (1, *t.shape), (0, *t.strides), t.dtype, t.device, t.source, t.imported)


def _q_against_fp8(qt, kt, vt, q_rotation_signs, stream, keep):
    """The 0.10.0 fields of q's dtype: a bf16 q against fp8 k and v (the kernel rounds it, rotated by
    q_rotation_signs where given), else q, k, v of one dtype."""
    if qt.dtype == "bfloat16" and kt.dtype == vt.dtype == "float8_e4m3fn":
        fields = {"q_dtype": DType.BF16}
        if q_rotation_signs is not None:
            st = _adapt(q_rotation_signs, "q_rotation_signs", stream, keep)
            if st.dtype != "float32" or st.shape != (qt.shape[-1],) or not st.is_contiguous():
                raise ValueError(f"q_rotation_signs must be a contiguous float32 device array of dim_qk = "
                                 f"{qt.shape[-1]} signs, got {st.dtype} {st.shape}")
            fields["q_rotation_signs"] = st.ptr
        return fields
    _check_input_dtypes(qt, kt, vt)
    if q_rotation_signs is not None:
        raise ValueError("q_rotation_signs is for a bfloat16 q against float8_e4m3fn k and v")
    return {}


def _adapt_batch(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table, stream,
                 keep, q_rotation_signs=None):
    """The _Batch of a call's arrays, after every check Python can make (the values are the check kernel's)."""
    if isinstance(v, PreparedV):
        raise TypeError("attention_varlen takes v as an array: a PreparedV's rows belong to an equal-length batch")
    qt, kt, vt = (_adapt(x, name, stream, keep) for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if len(qt.shape) != 3:
        raise ValueError(f"q must be 3-d (total_q, heads_q, dim_qk), got shape {qt.shape}")
    q_fields = _q_against_fp8(qt, kt, vt, q_rotation_signs, stream, keep)
    k_view, v_view, pages, total_k = _kv_views(qt, kt, vt, block_table is not None)
    batch, fields = _seqlen_arrays(cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, stream, keep)
    fields.update(q_fields)
    total_q, heads_q, dim_qk = qt.shape
    heads_kv, dim_v = vt.shape[-2:]
    problem = (batch, _max_seqlen(max_seqlen_q, "max_seqlen_q"), _max_seqlen(max_seqlen_k, "max_seqlen_k"), heads_q,
               heads_kv, dim_qk, dim_v)
    _check_int32((*problem, total_q, total_k, *(pages or ())), "q, k, v")
    fields.update(total_q=total_q, total_k=total_k)
    if pages is not None:
        fields.update(num_pages=pages[0], page_size=pages[1])
    return _Batch(_batch_view(qt), k_view, v_view, problem, total_q, pages, fields)


def _params_of(batch, out_view, lse_ptr, options, stream, keep):
    """flashprefill_params of the _Batch with out (ptr, 3-d strides) and lse; the workspace left for the caller."""
    n, max_q, max_k, heads_q, heads_kv, _, _ = batch.problem
    descales = tuple(descale(value, name, batch=n, heads=heads, heads_kv=heads_kv, seqlen=seqlen, stream=stream,
                             keep=keep, pages=pages)
                     for value, name, heads, seqlen, pages in (
                         (options.q_descale, "q_descale", heads_q, max_q, None),
                         (options.k_descale, "k_descale", heads_kv, max_k, batch.pages),
                         (options.v_descale, "v_descale", heads_kv, max_k, batch.pages)))
    ptr, strides = out_view
    p = _params(batch.q, batch.k, batch.v, (ptr, (0, *strides)), lse_ptr, batch.problem, options.causal,
                options.softmax_scale, descales, options.probabilities, options.scores)
    for name, value in batch.fields.items():
        setattr(p, name, value)
    return p


def _adapt_workspace(workspace, needed, stream, keep):
    wt = _adapt(workspace, "workspace", stream, keep, writable=True)
    if wt.dtype != "uint8" or len(wt.shape) != 1 or not wt.is_contiguous() or wt.shape[0] < needed:
        raise ValueError(f"workspace must be a contiguous 1-d uint8 device array of at least varlen_workspace_bytes() "
                         f"= {needed} bytes, got {wt.dtype} {wt.shape} with strides {wt.strides}")
    return wt


def _workspace_bytes(library, params):
    """(status, bytes) of flashprefill_workspace_bytes."""
    _require(library, "flashprefill_workspace_bytes")
    needed = ctypes.c_int64()
    status = library.flashprefill_workspace_bytes(ctypes.byref(params), ctypes.byref(needed))
    return status, needed.value


def _raise_flagged(library, workspace_ptr):
    """Error (INVALID_ARGUMENT) with the check kernel's reason where it flagged the device arrays of the call that
    used this workspace (run to completion)."""
    _require(library, "flashprefill_workspace_error")
    error = ctypes.c_int32()
    message = ctypes.create_string_buffer(_MESSAGE_BYTES)
    _check(library.flashprefill_workspace_error(workspace_ptr, ctypes.byref(error), message, _MESSAGE_BYTES), library)
    if error.value != 0:
        raise Error(Status.ERROR_INVALID_ARGUMENT, message.value.decode(errors="replace"))


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, seqused_k=None,
                     block_table=None, causal=True, softmax_scale=None, q_descale=None, k_descale=None, v_descale=None,
                     probabilities="default", scores="default", out=None, return_lse=False, lse=None, workspace=None,
                     check=False, q_rotation_signs=None, stream=None):
    """Attention over a batch of sequences of different lengths (FlashAttention's flash_attn_varlen_func), k and v
    contiguous or in a paged cache.

    q: (total_q, heads_q, dim_qk); k: (total_k, heads_kv, dim_qk); v: (total_k, heads_kv, dim_v); all bfloat16 or all
    float8_e4m3fn device arrays, the last dim contiguous; or q bfloat16 against float8_e4m3fn k and v (dim_qk 128):
    the kernel rounds q to e4m3 itself, one power of two per 64 query rows (gfx950: 32), after rotating it by
    q_rotation_signs (float32 (dim_qk,) of +1 / -1, the signs k was rotated with: fp.quantize_fp8(k, signs=...))
    where given; q_descale must then be None. With block_table, k and v are caches (num_pages, page_size,
    heads_kv, dim_qk / dim_v), page_size a power of two, at least 16.
    cu_seqlens_q: int32 device array (batch + 1,) of offsets into q's rows; cu_seqlens_k likewise into k's (None with
    block_table). max_seqlen_q, max_seqlen_k: ints > 0, at least every sequence's length.
    seqused_k: optional int32 device array (batch,): sequence b's keys are the first seqused_k[b] of its rows (of its
    pages with block_table, where it is required). block_table: int32 device array (batch, max_pages) of page ids,
    contiguous; entries past a sequence's last page are not read.
    causal: per sequence, aligned bottom-right (query i of a sequence with n_q queries and n_k keys sees key j iff
    j <= i + n_k - n_q); a query that sees no key (lengths 0, more queries than keys) gets out 0 and lse -inf.
    softmax_scale, probabilities, scores: as attention.
    q_descale, k_descale, v_descale: fp8 only; None, float32 factors () or (1,) (per tensor) or (batch, heads_kv) (per
    sequence and KV head), or BlockScales whose exponents are (batch, heads, ceil(max_seqlen / block_tokens)), each
    sequence's blocks counted from its first token. Paged k and v: BlockScales with exponents (num_pages, heads_kv)
    and block_tokens == page_size (one per page and KV head).
    out: optional bfloat16 (total_q, heads_q, dim_v) device array; rows past cu_seqlens_q[batch] are left as they
    are. By default a new one of q's library. return_lse: also return lse, float32 (heads_q, total_q); lse: optional
    contiguous float32 (heads_q, total_q) device array to write it into (return_lse=True), by default a new one.
    workspace: optional contiguous uint8 device array of at least varlen_workspace_bytes(...) bytes, where the check
    kernel writes (one call at a time); by default a new one each call.
    check: after the call, wait for the stream and raise Error (Status.ERROR_INVALID_ARGUMENT) with the check
    kernel's reason where cu_seqlens, seqused_k or block_table held values out of range (out and lse are then NaN).
    stream: as attention. Returns out, or (out, lse). Without check, enqueues the work and returns without waiting.
    Raises as attention does; Error (Status.ERROR_NOT_SUPPORTED) from a library without varlen support.
    """
    options = _Options(causal, softmax_scale, q_descale, k_descale, v_descale, probabilities, scores)
    check = _flag(check, "check")
    with _library_call(q, "q", stream) as (library, device, handle, keep):
        batch = _adapt_batch(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table,
                             handle, keep, q_rotation_signs)
        if out is None:
            out = _arrays.empty(batch.out_shape, "bfloat16", q, handle)
        ot = _adapt_out(out, batch.out_shape, _OUT_AXES, handle, keep)
        lse, lse_ptr = _adapt_lse(lse, return_lse, (batch.problem[3], batch.total_q), "heads_q, total_q", q, handle,
                                  keep)
        params = _params_of(batch, (ot.ptr, ot.strides), lse_ptr, options, handle, keep)
        status, needed = _workspace_bytes(library, params)
        _check(status, library)
        if workspace is None:
            workspace = _arrays.empty((needed,), "uint8", q, handle)
        wt = _adapt_workspace(workspace, needed, handle, keep)
        _check_same_device(keep, device, "q")
        params.workspace, params.workspace_bytes = wt.ptr, wt.shape[0]
        _check(library.flashprefill_forward(ctypes.byref(params), handle), library)
        if check:
            _arrays.synchronize(handle, q)
            _raise_flagged(library, wt.ptr)
    return (out, lse) if return_lse else out


def supports_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, seqused_k=None,
                    block_table=None, causal=True, softmax_scale=None, q_descale=None, k_descale=None, v_descale=None,
                    probabilities="default", scores="default", out=None, workspace=None, q_rotation_signs=None):
    """Whether this build has a kernel for attention_varlen(...) with these arguments, without touching the GPU or
    the data (the values of cu_seqlens, seqused_k and block_table are the check kernel's). Arguments as
    attention_varlen. True / False (Status.ERROR_NOT_SUPPORTED); raises Error with Status.ERROR_INVALID_ARGUMENT
    when the call could never be valid."""
    options = _Options(causal, softmax_scale, q_descale, k_descale, v_descale, probabilities, scores)
    with _host_call(q, "q") as (library, keep):
        batch = _adapt_batch(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table,
                             None, keep, q_rotation_signs)
        params = _params_of(batch, _out_view(out, batch.out_shape, _OUT_AXES, keep), None, options, None, keep)
        if not hasattr(library, "flashprefill_workspace_bytes"):
            return False  # a library from before the varlen support: no kernel of it takes the call
        status, needed = _workspace_bytes(library, params)
        if status == Status.SUCCESS:
            if workspace is None:
                params.workspace, params.workspace_bytes = _STAND_IN_WORKSPACE_PTR, needed
            else:
                wt = _adapt_workspace(workspace, needed, None, keep)
                params.workspace, params.workspace_bytes = wt.ptr, wt.shape[0]
            status = library.flashprefill_supports(ctypes.byref(params))
    return _supported(status, library)


def varlen_workspace_bytes(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, seqused_k=None,
                           block_table=None, causal=True, softmax_scale=None, q_descale=None, k_descale=None,
                           v_descale=None, probabilities="default", scores="default", q_rotation_signs=None):
    """The bytes of the workspace attention_varlen(...) needs with these arguments (its own from the shapes alone:
    batch, total_q, max_seqlen_q, heads_kv), without touching the GPU or the data. Raises as supports_varlen,
    and Error (Status.ERROR_NOT_SUPPORTED) where no kernel takes the call."""
    options = _Options(causal, softmax_scale, q_descale, k_descale, v_descale, probabilities, scores)
    with _host_call(q, "q") as (library, keep):
        batch = _adapt_batch(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table,
                             None, keep, q_rotation_signs)
        params = _params_of(batch, _out_view(None, batch.out_shape, _OUT_AXES, keep), None, options, None, keep)
        status, needed = _workspace_bytes(library, params)
        _check(status, library)
    return needed
