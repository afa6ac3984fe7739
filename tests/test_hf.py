"""flashprefill.hf without a GPU: importing it needs neither torch nor transformers and `import flashprefill` does not
import it; register() checks its arguments before it imports transformers; refusal() names every call the attention
cannot compute as transformers asks (numpy arrays stand in for the tensors: it reads shapes, dtypes and flags only);
the registered function's glue (views, the static cache's slots, the errors) against a stand-in transformers.
The attention itself, through a model, is tests/test_hf_gpu.py's."""
import importlib.util
import pathlib
import subprocess
import sys
import textwrap
import types

import ml_dtypes
import numpy as np
import pytest

import flashprefill as fp
import markers
from flashprefill import hf

ROOT = pathlib.Path(__file__).resolve().parents[1]
BF16 = ml_dtypes.bfloat16
CAUSAL = types.SimpleNamespace(is_causal=True)


def _python(code):
    """Runs `code` in a fresh interpreter with the package on its path; its stdout."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_import_flashprefill_does_not_import_hf():
    out = _python("""
        import sys
        import flashprefill
        print(sorted(m for m in ("flashprefill.hf", "torch", "transformers") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_importing_hf_imports_neither_torch_nor_transformers():
    out = _python("""
        import sys
        import flashprefill.hf
        print(sorted(m for m in ("torch", "transformers") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def _qkv(seqlen_q=64, seqlen_k=64, dtype=BF16, heads_q=4, heads_kv=2, dim=128):
    """q, k, v stand-ins in transformers' layout (batch, heads, seq, dim)."""
    return (np.empty((1, heads_q, seqlen_q, dim), dtype), np.empty((1, heads_kv, seqlen_k, dim), dtype),
            np.empty((1, heads_kv, seqlen_k, dim), dtype))


def _refusal(module=CAUSAL, qkv=None, attention_mask=None, dropout=0.0, **kwargs):
    return hf.refusal(module, *(qkv or _qkv()), attention_mask, dropout, kwargs)


def test_plain_causal_call_with_inert_arguments_is_accepted():
    positions = np.arange(64)[None]
    assert _refusal(position_ids=positions, use_cache=True, output_attentions=False, cache_position=positions,
                    sliding_window=None, softcap=None, s_aux=None, is_causal=None) is None


@pytest.mark.parametrize("call, named", [
    (dict(attention_mask=np.ones((1, 1, 64, 64), bool)), "attention mask"),
    (dict(dropout=0.1), "dropout 0.1"),
    (dict(module=types.SimpleNamespace(is_causal=False)), "non-causal"),
    (dict(is_causal=False), "non-causal"),
    (dict(sliding_window=32), "sliding window of 32 tokens over 64 keys"),
    (dict(sliding_window=63), "sliding window of 63 tokens over 64 keys"),
    (dict(softcap=50.0), "softcapping"),
    (dict(s_aux=np.zeros(4)), "s_aux="),
    (dict(position_bias=np.zeros((1, 4, 64, 64))), "position_bias="),
    (dict(cu_seq_lens_q=np.array([0, 32, 64])), "cu_seq_lens_q="),
    (dict(seq_idx=np.zeros(64, int)), "seq_idx="),
    (dict(qkv=_qkv(dtype=np.float16)), "dtype float16"),
    (dict(qkv=_qkv(dtype=np.float32)), "dtype float32"),
])
def test_refusals_name_what_is_refused(call, named):
    reason = _refusal(**call)
    assert reason is not None and named in reason, reason


def test_inputs_needing_a_gradient_are_refused():
    q, k, v = _qkv()
    grad = types.SimpleNamespace(shape=q.shape, dtype=q.dtype, requires_grad=True)
    assert "gradient" in hf.refusal(CAUSAL, grad, k, v, None, 0.0, {})


@pytest.mark.parametrize("keys", [1, 63, 64])
def test_a_window_as_long_as_the_keys_is_full_causal_attention(keys):
    # transformers' sliding mask lets query i see keys j > i - window: all of them while keys <= window
    assert _refusal(qkv=_qkv(keys, keys), sliding_window=64) is None


def test_is_causal_argument_overrides_the_module():
    """as transformers' own integrations read it"""
    assert _refusal(module=types.SimpleNamespace(is_causal=False), is_causal=True) is None
    assert _refusal(module=types.SimpleNamespace(), is_causal=None) is None  # a module without the flag: causal


@pytest.mark.parametrize("name", ["flashprefill", "my_flash", "sdpa_like", "paged|fprefill", "org/repo", "", None])
def test_names_transformers_treats_specially_are_refused(name):
    with pytest.raises(ValueError, match="name must be"):
        hf.register(name)


@pytest.mark.parametrize("dtype, options, error", [
    ("float16", {}, ValueError),
    ("bfloat16", {"rotate": False}, TypeError),        # quantize options are fp8's
    ("float8_e4m3fn", {"rotation": True}, TypeError),  # not an option of quantize_qkv
])
def test_register_checks_its_arguments_before_importing_transformers(dtype, options, error):
    with pytest.raises(error):
        hf.register(dtype=dtype, **options)


def test_quantize_options_are_quantize_qkvs():
    """register()'s docstring names them; a new option of quantize_qkv shows up here"""
    assert hf._QUANTIZE_OPTIONS == ("rotate", "smooth_k", "per_block", "seed", "scores", "v_layout", "probabilities")


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason=markers.TRANSFORMERS_INSTALLED)
def test_register_without_transformers_raises_import_error():
    with pytest.raises(ImportError, match="transformers"):
        hf.register()


class Tensor(np.ndarray):
    """A numpy stand-in for a torch tensor where the registered function needs one: transpose(a, b) swaps two axes."""

    def transpose(self, a, b):
        return np.swapaxes(self, a, b)


def _tensors(seqlen_q=64, seqlen_k=64):
    return tuple(x.view(Tensor) for x in _qkv(seqlen_q, seqlen_k))


@pytest.fixture
def registry(monkeypatch):
    """A stand-in transformers whose two interfaces record what is registered: {"attention": {}, "mask": {}}."""
    registered = {"attention": {}, "mask": {}}

    def interface(kind):
        return type(kind, (), {"register": staticmethod(lambda name, fn: registered[kind].__setitem__(name, fn))})

    transformers = types.ModuleType("transformers")
    transformers.AttentionInterface, transformers.AttentionMaskInterface = interface("attention"), interface("mask")
    masking_utils = types.ModuleType("transformers.masking_utils")
    masking_utils.sdpa_mask = object()
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    monkeypatch.setitem(sys.modules, "transformers.masking_utils", masking_utils)
    registered["sdpa_mask"] = masking_utils.sdpa_mask
    return registered


def _recording_attend(calls):
    def attend(q, k, v, softmax_scale):
        calls.append((q, k, v, softmax_scale))
        return "out"
    return attend


def test_register_causal_registers_the_function_with_the_sdpa_mask(registry):
    assert hf.register_causal("mine", _recording_attend([])) == "mine"
    assert set(registry["attention"]) == {"mine"} and registry["mask"] == {"mine": registry["sdpa_mask"]}


def test_the_function_hands_attend_transposed_views_and_the_scale(registry):
    calls = []
    hf.register_causal("mine", _recording_attend(calls))
    q, k, v = _tensors()
    assert registry["attention"]["mine"](CAUSAL, q, k, v, None, scaling=0.125, position_ids=None) == ("out", None)
    (qt, kt, vt, scale), = calls
    assert scale == 0.125 and qt.shape == (1, 64, 4, 128) and kt.shape == vt.shape == (1, 64, 2, 128)
    assert all(np.shares_memory(a, b) for a, b in ((qt, q), (kt, k), (vt, v)))  # views, no copies


@pytest.mark.parametrize("seqlen_q, seqlen_k, keys_seen", [(64, 100, 64), (1, 100, 100), (64, 64, 64)])
def test_keys_past_the_queries_without_a_mask_are_a_static_caches_empty_slots(registry, seqlen_q, seqlen_k,
                                                                               keys_seen):
    """sdpa's contract for more keys than queries and no mask; one query (a decode step) sees every key"""
    calls = []
    hf.register_causal("mine", _recording_attend(calls))
    registry["attention"]["mine"](CAUSAL, *_tensors(seqlen_q, seqlen_k), None)
    assert calls[0][1].shape[1] == calls[0][2].shape[1] == keys_seen


def test_a_refused_call_raises_unsupported_and_never_reaches_attend(registry):
    calls = []
    hf.register_causal("mine", _recording_attend(calls))
    with pytest.raises(hf.Unsupported, match="attn_implementation 'mine' cannot compute this call: softcapping"):
        registry["attention"]["mine"](CAUSAL, *_tensors(), None, softcap=30.0)
    assert calls == [] and issubclass(hf.Unsupported, NotImplementedError)


@pytest.mark.parametrize("status, raised", [(fp.Status.ERROR_NOT_SUPPORTED, hf.Unsupported),
                                            (fp.Status.ERROR_INVALID_ARGUMENT, fp.Error)])
def test_the_librarys_not_supported_is_unsupported_other_errors_pass(registry, status, raised):
    def attend(q, k, v, softmax_scale):
        raise fp.Error(status, "dim_qk/dim_v must be 128/128 or 192/128")
    hf.register_causal("mine", attend)
    with pytest.raises(raised, match="dim_qk/dim_v must be"):
        registry["attention"]["mine"](CAUSAL, *_tensors(), None)


@pytest.mark.parametrize("dtype, options", [("bfloat16", {}), ("float8_e4m3fn", {}),
                                            ("float8_e4m3fn", {"rotate": False, "per_block": 128})])
def test_register_runs_causal_attention_on_quantize_qkvs_output_for_fp8(registry, monkeypatch, dtype, options):
    calls = []
    monkeypatch.setattr(hf.api, "attention", lambda *args, **kwargs: calls.append(("attention", args, kwargs)) or "o")
    monkeypatch.setattr(hf.api, "quantize_qkv", lambda *args, **kwargs: calls.append(("quantize", args, kwargs)) or
                        {"q": "q8", "k": "k8", "v": "v8", "scores": "fp16"})
    hf.register(dtype=dtype, **options)
    assert registry["attention"]["fprefill"](CAUSAL, *_tensors(), None, scaling=0.125) == ("o", None)
    if dtype == "bfloat16":
        (kind, args, kwargs), = calls
        assert kind == "attention" and len(args) == 3 and kwargs == {"causal": True, "softmax_scale": 0.125}
    else:
        (quantize, args, quantize_kwargs), (attention, no_args, kwargs) = calls
        assert (quantize, attention, no_args) == ("quantize", "attention", ()) and len(args) == 3
        assert quantize_kwargs == options
        assert kwargs == {"q": "q8", "k": "k8", "v": "v8", "scores": "fp16", "causal": True, "softmax_scale": 0.125}
