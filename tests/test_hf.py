"""flashprefill.hf without a GPU: importing it needs neither torch nor transformers and `import flashprefill` does not
import it; register() checks its arguments before it imports transformers; refusal() names every call the attention
cannot compute as transformers asks (numpy arrays stand in for the tensors: it reads shapes, dtypes and flags only).
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


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason="transformers is installed here")
def test_register_without_transformers_raises_import_error():
    with pytest.raises(ImportError, match="transformers"):
        hf.register()
