"""flashprefill as an attention implementation of Hugging Face transformers (its AttentionInterface): the prefill of
decoder models, causal attention over a batch of equal-length sequences, in bf16 or fp8.

    import flashprefill.hf
    flashprefill.hf.register()                                            # "fprefill": bf16
    flashprefill.hf.register("fprefill_fp8", dtype="float8_e4m3fn")       # quantize_qkv (rotated), then fp8 attention
    model = AutoModelForCausalLM.from_pretrained(..., dtype=torch.bfloat16, attn_implementation="fprefill")
    # or model.set_attn_implementation("fprefill") on a model already built

transformers hands the function of a registered name q, k, v as (batch, heads, seq, dim) tensors; flashprefill reads
(batch, seq, heads, dim) with the last dim contiguous, which is a transposed view of the same tensors (no copy), and
writes its output (batch, seq, heads, dim), which is what transformers takes back. The name's mask is transformers'
sdpa mask: None for plain causal attention, a tensor for anything else (padding, packed sequences, sliding or chunked
windows that cut the keys, custom patterns), which is refused.

Every call this cannot compute as sdpa would raises Unsupported (a NotImplementedError) naming what: a mask, dropout,
non-causal attention, a sliding window shorter than the keys, softcapping, attention sinks, packed-sequence arguments,
an argument it does not know, inputs that are not bfloat16 or need a gradient, and head dims without a kernel
(the library's NOT_SUPPORTED, as flashprefill.supports answers it). Never a silently different result.

Importing this module needs neither torch nor transformers (`import flashprefill` does not import it); register()
imports transformers.
"""
import inspect

from . import api
from ._errors import Error
from ._params import Status

# transformers gives names containing these its own handling: "flash" its flash-attention paths (set_attn_implementation
# looks for a flash kernel of that name and fails), "sdpa" and "flex_attention" their dispatch checks, "paged|..." its
# paged attention, "org/repo" its hub kernels.
_RESERVED_IN_NAMES = ("flash", "sdpa", "flex_attention", "|", "/")
# quantize_qkv's keyword options, which an fp8 registration forwards
_QUANTIZE_OPTIONS = tuple(name for name, p in inspect.signature(api.quantize_qkv).parameters.items()
                          if p.kind is inspect.Parameter.KEYWORD_ONLY)
DTYPES = ("bfloat16", "float8_e4m3fn")
# keyword arguments transformers passes to attention functions whose values never change the attention (a packed
# batch's position_ids reach the mask, which is then refused)
_INERT = frozenset({"position_ids", "position_embeddings", "use_cache", "cache_position", "past_key_values",
                    "output_attentions", "output_hidden_states", "output_router_logits", "num_items_in_batch",
                    "return_dict", "layer_idx"})
# the ones refusal() reads itself
_READ = frozenset({"is_causal", "sliding_window", "softcap"})


class Unsupported(NotImplementedError):
    """A call the registered attention cannot compute as transformers asks it; the message names what."""


def _dtype_name(tensor):
    return str(tensor.dtype).removeprefix("torch.")


def refusal(module, query, key, value, attention_mask, dropout, kwargs):
    """Why transformers' attention call (module, query, key, value, attention_mask, dropout, **kwargs; q, k, v
    (batch, heads, seq, dim)) is not causal attention over all of its keys in bf16, as a sentence; None where it
    is. Reads shapes, dtypes and flags only."""
    if attention_mask is not None:
        return ("an attention mask (padding, packed sequences, or a pattern beyond plain causal): only equal-length "
                "sequences without padding are computed")
    if dropout:
        return f"attention dropout {dropout} (training): only the forward pass without dropout is computed"
    is_causal = kwargs.get("is_causal")
    if not (getattr(module, "is_causal", True) if is_causal is None else is_causal):
        return "non-causal attention (an encoder, cross-attention or is_causal=False): only causal is computed"
    window = kwargs.get("sliding_window")
    if window is not None and key.shape[2] > window:
        return f"a sliding window of {window} tokens over {key.shape[2]} keys: only full causal attention is computed"
    if kwargs.get("softcap"):
        return f"softcapping of the scores ({kwargs['softcap']})"
    for name, value_ in kwargs.items():
        if name not in _INERT and name not in _READ and value_ is not None:
            return f"the argument {name}={value_!r}, which this attention does not read: refused rather than ignored"
    dtypes = {_dtype_name(x) for x in (query, key, value)}
    if dtypes != {"bfloat16"}:
        return f"q, k, v of dtype {', '.join(sorted(dtypes))}: the model's attention must run in bfloat16"
    if any(getattr(x, "requires_grad", False) for x in (query, key, value)):
        return "inputs that need a gradient: there is no backward pass (run under torch.no_grad() or inference_mode())"
    return None


def register_causal(name, attend):
    """Registers `name` with transformers as causal attention computed by attend(q, k, v, softmax_scale) -> out, on
    (batch, seq, heads, dim) tensors (q, k, v views with the last dim contiguous; out bfloat16 (batch, seq, heads_q,
    dim_v)), with transformers' sdpa mask and refusal()'s refusals. Returns name."""
    _check_name(name)
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
        reason = refusal(module, query, key, value, attention_mask, dropout, kwargs)
        if reason is not None:
            raise Unsupported(f"attn_implementation {name!r} cannot compute this call: {reason}")
        seqlen_q = query.shape[2]
        if key.shape[2] > seqlen_q > 1:
            # Without a mask, more keys than queries is a static cache's first prefill: the keys past the queries are
            # empty slots (the sdpa mask's contract), which sdpa_attention_forward drops too.
            key, value = key[:, :, :seqlen_q], value[:, :, :seqlen_q]
        try:
            out = attend(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), scaling)
        except Error as e:
            if e.status == Status.ERROR_NOT_SUPPORTED:
                raise Unsupported(f"attn_implementation {name!r} has no kernel for this call: {e.message}") from e
            raise
        return out, None

    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name


def _check_name(name):
    if not isinstance(name, str) or not name or any(part in name for part in _RESERVED_IN_NAMES):
        raise ValueError(f"name must be a non-empty string without {', '.join(map(repr, _RESERVED_IN_NAMES))} "
                         f"(transformers treats those names specially), got {name!r}")


def register(name="fprefill", *, dtype="bfloat16", **quantize_options):
    """Registers flashprefill's causal attention with transformers as attn_implementation `name`; returns name.

    dtype "bfloat16": attention on the model's bf16 q, k, v. "float8_e4m3fn": every call quantizes q, k, v with
    quantize_qkv (q and k rotated by a random-sign Hadamard, one power-of-two scale per block of tokens of a head;
    on Hopper 384-token blocks, float16 scores and v in the prepared layout) and runs the fp8 attention on them.
    quantize_options: quantize_qkv's options for fp8 (rotate, smooth_k, per_block, seed, scores, v_layout,
    probabilities), its defaults otherwise.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    unknown = set(quantize_options) - set(_QUANTIZE_OPTIONS)
    if unknown or (quantize_options and dtype != "float8_e4m3fn"):
        raise TypeError(f"quantize options are quantize_qkv's ({', '.join(_QUANTIZE_OPTIONS)}) and for dtype "
                        f"'float8_e4m3fn' only; got {sorted(quantize_options)} with dtype {dtype!r}")
    if dtype == "bfloat16":
        def attend(q, k, v, softmax_scale):
            return api.attention(q, k, v, causal=True, softmax_scale=softmax_scale)
    else:
        def attend(q, k, v, softmax_scale):
            return api.attention(**api.quantize_qkv(q, k, v, **quantize_options), causal=True,
                                 softmax_scale=softmax_scale)
    return register_causal(name, attend)
