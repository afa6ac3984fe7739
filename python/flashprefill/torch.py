"""flashprefill's calls as torch custom operators (torch.library, namespace "flashprefill"), for engines that run
them inside torch.compile graphs and CUDA graphs. `import flashprefill.torch` registers them; call the functions
here or torch.ops.flashprefill.<name>. docs/torch.md describes each.

Every operator calls the Python API (api.py, varlen.py, paged.py, merge.py) with the tensors it is given, which
enqueues the work on torch's current stream (a CUDA graph's capture stream records it) and never waits on the host.
Its fake implementation gives the shapes, dtypes and strides (row-major) the API allocates. The functional forms
return new tensors from torch's allocator; the *_out forms write the caller's tensors and allocate nothing
(attention_varlen_out takes its workspace from the caller too), so that a CUDA graph can own every buffer.

A descale is an optional tensor and its block_tokens: float32 factors with block_tokens 0, or int8 exponents with
block_tokens > 0 (BlockScales(exponents, block_tokens) of the API; split_descale gives the pair of a BlockScales).
"""
import typing

try:
    import torch
except ImportError as e:
    raise ImportError(f"flashprefill.torch registers torch custom operators and needs torch, which is not installed "
                      f"({e}); install torch 2.4 or later, or call flashprefill's own functions (torch tensors or "
                      "CuPy arrays)") from e
if not hasattr(torch.library, "custom_op"):
    raise ImportError(f"flashprefill.torch needs torch.library.custom_op (torch 2.4 or later), this torch is "
                      f"{torch.__version__}")

from . import api, fp8, merge, paged, prepare, varlen  # noqa: E402  (after torch: a missing torch says so first)
from .prepared_v import PreparedV  # noqa: E402
from .scales import BlockScales  # noqa: E402

Tensor = torch.Tensor
OptionalTensor = typing.Optional[torch.Tensor]
OptionalFloat = typing.Optional[float]
_CUDA = "cuda"


def split_descale(descale):
    """(tensor, block_tokens) of a descale as the API takes it: None -> (None, 0), float32 factors -> (factors, 0),
    BlockScales -> (exponents, block_tokens)."""
    if isinstance(descale, BlockScales):
        return descale.exponents, descale.block_tokens
    return descale, 0


def rotation_signs(dim, seed=0, device=_CUDA):
    """prepare.rotation_signs(dim, seed) as a float32 tensor on `device`: the `signs` of quantize_fp8 and
    quantize_paged and the q_rotation_signs of attention_varlen. A host-to-device copy: make it once, outside a
    captured or compiled region."""
    return torch.from_numpy(prepare.rotation_signs(dim, seed)).to(device)


def _descale(tensor, block_tokens):
    return tensor if tensor is None or block_tokens == 0 else BlockScales(tensor, block_tokens)


def _numerics(causal, softmax_scale, descales, probabilities, scores):
    """The API's keyword arguments of the numerics; descales: ((q, q_block_tokens), (k, ...), (v, ...))."""
    (q, q_block), (k, k_block), (v, v_block) = descales
    return dict(causal=causal, softmax_scale=softmax_scale, q_descale=_descale(q, q_block),
                k_descale=_descale(k, k_block), v_descale=_descale(v, v_block), probabilities=probabilities,
                scores=scores)


def _ceil_div(a, b):
    return (a + b - 1) // b


# ---------------------------------------------------------------------------------------------------------
# attention: q, k, v (batch, seq, heads, dim); v prepared (batch, heads_kv, dim_v, positions) with v_prepared

def _v(v, k, v_prepared):
    return PreparedV(v, k.shape[1]) if v_prepared else v


@torch.library.custom_op("flashprefill::attention", mutates_args=(), device_types=_CUDA)
def attention(q: Tensor, k: Tensor, v: Tensor, q_descale: OptionalTensor = None, k_descale: OptionalTensor = None,
              v_descale: OptionalTensor = None, *, causal: bool = True, softmax_scale: OptionalFloat = None,
              q_block_tokens: int = 0, k_block_tokens: int = 0, v_block_tokens: int = 0, v_prepared: bool = False,
              probabilities: str = "default", scores: str = "default") -> Tensor:
    """flashprefill.attention: out, bfloat16 (batch, seqlen_q, heads_q, dim_v)."""
    descales = ((q_descale, q_block_tokens), (k_descale, k_block_tokens), (v_descale, v_block_tokens))
    return api.attention(q, k, _v(v, k, v_prepared), **_numerics(causal, softmax_scale, descales, probabilities,
                                                                   scores))


@torch.library.custom_op("flashprefill::attention_lse", mutates_args=(), device_types=_CUDA)
def attention_lse(q: Tensor, k: Tensor, v: Tensor, q_descale: OptionalTensor = None,
                  k_descale: OptionalTensor = None, v_descale: OptionalTensor = None, *, causal: bool = True,
                  softmax_scale: OptionalFloat = None, q_block_tokens: int = 0, k_block_tokens: int = 0,
                  v_block_tokens: int = 0, v_prepared: bool = False, probabilities: str = "default",
                  scores: str = "default") -> tuple[Tensor, Tensor]:
    """flashprefill.attention(..., return_lse=True): (out, lse float32 (batch, heads_q, seqlen_q))."""
    descales = ((q_descale, q_block_tokens), (k_descale, k_block_tokens), (v_descale, v_block_tokens))
    return api.attention(q, k, _v(v, k, v_prepared), return_lse=True,
                         **_numerics(causal, softmax_scale, descales, probabilities, scores))


@torch.library.custom_op("flashprefill::attention_out", mutates_args=("out", "lse"), device_types=_CUDA)
def attention_out(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: OptionalTensor = None,
                  q_descale: OptionalTensor = None, k_descale: OptionalTensor = None,
                  v_descale: OptionalTensor = None, *, causal: bool = True, softmax_scale: OptionalFloat = None,
                  q_block_tokens: int = 0,
                  k_block_tokens: int = 0, v_block_tokens: int = 0, v_prepared: bool = False,
                  probabilities: str = "default", scores: str = "default") -> None:
    """flashprefill.attention into the caller's out (and lse, where given); allocates nothing."""
    descales = ((q_descale, q_block_tokens), (k_descale, k_block_tokens), (v_descale, v_block_tokens))
    api.attention(q, k, _v(v, k, v_prepared), out=out, lse=lse, return_lse=lse is not None,
                  **_numerics(causal, softmax_scale, descales, probabilities, scores))


def _attention_out_shape(q, v, v_prepared):
    batch, seqlen_q, heads_q, _ = q.shape
    return batch, seqlen_q, heads_q, v.shape[2] if v_prepared else v.shape[3]


# Fakes are called as the dispatcher calls the operator: the parameters before `*` positionally (torch refuses
# keyword-only tensors), the others by keyword.
@attention.register_fake
def _(q, k, v, *descales, v_prepared=False, **numerics):
    return q.new_empty(_attention_out_shape(q, v, v_prepared), dtype=torch.bfloat16)


@attention_lse.register_fake
def _(q, k, v, *descales, v_prepared=False, **numerics):
    batch, seqlen_q, heads_q, dim_v = _attention_out_shape(q, v, v_prepared)
    return (q.new_empty((batch, seqlen_q, heads_q, dim_v), dtype=torch.bfloat16),
            q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32))


@attention_out.register_fake
def _(*args, **kwargs):
    return None


# ---------------------------------------------------------------------------------------------------------
# attention_varlen: q (total_q, heads_q, dim_qk); k, v (total_k, heads_kv, dim), or paged caches (num_pages,
# page_size, heads_kv, dim) with block_table; q bfloat16 against float8_e4m3fn k and v takes q_rotation_signs

@torch.library.custom_op("flashprefill::attention_varlen", mutates_args=(), device_types=_CUDA)
def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: OptionalTensor,
                     max_seqlen_q: int, max_seqlen_k: int, seqused_k: OptionalTensor = None,
                     block_table: OptionalTensor = None, q_descale: OptionalTensor = None,
                     k_descale: OptionalTensor = None, v_descale: OptionalTensor = None,
                     q_rotation_signs: OptionalTensor = None, *, causal: bool = True,
                     softmax_scale: OptionalFloat = None, q_block_tokens: int = 0, k_block_tokens: int = 0,
                     v_block_tokens: int = 0, probabilities: str = "default", scores: str = "default") -> Tensor:
    """flashprefill.attention_varlen: out, bfloat16 (total_q, heads_q, dim_v); its workspace from torch's
    allocator."""
    descales = ((q_descale, q_block_tokens), (k_descale, k_block_tokens), (v_descale, v_block_tokens))
    return varlen.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                   seqused_k=seqused_k, block_table=block_table, q_rotation_signs=q_rotation_signs,
                                   **_numerics(causal, softmax_scale, descales, probabilities, scores))


@torch.library.custom_op("flashprefill::attention_varlen_lse", mutates_args=(), device_types=_CUDA)
def attention_varlen_lse(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: OptionalTensor,
                         max_seqlen_q: int, max_seqlen_k: int, seqused_k: OptionalTensor = None,
                         block_table: OptionalTensor = None, q_descale: OptionalTensor = None,
                         k_descale: OptionalTensor = None, v_descale: OptionalTensor = None,
                         q_rotation_signs: OptionalTensor = None, *, causal: bool = True,
                         softmax_scale: OptionalFloat = None, q_block_tokens: int = 0, k_block_tokens: int = 0,
                         v_block_tokens: int = 0, probabilities: str = "default",
                         scores: str = "default") -> tuple[Tensor, Tensor]:
    """flashprefill.attention_varlen(..., return_lse=True): (out, lse float32 (heads_q, total_q))."""
    descales = ((q_descale, q_block_tokens), (k_descale, k_block_tokens), (v_descale, v_block_tokens))
    return varlen.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                   seqused_k=seqused_k, block_table=block_table, q_rotation_signs=q_rotation_signs,
                                   return_lse=True, **_numerics(causal, softmax_scale, descales, probabilities,
                                                                scores))


@torch.library.custom_op("flashprefill::attention_varlen_out", mutates_args=("out", "workspace", "lse"),
                         device_types=_CUDA)
def attention_varlen_out(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: OptionalTensor,
                         max_seqlen_q: int, max_seqlen_k: int, out: Tensor, workspace: Tensor,
                         lse: OptionalTensor = None, seqused_k: OptionalTensor = None,
                         block_table: OptionalTensor = None, q_descale: OptionalTensor = None,
                         k_descale: OptionalTensor = None, v_descale: OptionalTensor = None,
                         q_rotation_signs: OptionalTensor = None, *, causal: bool = True,
                         softmax_scale: OptionalFloat = None, q_block_tokens: int = 0, k_block_tokens: int = 0,
                         v_block_tokens: int = 0, probabilities: str = "default", scores: str = "default") -> None:
    """flashprefill.attention_varlen into the caller's out (and lse, where given) with the caller's workspace
    (uint8, at least varlen_workspace_bytes); allocates nothing."""
    descales = ((q_descale, q_block_tokens), (k_descale, k_block_tokens), (v_descale, v_block_tokens))
    varlen.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k=seqused_k,
                            block_table=block_table, q_rotation_signs=q_rotation_signs, out=out, lse=lse,
                            return_lse=lse is not None, workspace=workspace,
                            **_numerics(causal, softmax_scale, descales, probabilities, scores))


@attention_varlen.register_fake
def _(q, k, v, *args, **kwargs):
    return q.new_empty((q.shape[0], q.shape[1], v.shape[-1]), dtype=torch.bfloat16)


@attention_varlen_lse.register_fake
def _(q, k, v, *args, **kwargs):
    total_q, heads_q, _ = q.shape
    return (q.new_empty((total_q, heads_q, v.shape[-1]), dtype=torch.bfloat16),
            q.new_empty((heads_q, total_q), dtype=torch.float32))


@attention_varlen_out.register_fake
def _(*args, **kwargs):
    return None


def varlen_workspace(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, **options):
    """A uint8 tensor of flashprefill.varlen_workspace_bytes(...) on q's device, for attention_varlen_out; options
    (seqused_k, block_table, descales as the API takes them, ...) as varlen_workspace_bytes. A host call into the
    library: make it once (for the largest batch, total_q and max_seqlen_q the engine runs), outside a captured or
    compiled region."""
    needed = varlen.varlen_workspace_bytes(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, **options)
    return torch.empty((needed,), dtype=torch.uint8, device=q.device)


# ---------------------------------------------------------------------------------------------------------
# The fp8 quantizer: q of each call, k and v packed (cu_seqlens), and the paged KV-cache writer

@torch.library.custom_op("flashprefill::quantize_fp8", mutates_args=(), device_types=_CUDA)
def quantize_fp8(x: Tensor, block: int, signs: OptionalTensor = None, subtract: OptionalTensor = None, *,
                 code_max: float = fp8.E4M3_MAX, layout: str = "default") -> tuple[Tensor, Tensor]:
    """flashprefill.quantize_fp8 of x (batch, seq, heads, dim): (codes float8_e4m3fn, exponents int8 (batch, heads,
    ceil(seq / block))); codes of x's shape, or with layout "prepared" (batch, heads, dim, seq rounded up to 16)."""
    codes, scales = api.quantize_fp8(x, block, signs=signs, subtract=subtract, code_max=code_max, layout=layout)
    return codes.data if isinstance(codes, PreparedV) else codes, scales.exponents


@torch.library.custom_op("flashprefill::quantize_fp8_varlen", mutates_args=(), device_types=_CUDA)
def quantize_fp8_varlen(x: Tensor, cu_seqlens: Tensor, max_seqlen: int, block: int, signs: OptionalTensor = None,
                        subtract: OptionalTensor = None, *, code_max: float = fp8.E4M3_MAX) -> tuple[Tensor, Tensor]:
    """flashprefill.quantize_fp8 of a packed x (total, heads, dim): (codes float8_e4m3fn (total, heads, dim),
    exponents int8 (batch, heads, ceil(max_seqlen / block))). Rows outside every sequence and the slots past a
    sequence's blocks are not written (torch.empty's)."""
    codes, scales = api.quantize_fp8(x, block, signs=signs, subtract=subtract, code_max=code_max,
                                     cu_seqlens=cu_seqlens, max_seqlen=max_seqlen)
    return codes, scales.exponents


@torch.library.custom_op("flashprefill::quantize_fp8_out", mutates_args=("codes", "exponents"), device_types=_CUDA)
def quantize_fp8_out(x: Tensor, codes: Tensor, exponents: Tensor, block: int, cu_seqlens: OptionalTensor = None,
                     signs: OptionalTensor = None, subtract: OptionalTensor = None, *, max_seqlen: int = 0,
                     code_max: float = fp8.E4M3_MAX, layout: str = "default") -> None:
    """flashprefill.quantize_fp8 into the caller's codes and exponents (packed with cu_seqlens and max_seqlen);
    allocates nothing."""
    api.quantize_fp8(x, block, signs=signs, subtract=subtract, code_max=code_max, layout=layout, codes=codes,
                     exponents=exponents, cu_seqlens=cu_seqlens,
                     max_seqlen=None if cu_seqlens is None else max_seqlen)


@torch.library.custom_op("flashprefill::quantize_paged", mutates_args=("codes_cache", "exponents"),
                         device_types=_CUDA)
def quantize_paged(x: Tensor, slot_mapping: Tensor, codes_cache: Tensor, exponents: Tensor,
                   signs: OptionalTensor = None) -> None:
    """flashprefill.quantize_paged: x's rows (tokens, heads_kv, dim) written into the paged e4m3 cache in place."""
    paged.quantize_paged(x, slot_mapping, codes_cache, exponents, signs=signs)


@quantize_fp8.register_fake
def _(x, block, *tensors, layout="default", **options):
    batch, seqlen, heads, dim = x.shape
    shape = (batch, heads, dim, _ceil_div(seqlen, 16) * 16) if layout == "prepared" else x.shape
    return (x.new_empty(shape, dtype=torch.float8_e4m3fn),
            x.new_empty((batch, heads, _ceil_div(seqlen, block)), dtype=torch.int8))


@quantize_fp8_varlen.register_fake
def _(x, cu_seqlens, max_seqlen, block, *tensors, **options):
    return (x.new_empty(x.shape, dtype=torch.float8_e4m3fn),
            x.new_empty((cu_seqlens.shape[0] - 1, x.shape[1], _ceil_div(max_seqlen, block)), dtype=torch.int8))


@quantize_fp8_out.register_fake
def _(*args, **kwargs):
    return None


@quantize_paged.register_fake
def _(*args, **kwargs):
    return None


# ---------------------------------------------------------------------------------------------------------
# merge_state: two attention results of the same queries over disjoint keys, as attention_lse returns them

@torch.library.custom_op("flashprefill::merge_state", mutates_args=(), device_types=_CUDA)
def merge_state(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor) -> tuple[Tensor, Tensor]:
    """flashprefill.merge_state: (out of out_a's dtype and shape, lse float32 (batch, heads_q, seqlen_q))."""
    return merge.merge_state(out_a, lse_a, out_b, lse_b)


@torch.library.custom_op("flashprefill::merge_state_out", mutates_args=("out", "lse_out"), device_types=_CUDA)
def merge_state_out(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor, out: Tensor, lse_out: Tensor) -> None:
    """flashprefill.merge_state into the caller's out and lse_out (bfloat16 or float32 out); allocates nothing."""
    merge.merge_state(out_a, lse_a, out_b, lse_b, out=out, lse_out=lse_out)


@merge_state.register_fake
def _(out_a, lse_a, out_b, lse_b):
    return out_a.new_empty(out_a.shape), lse_a.new_empty(lse_a.shape, dtype=torch.float32)


@merge_state_out.register_fake
def _(out_a, lse_a, out_b, lse_b, out, lse_out):
    return None
