"""flashprefill.torch without torch (tests/test_torch_ops_gpu.py runs the operators on a GPU): `import flashprefill`
imports no torch; `import flashprefill.torch` without torch raises an ImportError that names it; and, registered
against a stand-in torch that records what torch.library.custom_op is given, every operator has a schema torch can
infer (types, defaults, mutated arguments among its tensors), a fake implementation, the output shapes and dtypes
the Python API allocates, and a section in docs/torch.md.
"""
import importlib
import inspect
import pathlib
import subprocess
import sys
import types
import typing

import pytest

import flashprefill as fp

ROOT = pathlib.Path(__file__).resolve().parent.parent
OPERATORS = ["attention", "attention_lse", "attention_out", "attention_varlen", "attention_varlen_lse",
             "attention_varlen_out", "quantize_fp8", "quantize_fp8_varlen", "quantize_fp8_out", "quantize_paged",
             "merge_state", "merge_state_out"]
MUTATING = {"attention_out": {"out", "lse"}, "attention_varlen_out": {"out", "workspace", "lse"},
            "quantize_fp8_out": {"codes", "exponents"}, "quantize_paged": {"codes_cache", "exponents"},
            "merge_state_out": {"out", "lse_out"}}


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT / "python")})


def test_import_flashprefill_imports_no_torch():
    result = _run("import sys, flashprefill; print('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_flashprefill_torch_without_torch_names_it():
    # sys.modules["torch"] = None makes `import torch` raise ImportError, as where torch is not installed
    result = _run("import sys; sys.modules['torch'] = None\n"
                  "try:\n    import flashprefill.torch\nexcept ImportError as e:\n    print(type(e).__name__, e)\n"
                  "else:\n    print('imported')")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ImportError flashprefill.torch registers torch custom operators and needs torch")


class _Tensor:
    """Stands for torch.Tensor: a shape and a dtype, new_empty as torch's (row-major)."""

    def __init__(self, shape, dtype="bfloat16"):
        self.shape, self.dtype = tuple(shape), dtype

    def new_empty(self, shape, dtype=None):
        return _Tensor(shape, dtype or self.dtype)


class _Operator:
    def __init__(self, name, fn, mutates_args, device_types):
        self.name, self.fn, self.mutates_args, self.device_types = name, fn, set(mutates_args), device_types
        self.fake = None

    def register_fake(self, fn):
        self.fake = fn
        return fn


@pytest.fixture
def registered(monkeypatch):
    """{name: _Operator} of flashprefill.torch imported against the stand-in torch (the real one, and the module
    imported against it, restored afterwards)."""
    operators = {}

    def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
        def wrap(f):
            operators[name.removeprefix("flashprefill::")] = op = _Operator(name, f, mutates_args, device_types)
            return op
        return wrap if fn is None else wrap(fn)

    stand_in = types.ModuleType("torch")
    stand_in.__version__ = "stand-in"
    stand_in.Tensor = _Tensor
    stand_in.library = types.SimpleNamespace(custom_op=custom_op)
    for dtype in ("bfloat16", "float32", "float8_e4m3fn", "int8", "uint8"):
        setattr(stand_in, dtype, dtype)
    monkeypatch.setitem(sys.modules, "torch", stand_in)
    # setitem and setattr record what was there (or that nothing was) and put it back afterwards
    monkeypatch.setitem(sys.modules, "flashprefill.torch", None)
    monkeypatch.setattr(fp, "torch", None, raising=False)
    del sys.modules["flashprefill.torch"]
    importlib.import_module("flashprefill.torch")
    return operators


_PARAMETER_TYPES = {_Tensor, typing.Optional[_Tensor], int, float, bool, str, typing.Optional[float]}
_RETURN_TYPES = {_Tensor, tuple[_Tensor, _Tensor], None}


def test_every_operator_is_registered_with_a_schema_torch_infers(registered):
    assert sorted(registered) == sorted(OPERATORS)
    for name, op in registered.items():
        assert op.name == f"flashprefill::{name}" and op.fn.__name__ == name and op.device_types == "cuda"
        signature = inspect.signature(op.fn)
        for parameter in signature.parameters.values():
            assert parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY), (name, parameter)
            # torch.library.custom_op refuses keyword-only tensors (NotImplementedError at registration)
            assert parameter.kind != parameter.KEYWORD_ONLY or \
                parameter.annotation not in (_Tensor, typing.Optional[_Tensor]), (name, parameter)
            assert parameter.annotation in _PARAMETER_TYPES, (name, parameter)
            assert parameter.default is parameter.empty or parameter.default is None or \
                isinstance(parameter.default, (bool, int, float, str)), (name, parameter)
        assert signature.return_annotation in _RETURN_TYPES, (name, signature.return_annotation)
        assert op.mutates_args == MUTATING.get(name, set()), name
        for mutated in op.mutates_args:
            assert signature.parameters[mutated].annotation in (_Tensor, typing.Optional[_Tensor]), (name, mutated)
        assert (signature.return_annotation is None) == bool(op.mutates_args), name
        assert op.fake is not None, f"{name} has no fake implementation"


def _fake(op, *args, **kwargs):
    """op's fake called as torch's dispatcher calls it: every parameter before `*` positionally, defaults filled in,
    the keyword-only ones by keyword."""
    bound = inspect.signature(op.fn).bind(*args, **kwargs)
    bound.apply_defaults()
    kinds = inspect.signature(op.fn).parameters
    positional = [value for name, value in bound.arguments.items() if kinds[name].kind != kinds[name].KEYWORD_ONLY]
    keywords = {name: value for name, value in bound.arguments.items() if kinds[name].kind == kinds[name].KEYWORD_ONLY}
    return op.fake(*positional, **keywords)


def _shapes(result):
    results = result if isinstance(result, tuple) else (result,)
    return [(r.shape, r.dtype) for r in results]


def test_fake_implementations_give_the_apis_shapes(registered):
    q, k = _Tensor((2, 200, 4, 128)), _Tensor((2, 300, 2, 128))
    v, prepared = _Tensor((2, 300, 2, 64)), _Tensor((2, 2, 64, 304))
    out = ((2, 200, 4, 64), "bfloat16")
    assert _shapes(_fake(registered["attention"], q, k, v)) == [out]
    assert _shapes(_fake(registered["attention"], q, k, prepared, v_prepared=True)) == [out]
    assert _shapes(_fake(registered["attention_lse"], q, k, v)) == [out, ((2, 4, 200), "float32")]
    assert _fake(registered["attention_out"], q, k, v, _Tensor(out[0])) is None

    packed_q, packed_k, packed_v, cu = (_Tensor((500, 4, 128)), _Tensor((700, 2, 128)), _Tensor((700, 2, 64)),
                                        _Tensor((6,), "int32"))
    out = ((500, 4, 64), "bfloat16")
    assert _shapes(_fake(registered["attention_varlen"], packed_q, packed_k, packed_v, cu, cu, 300, 300)) == [out]
    assert _shapes(_fake(registered["attention_varlen_lse"], packed_q, packed_k, packed_v, cu, cu, 300, 300)) == \
        [out, ((4, 500), "float32")]

    x = _Tensor((2, 300, 2, 128))
    assert _shapes(_fake(registered["quantize_fp8"], x, 128)) == [((2, 300, 2, 128), "float8_e4m3fn"),
                                                                 ((2, 2, 3), "int8")]
    assert _shapes(_fake(registered["quantize_fp8"], x, 384, layout="prepared")) == \
        [((2, 2, 128, 304), "float8_e4m3fn"), ((2, 2, 1), "int8")]
    assert _shapes(_fake(registered["quantize_fp8_varlen"], packed_k, cu, 300, 128)) == \
        [((700, 2, 128), "float8_e4m3fn"), ((5, 2, 3), "int8")]

    out_a, lse_a = _Tensor((2, 200, 4, 128), "float32"), _Tensor((2, 4, 200), "float32")
    assert _shapes(_fake(registered["merge_state"], out_a, lse_a, out_a, lse_a)) == \
        [((2, 200, 4, 128), "float32"), ((2, 4, 200), "float32")]


def test_docs_describe_every_operator():
    text = (ROOT / "docs" / "torch.md").read_text()
    missing = [name for name in OPERATORS if f"`flashprefill::{name}(" not in text]
    assert not missing, f"docs/torch.md does not describe {missing}"


def test_the_real_modules_are_back():
    """After the tests above (file order) that imported flashprefill.torch against the stand-in: torch and
    flashprefill.torch are what they were (the real ones, or absent), so the GPU tests get the real operators."""
    assert getattr(sys.modules.get("torch"), "__version__", None) != "stand-in"
    module = sys.modules.get("flashprefill.torch")
    assert module is None or not isinstance(module.attention, _Operator)
    assert getattr(fp, "torch", None) is module
