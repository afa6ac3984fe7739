"""FP8 descales as the Python API takes them, and their translation into flashprefill_descale.

A descale argument (q_descale, k_descale, v_descale of `attention`) is one of:
  * None: descale 1 (the only choice for bf16 inputs);
  * a float32 device array of shape () or (1,): one factor for the whole tensor (PER_TENSOR);
  * a float32 device array of shape (batch, heads_kv): one factor per batch and KV head, for q too, as
    FlashAttention-3 (PER_HEAD);
  * BlockScales(exponents, block_tokens): int8 device array (batch, heads, ceil(seqlen / block_tokens)) of
    power-of-two exponents, heads = heads_q for q and heads_kv for k, v (PER_BLOCK), as quantize_fp8 returns.
value = code * descale in every case. Descale arrays must be contiguous.

Varlen batches (attention_varlen) index sequences as batches: batch is the number of sequences, seqlen the largest
length, each sequence's blocks counted from its first token. Paged k and v caches take BlockScales with exponents
(num_pages, heads_kv) and block_tokens == page_size: one exponent per page and KV head.
"""
import dataclasses

from . import _arrays
from ._params import Descale, DescaleKind


@dataclasses.dataclass(frozen=True)
class BlockScales:
    """Per-block power-of-two descales: value = code * 2^exponents[b, h, token // block_tokens].

    exponents: int8 device array (batch, heads, ceil(seqlen / block_tokens)); block_tokens: int > 0.
    """
    exponents: object
    block_tokens: int

    def __post_init__(self):
        if not isinstance(self.block_tokens, int) or self.block_tokens <= 0:
            raise ValueError(f"block_tokens must be an int > 0, got {self.block_tokens!r}")


def _contiguous(tensor, name):
    if not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got strides {tensor.strides} (elements) for shape "
                         f"{tensor.shape}")
    return tensor


def _block_shape(value, name, batch, heads, seqlen, pages):
    """The shape BlockScales' exponents must have, and its description."""
    if pages is None:
        return (batch, heads, -(-seqlen // value.block_tokens)), "(batch, heads, ceil(seqlen / block_tokens))"
    num_pages, page_size = pages
    if value.block_tokens != page_size:
        raise ValueError(f"{name} of a paged cache takes one exponent per page: block_tokens must be page_size = "
                         f"{page_size}, got {value.block_tokens}")
    return (num_pages, heads), "(num_pages, heads_kv)"


def descale(value, name, *, batch, heads, heads_kv, seqlen, stream, keep, pages=None):
    """flashprefill_descale for one descale argument (see the module docstring).

    heads and seqlen are those of the tensor it descales; pages: None, or (num_pages, page_size) of a paged k or v
    cache. The imported arrays are appended to `keep`; release them once the library call is enqueued.
    """
    if value is None:
        return Descale(kind=DescaleKind.NONE)
    if isinstance(value, BlockScales):
        exponents = _arrays.adapt(value.exponents, f"{name}.exponents", stream)
        keep.append(exponents)
        shape, described = _block_shape(value, name, batch, heads, seqlen, pages)
        if exponents.dtype != "int8" or exponents.shape != shape:
            raise ValueError(f"{name}.exponents must be int8 of shape {described} = {shape}, got {exponents.dtype} "
                             f"{exponents.shape}")
        _contiguous(exponents, f"{name}.exponents")
        return Descale(kind=DescaleKind.PER_BLOCK, block_tokens=value.block_tokens, exponents=exponents.ptr)
    factors = _arrays.adapt(value, name, stream)
    keep.append(factors)
    if factors.dtype != "float32":
        hint = "; wrap int8 exponents as BlockScales(exponents, block_tokens)" if factors.dtype == "int8" else ""
        raise TypeError(f"{name} must be float32 factors or BlockScales, got {factors.dtype}{hint}")
    if factors.shape in ((), (1,)):
        kind = DescaleKind.PER_TENSOR
    elif factors.shape == (batch, heads_kv):
        kind = DescaleKind.PER_HEAD
    else:
        raise ValueError(f"{name} must have shape () or (1,) (per tensor) or (batch, heads_kv) = {(batch, heads_kv)} "
                         f"(per head), got {factors.shape}")
    _contiguous(factors, name)
    return Descale(kind=kind, factors=factors.ptr)
