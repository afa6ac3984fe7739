"""Paged KV caches of e4m3 codes with one power-of-two exponent per (page, kv head): quantize_paged writes new token
rows into them on the GPU (flashprefill_quantize_paged), quantize_paged_model is its numpy model, bit for bit, and
PagedCache holds one cache's two arrays.

A cache is codes float8_e4m3fn (num_pages, page_size, heads_kv, dim) and exponents int8 (num_pages, heads_kv), value =
code · 2^exponent, what attention's paged form takes as k or v with BlockScales(exponents, page_size). Token t goes to
slot slot_mapping[t] = page · page_size + row (vLLM's convention; < 0 skips it). PAGE_EMPTY (-128) marks a (page, head)
holding no token. A page's exponent only grows: a call raises it to what its new rows need and re-encodes the codes
already there (exactly a division by a power of two, rounded where a code becomes subnormal), so appending tokens one
at a time ends at the exponent of writing them at once, each value within one e4m3 unit of that exponent (half a unit
where its code is normal). The tokens of one page must be consecutive in x (as an engine orders them); see
include/flashprefill.h for the whole contract.
"""
import ctypes
import dataclasses

import numpy as np

from . import _arrays, fp8, prepare
from ._errors import Error
from ._params import DType, QuantizePagedParams, Status
from .api import _adapt, _check, _check_same_device, _library_call

PAGE_EMPTY = -128  # FLASHPREFILL_PAGE_EMPTY
_X_DTYPES = {"bfloat16": DType.BF16, "float32": DType.FP32}


def reencode(codes, shift):
    """uint8 e4m3 codes (any shape) at exponent e -> the same values at e + shift (shift >= 0, int or an array that
    broadcasts): e4m3(decode(code) · 2^-shift), round to nearest even; exact but where a code becomes subnormal; NaN
    codes give the NaN code 0x7f."""
    xp = fp8.array_module(codes)
    scaled = fp8.e4m3_decode(codes).astype(xp.float64) * xp.ldexp(1.0, -xp.asarray(shift, dtype=xp.int32))
    return fp8.e4m3_encode(scaled.astype(xp.float32))


def quantize_paged_model(x, slot_mapping, codes, exponents, signs=None):
    """flashprefill_quantize_paged on the host, bit for bit: the cache after writing x's rows.

    x: float (tokens, heads_kv, dim); slot_mapping: ints (tokens,); codes: uint8 (num_pages, page_size, heads_kv,
    dim) and exponents: int8 (num_pages, heads_kv), the cache before the call (not modified); signs: None or (dim,)
    +1 / -1 (prepare.rotation_signs). Per page written, per head: need = fp8.block_exponents of max |y| over its new
    rows (y = prepare.transform of x), new = max(old, need), -127 where both are PAGE_EMPTY; where the page was not
    empty and new > old, every row of it re-encoded (reencode); then the new rows encoded at new. Returns (codes,
    exponents), new arrays.
    """
    y = prepare.transform(np.asarray(x)[None], signs)[0]
    num_pages, page_size = codes.shape[:2]
    codes, exponents = codes.copy(), exponents.copy()
    slots = np.asarray(slot_mapping, dtype=np.int64)
    pages = np.where((slots >= 0) & (slots // page_size < num_pages), slots // page_size, -1)
    for page in dict.fromkeys(pages[pages >= 0].tolist()):
        tokens = np.flatnonzero(pages == page)
        rows = y[tokens]  # (n, heads_kv, dim)
        need = fp8.block_exponents(np.abs(rows).max(axis=(0, 2)))
        old = exponents[page].astype(np.int32)
        new = np.maximum(np.maximum(old, need), -127)
        grown = (old != PAGE_EMPTY) & (new > old)
        codes[page][:, grown] = reencode(codes[page][:, grown], (new - old)[grown][:, None])
        scaled = rows.astype(np.float64) / np.ldexp(1.0, new)[None, :, None]
        codes[page, slots[tokens] % page_size] = fp8.e4m3_encode(scaled.astype(np.float32))
        exponents[page] = new
    return codes, exponents


def dequantize_paged(codes, exponents):
    """float64 (num_pages, page_size, heads_kv, dim) values of a cache: code · 2^exponent (NaN where a page is
    PAGE_EMPTY: it holds no value)."""
    scale = np.where(exponents == PAGE_EMPTY, np.nan, np.ldexp(1.0, exponents.astype(np.int32)))
    return fp8.e4m3_decode(codes).astype(np.float64) * scale[:, None, :, None]


def quantize_paged(x, slot_mapping, codes_cache, exponents, *, signs=None, stream=None):
    """Writes new token rows into a paged e4m3 cache on the GPU (flashprefill_quantize_paged), in place.

    x: bfloat16 or float32 device array (tokens, heads_kv, dim), CuPy or torch; dim a multiple of 32 up to 256.
    slot_mapping: int32 device array (tokens,), contiguous: page · page_size + row, < 0 to skip the token; the
    tokens of one page consecutive. codes_cache: float8_e4m3fn (num_pages, page_size, heads_kv, dim), any strides the
    ABI takes; exponents: int8 (num_pages, heads_kv), contiguous, PAGE_EMPTY where a page holds no token.
    signs: None, or float32 device array (dim,) of +1 / -1 (prepare.rotation_signs): rotate k as its queries are.
    Bit-identical to quantize_paged_model. Enqueued on `stream` (default: the current stream of x's library).
    """
    with _library_call(x, "x", stream) as (library, device, handle, keep):
        if not hasattr(library, "flashprefill_quantize_paged"):
            raise Error(Status.ERROR_NOT_SUPPORTED, f"this library (version {library.flashprefill_version().decode()}) "
                        "has no flashprefill_quantize_paged (from 0.10.0 on)")
        xt = _adapt(x, "x", handle, keep)
        st = _adapt(slot_mapping, "slot_mapping", handle, keep)
        ct = _adapt(codes_cache, "codes_cache", handle, keep, writable=True)
        et = _adapt(exponents, "exponents", handle, keep, writable=True)
        if xt.dtype not in _X_DTYPES:
            raise TypeError(f"x must be bfloat16 or float32, got {xt.dtype}")
        if len(xt.shape) != 3:
            raise ValueError(f"x must be 3-d (tokens, heads_kv, dim), got shape {xt.shape}")
        tokens, heads_kv, dim = xt.shape
        if st.dtype != "int32" or st.shape != (tokens,) or not st.is_contiguous():
            raise ValueError(f"slot_mapping must be contiguous int32 of shape (tokens,) = {(tokens,)}, got {st.dtype} "
                             f"{st.shape} with strides {st.strides}")
        if ct.dtype != "float8_e4m3fn" or len(ct.shape) != 4 or ct.shape[2:] != (heads_kv, dim):
            raise ValueError(f"codes_cache must be float8_e4m3fn (num_pages, page_size, heads_kv, dim) with (heads_kv, "
                             f"dim) = {(heads_kv, dim)}, got {ct.dtype} {ct.shape}")
        num_pages, page_size = ct.shape[:2]
        if et.dtype != "int8" or et.shape != (num_pages, heads_kv) or not et.is_contiguous():
            raise ValueError(f"exponents must be contiguous int8 of shape (num_pages, heads_kv) = "
                             f"{(num_pages, heads_kv)}, got {et.dtype} {et.shape} with strides {et.strides}")
        signs_ptr = None
        if signs is not None:
            sg = _adapt(signs, "signs", handle, keep)
            if sg.dtype != "float32" or sg.shape != (dim,) or not sg.is_contiguous():
                raise ValueError(f"signs must be a contiguous float32 array of shape {(dim,)}, got {sg.dtype} "
                                 f"{sg.shape} with strides {sg.strides}")
            signs_ptr = sg.ptr
        _check_same_device(keep, device, "x")
        params = QuantizePagedParams(x=xt.ptr, slot_mapping=st.ptr, codes=ct.ptr, exponents=et.ptr, signs=signs_ptr,
                                     tokens=tokens, heads_kv=heads_kv, dim=dim, num_pages=num_pages,
                                     page_size=page_size, x_dtype=_X_DTYPES[xt.dtype])
        for prefix, axes, strides in (("x", ("token", "head", "dim"), xt.strides),
                                      ("codes", ("page", "row", "head", "dim"), ct.strides)):
            for axis, stride in zip(axes, strides):
                setattr(params, f"{prefix}_stride_{axis}", stride)
        _check(library.flashprefill_quantize_paged(ctypes.byref(params), handle), library)


@dataclasses.dataclass
class PagedCache:
    """One paged e4m3 cache (k's or v's): codes float8_e4m3fn (num_pages, page_size, heads_kv, dim) and exponents
    int8 (num_pages, heads_kv) device arrays; page_size their second extent."""
    codes: object
    exponents: object

    @classmethod
    def empty(cls, num_pages, page_size, heads_kv, dim, like):
        """A new cache on the device and of the library of `like` (a device array: torch for torch, else CuPy),
        every page empty, allocated and emptied on that library's current stream."""
        device = _arrays.device_of(like, "like")
        handle = _arrays.resolve_stream(None, like, device)
        with _arrays.on_device(like, device):
            codes = _arrays.empty((num_pages, page_size, heads_kv, dim), "float8_e4m3fn", like, handle)
            exponents = _arrays.empty((num_pages, heads_kv), "int8", like, handle)
            cache = cls(codes, exponents)
            cache.release(slice(None))
        return cache

    @property
    def page_size(self):
        return self.codes.shape[1]

    def write(self, x, slot_mapping, *, signs=None, stream=None):
        """quantize_paged of x's rows into this cache."""
        quantize_paged(x, slot_mapping, self.codes, self.exponents, signs=signs, stream=stream)

    def release(self, pages):
        """Marks `pages` (an index of the exponents' first axis: ints, a slice, a device array) empty, so that they
        can be handed to another sequence: their exponents PAGE_EMPTY, on the arrays' library's current stream."""
        self.exponents[pages] = PAGE_EMPTY
