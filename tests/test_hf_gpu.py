"""flashprefill.hf in a transformers model on a GPU: a two-layer Llama (4 query and 2 kv heads of dim 128, RoPE,
random weights from a fresh seed each run) prefilled with flashprefill's attention, and every refusal raised.

Accuracy is judged against a same-precision reference, never against a fixed tolerance: every backend's logits are
compared with those of the same model whose attention is computed in float64 (and rounded to bf16, as every
backend's output is), so the differences come from the attention alone.
  bf16: flashprefill's error at most twice SDPA's, the suite's bound for a same-precision reference
        (test_api_gpu.py); the bf16 kernel's attention error equals FlashAttention-3's to three digits
        (docs/numerics.md).
  fp8:  at most twice the error of float64 attention on the same e4m3 inputs (quantize_qkv's codes dequantized: the
        input-rounding floor), which the kernel's exp-free probabilities raise by 1.15x at the attention's output
        with quantize_qkv's defaults (docs/numerics.md).
The relative L2 against SDPA's logits and the top-1 agreement with them are printed.
"""
import types

import pytest

import flashprefill as fp
import markers

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason=markers.NO_TRANSFORMERS)
transformers = pytest.importorskip("transformers", reason=markers.NO_TRANSFORMERS)
from flashprefill import hf  # noqa: E402
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS  # noqa: E402

# initializer_range 0.1: scores of standard deviation about 256·0.1² = 2.6 (q and k from a 256-wide hidden state),
# attention neither uniform nor one-hot
TINY = dict(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=128, max_position_embeddings=4096, rms_norm_eps=1e-5,
            initializer_range=0.1, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
CAUSAL = types.SimpleNamespace(is_causal=True)


def attention_float64(q, k, v, softmax_scale):
    """Causal (bottom-right) attention with GQA in float64 of (batch, seq, heads, dim) tensors, rounded to bf16."""
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    scores = q @ k.transpose(-1, -2) * scale
    seqlen_q, seqlen_k = scores.shape[-2:]
    visible = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=q.device).tril(seqlen_k - seqlen_q)
    p = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    return (p @ v).transpose(1, 2).to(torch.bfloat16).contiguous()


def _dequantized(codes, scales):
    """float64 values of quantize_qkv's codes (batch, seq, heads, dim) and their BlockScales."""
    assert isinstance(scales, fp.BlockScales), scales
    exponents = scales.exponents.double().repeat_interleave(scales.block_tokens, dim=2)[:, :, :codes.shape[1]]
    return codes.float().double() * torch.exp2(exponents).transpose(1, 2)[..., None]


def attention_float64_of_e4m3(q, k, v, softmax_scale):
    """attention_float64 of the e4m3 inputs flashprefill fp8 computes on (quantize_qkv's defaults, v in the default
    layout: the same codes); the rotation of q and k leaves q·kᵀ unchanged."""
    x = fp.quantize_qkv(q, k, v, v_layout="default")
    return attention_float64(*(_dequantized(x[n], x[f"{n}_descale"]) for n in "qkv"), softmax_scale)


@pytest.fixture(scope="module")
def names():
    return {"sdpa": "sdpa", "bf16": hf.register("fprefill"),
            "fp8": hf.register("fprefill_fp8", dtype="float8_e4m3fn"),
            "float64": hf.register_causal("test_float64", attention_float64),
            "e4m3 floor": hf.register_causal("test_float64_of_e4m3", attention_float64_of_e4m3)}


def tiny_model(seed, **overrides):
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**{**TINY, **overrides}),
                                                              dtype=torch.bfloat16, attn_implementation="sdpa")
    return model.eval()


def token_ids(seed, batch, seqlen):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randint(0, TINY["vocab_size"], (batch, seqlen), device="cuda", generator=generator)


def logits_of(model, name, ids, **kwargs):
    with torch.inference_mode():
        model.set_attn_implementation(name)
        return model(input_ids=ids, use_cache=False, **kwargs).logits.float()


def relative_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def top1_agreement(a, b):
    return (a.argmax(dim=-1) == b.argmax(dim=-1)).double().mean().item()


SHAPES = [(1, 1), (2, 300), (1, 2048)]  # (batch, seqlen): one token, a batch of a non-tile length, 2k tokens


@pytest.mark.parametrize("dtype, yardstick", [("bf16", "sdpa"), ("fp8", "e4m3 floor")])
@pytest.mark.parametrize("batch, seqlen", SHAPES)
def test_logits_within_twice_the_same_precision_reference(names, rng_seed, dtype, yardstick, batch, seqlen):
    seed = rng_seed[1]
    model, ids = tiny_model(seed), token_ids(seed, batch, seqlen)
    logits = {b: logits_of(model, names[b], ids) for b in ("float64", "sdpa", dtype, yardstick)}
    ours = logits[dtype]
    assert ours.shape == (batch, seqlen, TINY["vocab_size"]) and bool(torch.isfinite(ours).all())
    error, bound = relative_l2(ours, logits["float64"]), 2 * relative_l2(logits[yardstick], logits["float64"])
    sdpa = logits["sdpa"]
    print(f"{dtype}: rel. L2 vs float64 attention {error:.3e} (bound {bound:.3e}: twice {yardstick}'s); vs SDPA "
          f"{relative_l2(ours, sdpa):.3e}, top-1 agreement with SDPA {top1_agreement(ours, sdpa):.4f}")
    assert error <= bound


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_padding_is_refused_through_the_model(names, rng_seed, dtype):
    seed = rng_seed[1]
    model, ids = tiny_model(seed), token_ids(seed, 2, 64)
    mask = torch.ones_like(ids)
    mask[0, :8] = 0  # left padding of the first sequence
    with pytest.raises(hf.Unsupported, match="attention mask"):
        logits_of(model, names[dtype], ids, attention_mask=mask)


def test_packed_sequences_are_refused_through_the_model(names, rng_seed):
    """two sequences packed in one row, told apart by their position_ids: the mask transformers makes is refused"""
    seed = rng_seed[1]
    model, ids = tiny_model(seed), token_ids(seed, 1, 64)
    positions = torch.cat([torch.arange(40), torch.arange(24)]).cuda()[None]
    with pytest.raises(hf.Unsupported, match="attention mask"):
        logits_of(model, names["bf16"], ids, position_ids=positions)


def test_dropout_is_refused_through_the_model(names, rng_seed):
    seed = rng_seed[1]
    model, ids = tiny_model(seed, attention_dropout=0.1).train(), token_ids(seed, 1, 64)
    model.set_attn_implementation(names["bf16"])
    with torch.no_grad(), pytest.raises(hf.Unsupported, match="dropout"):
        model(input_ids=ids, use_cache=False)


def qkv(seqlen_q=64, seqlen_k=64, dim=128, dtype=torch.bfloat16):
    """Fresh N(0,1) q, k, v in transformers' layout (batch, heads, seq, dim), 4 query and 2 kv heads."""
    return (torch.randn(1, 4, seqlen_q, dim, device="cuda").to(dtype),
            *(torch.randn(1, 2, seqlen_k, dim, device="cuda").to(dtype) for _ in "kv"))


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("call, named", [
    (dict(is_causal=False), "non-causal"),
    (dict(sliding_window=16), "sliding window of 16 tokens over 64 keys"),
    (dict(softcap=30.0), "softcapping"),
    (dict(s_aux=0), "s_aux="),
    (dict(dropout=0.1), "dropout"),
    (dict(inputs=dict(dim=64)), "no kernel"),
    (dict(inputs=dict(dtype=torch.float16)), "dtype float16"),
])
def test_refusals_of_the_registered_function(names, dtype, call, named):
    call = dict(call)
    q, k, v = qkv(**call.pop("inputs", {}))
    with torch.inference_mode(), pytest.raises(hf.Unsupported, match=named):
        ALL_ATTENTION_FUNCTIONS[names[dtype]](CAUSAL, q, k, v, None, **call)


def test_a_window_as_long_as_the_keys_changes_nothing(names):
    q, k, v = qkv()
    attention = ALL_ATTENTION_FUNCTIONS[names["bf16"]]
    with torch.inference_mode():
        windowed, weights = attention(CAUSAL, q, k, v, None, sliding_window=64)
        plain, _ = attention(CAUSAL, q, k, v, None)
    assert weights is None and windowed.shape == (1, 64, 4, 128) and torch.equal(windowed, plain)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_static_cache_slots_past_the_queries_are_not_read(names, dtype):
    """more keys than queries without a mask is a static cache's first prefill (transformers' sdpa mask): the slots
    past the queries are empty, here NaN, and the output is that of the first seqlen_q keys"""
    q, k, v = qkv(seqlen_q=64, seqlen_k=100)
    k[:, :, 64:], v[:, :, 64:] = float("nan"), float("nan")
    attention = ALL_ATTENTION_FUNCTIONS[names[dtype]]
    with torch.inference_mode():
        cached, _ = attention(CAUSAL, q, k, v, None)
        prefix, _ = attention(CAUSAL, q, k[:, :, :64].contiguous(), v[:, :, :64].contiguous(), None)
    assert bool(torch.isfinite(cached).all()) and torch.equal(cached, prefix)
