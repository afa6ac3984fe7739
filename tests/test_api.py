"""The Python API on paths that need no GPU: supports() with DeviceArray stand-ins (validation never reads
the data), descale translation, the checks only Python can make, and Error."""
import numpy as np
import pytest

import flashprefill as fp
from flashprefill import scales
from flashprefill._params import DescaleKind
from flashprefill._arrays import DeviceArray

BASE = 0x7F0000000000


def arrays(dtype="bfloat16", batch=2, seqlen_q=200, seqlen_k=256, heads_q=8, heads_kv=2, dim_qk=128, dim_v=128):
    return (DeviceArray(BASE, (batch, seqlen_q, heads_q, dim_qk), dtype),
            DeviceArray(BASE + (1 << 32), (batch, seqlen_k, heads_kv, dim_qk), dtype),
            DeviceArray(BASE + (2 << 32), (batch, seqlen_k, heads_kv, dim_v), dtype))


def fake(shape, dtype, offset=3 << 32):
    return DeviceArray(BASE + offset, shape, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_supports_valid_call_is_a_bool(dtype):
    assert fp.supports(*arrays(dtype)) in (True, False)


def test_supports_invalid_call_raises_error():
    with pytest.raises(fp.Error) as info:
        fp.supports(*arrays(heads_kv=3))
    assert info.value.status == fp.Status.ERROR_INVALID_ARGUMENT
    assert info.value.message == "heads_q = 8 is not a multiple of heads_kv = 3"
    assert str(info.value) == "invalid argument: heads_q = 8 is not a multiple of heads_kv = 3"
    assert isinstance(info.value, RuntimeError)


def test_supports_checks_strides_of_out():
    q, k, v = arrays()
    out = DeviceArray(BASE + (3 << 32), (2, 200, 8, 128), "bfloat16", strides=(200 * 8 * 128, 8 * 128, 0, 1))
    with pytest.raises(fp.Error, match="out overlaps itself"):
        fp.supports(q, k, v, out=out)


def test_supports_passes_softmax_scale_and_causal():
    with pytest.raises(fp.Error, match="softmax_scale must be finite and > 0"):
        fp.supports(*arrays(), softmax_scale=float("nan"))
    with pytest.raises(fp.Error, match="seqlen_q = 300 > seqlen_k = 256"):
        fp.supports(*arrays(seqlen_q=300))
    assert fp.supports(*arrays(seqlen_q=300), causal=False) in (True, False)


def test_bf16_with_descale_is_the_libraries_error():
    with pytest.raises(fp.Error, match="q_descale: bf16 inputs take no descale"):
        fp.supports(*arrays(), q_descale=fake((), "float32"))


def test_probabilities():
    """fp8 takes "default" or "fp16"; bf16 only "default" (the library's error); anything else is Python's."""
    assert fp.supports(*arrays("float8_e4m3fn"), probabilities="fp16") in (True, False)
    with pytest.raises(fp.Error, match="probabilities FP16 is an fp8 option") as info:
        fp.supports(*arrays(), probabilities="fp16")
    assert info.value.status == fp.Status.ERROR_INVALID_ARGUMENT
    for bad in ("e4m3", "FP16", None, 1):
        with pytest.raises(ValueError, match=r"probabilities must be one of \['default', 'fp16'\]"):
            fp.supports(*arrays("float8_e4m3fn"), probabilities=bad)


def test_scores():
    """fp8 takes "default", "fp32" or "fp16"; bf16 "default" or "fp32" (fp16 is the library's error), fp16 scores only
    beside e4m3 probabilities and the 192-key kernels (NOT_SUPPORTED otherwise); anything else is Python's."""
    assert fp.supports(*arrays("float8_e4m3fn"), scores="fp16") in (True, False)
    for scores in ("default", "fp32"):
        assert fp.supports(*arrays(), scores=scores) in (True, False)
    with pytest.raises(fp.Error, match="scores FP16 is an fp8 option") as info:
        fp.supports(*arrays(), scores="fp16")
    assert info.value.status == fp.Status.ERROR_INVALID_ARGUMENT
    for bad in ("f16", "FP16", None, 1):
        with pytest.raises(ValueError, match=r"scores must be one of \['default', 'fp16', 'fp32'\]"):
            fp.supports(*arrays("float8_e4m3fn"), scores=bad)


def test_quantize_qkv_arguments():
    """quantize_qkv's scores, v_layout and probabilities, checked before any device work."""
    q, k, v = arrays("float32")
    for bad in ("f16", "default"):
        with pytest.raises(ValueError, match="scores must be 'auto', 'fp16' or 'fp32'"):
            fp.quantize_qkv(q, k, v, scores=bad)
    with pytest.raises(ValueError, match="v_layout must be 'auto', 'default' or 'prepared'"):
        fp.quantize_qkv(q, k, v, v_layout="transposed")
    with pytest.raises(ValueError, match=r"probabilities must be one of \['default', 'fp16'\]"):
        fp.quantize_qkv(q, k, v, probabilities="fp8")
    for bad in (dict(scores="fp16"), dict(v_layout="prepared")):
        with pytest.raises(ValueError, match="probabilities='fp16' takes float32 scores and v in its default layout"):
            fp.quantize_qkv(q, k, v, probabilities="fp16", **bad)


class _DlpackOn:
    """A stand-in array on a DLPack device type (2: CUDA, 10: ROCm), enough for the backend lookup."""

    def __init__(self, device_type):
        self.device_type = device_type

    def __dlpack__(self, stream=None):
        raise AssertionError("never exported")

    def __dlpack_device__(self):
        return (self.device_type, 0)


@pytest.mark.parametrize("device_type, per_block, probabilities, expected", [
    (2, 384, "default", ("fp16", "prepared")), (2, None, "default", ("fp16", "prepared")),
    (2, 768, "default", ("fp16", "prepared")), (2, 128, "default", ("fp16", "prepared")),
    (2, 200, "default", ("fp32", "prepared")), (2, 384, "fp16", ("fp32", "default")),
    (10, 384, "default", ("fp32", "default")), (10, None, "default", ("fp32", "default"))])
def test_quantize_qkv_auto_resolution(device_type, per_block, probabilities, expected):
    """quantize_qkv's "auto": on Hopper (a CUDA array) float16 scores where a kernel takes the scales (per-head
    factors, blocks of a multiple of 384 tokens at 192 keys, of 128 at 128) and v prepared, neither with float16
    probabilities; on
    gfx950 (a ROCm array) neither, as each library states it (flashprefill_query). Explicit choices pass through."""
    from flashprefill import api
    q = _DlpackOn(device_type)
    for dims in ((128, 128), (192, 128)):
        assert api._resolve_auto(q, dims, per_block, probabilities, "auto", "auto") == expected
        assert api._resolve_auto(q, dims, per_block, probabilities, "fp32", "default") == ("fp32", "default")


@pytest.mark.parametrize("q, k, v, error", [
    ((2, 200, 8), (2, 256, 2, 128), (2, 256, 2, 128), "q must be 4-d"),
    ((2, 200, 8, 128), (2, 255, 2, 128), (2, 256, 2, 128), "shapes do not match"),
    ((2, 200, 8, 128), (2, 256, 2, 64), (2, 256, 2, 128), "shapes do not match"),
    ((2, 200, 8, 128), (1, 256, 2, 128), (1, 256, 2, 128), "shapes do not match"),
    ((2, 200, 8, 128), (2, 256, 2, 128), (2, 256, 4, 128), "shapes do not match"),
    ((2**31, 1, 8, 128), (2**31, 1, 2, 128), (2**31, 1, 2, 128), r"exceeds 2\^31 - 1"),
])
def test_shapes_python_must_check(q, k, v, error):
    with pytest.raises(ValueError, match=error):
        fp.supports(fake(q, "bfloat16", 0), fake(k, "bfloat16", 1 << 32), fake(v, "bfloat16", 2 << 32))


def test_mixed_or_wrong_input_dtypes():
    q, k, v = arrays()
    with pytest.raises(TypeError, match="all bfloat16 or all float8_e4m3fn"):
        fp.supports(q, fake(k.shape, "float8_e4m3fn"), v)
    with pytest.raises(TypeError, match="all bfloat16 or all float8_e4m3fn"):
        fp.supports(*arrays("float32"))


def test_host_inputs_rejected():
    q, k, v = arrays()
    with pytest.raises(TypeError, match="v is a host array; pass a device array"):
        fp.supports(q, k, np.zeros(v.shape, np.float32))


# ---------------------------------------------------------------------------------------------------------
# Descales

def descale(value, name="k_descale", heads=2, seqlen=256):
    keep = []
    d = scales.descale(value, name, batch=2, heads=heads, heads_kv=2, seqlen=seqlen, stream=None, keep=keep)
    return d, keep


@pytest.mark.parametrize("shape, kind", [((), DescaleKind.PER_TENSOR), ((1,), DescaleKind.PER_TENSOR),
                                         ((2, 2), DescaleKind.PER_HEAD)])
def test_float32_descales(shape, kind):
    d, keep = descale(fake(shape, "float32"))
    assert (d.kind, d.factors, d.exponents) == (kind, BASE + (3 << 32), None)
    assert len(keep) == 1


def test_block_scales():
    d, _ = descale(fp.BlockScales(fake((2, 8, 2), "int8"), 128), name="q_descale", heads=8, seqlen=200)
    assert (d.kind, d.block_tokens, d.exponents, d.factors) == (DescaleKind.PER_BLOCK, 128, BASE + (3 << 32), None)


def test_none_descale():
    d, keep = descale(None)
    assert d.kind == DescaleKind.NONE and keep == []


@pytest.mark.parametrize("value, error, message", [
    (fake((2, 8), "float32"), ValueError, r"must have shape \(\) or \(1,\) \(per tensor\) or \(batch, heads_kv\)"),
    (fake((2, 2, 2), "int8"), TypeError, r"wrap int8 exponents as BlockScales"),
    (fake((2,), "bfloat16"), TypeError, "must be float32 factors or BlockScales"),
    (fp.BlockScales(fake((2, 2, 3), "int8"), 128), ValueError, r"\(batch, heads, ceil\(seqlen / block_tokens\)\) = "
                                                                r"\(2, 2, 2\), got int8 \(2, 2, 3\)"),
    (fp.BlockScales(fake((2, 2, 2), "float32"), 128), ValueError, "k_descale.exponents must be int8"),
    (fp.BlockScales(DeviceArray(BASE, (2, 2, 2), "int8", strides=(8, 2, 1)), 128), ValueError,
     "k_descale.exponents must be contiguous"),
    (DeviceArray(BASE, (2, 2), "float32", strides=(1, 2)), ValueError, "k_descale must be contiguous"),
])
def test_bad_descales(value, error, message):
    with pytest.raises(error, match=message):
        descale(value)


@pytest.mark.parametrize("block_tokens", [0, -128, 128.0])
def test_block_tokens_must_be_positive_int(block_tokens):
    with pytest.raises(ValueError, match="block_tokens must be an int > 0"):
        fp.BlockScales(fake((2, 2, 2), "int8"), block_tokens)


@pytest.mark.parametrize("out", [fake((2, 200, 8, 128), "float32"), fake((2, 200, 8, 64), "bfloat16"),
                                 fake((2, 199, 8, 128), "bfloat16"), fake((200, 8, 128), "bfloat16")],
                         ids=["float32", "dim_v", "seqlen_q", "3-d"])
def test_supports_checks_out_as_attention_does(out):
    """A wrong out is the same ValueError from supports as from attention (attention checks it before any
    library or device work of its own)."""
    with pytest.raises(ValueError, match=r"out must be bfloat16 of shape \(batch, seqlen_q, heads_q, dim_v\) = "
                                         r"\(2, 200, 8, 128\)"):
        fp.supports(*arrays(), out=out)


@pytest.mark.parametrize("causal", [0.5, 1.0, 2, -1, "yes", None])
def test_causal_must_be_a_bool(causal):
    with pytest.raises(ValueError, match="causal must be True or False"):
        fp.supports(*arrays(), causal=causal)


@pytest.mark.parametrize("causal", [True, False, 0, 1, np.bool_(True), np.int64(0)])
def test_causal_bools_and_their_ints(causal):
    assert fp.supports(*arrays(seqlen_q=256), causal=causal) in (True, False)


@pytest.mark.parametrize("ptr", [2**64 + 16, -16, 2**64])
def test_device_array_pointer_must_fit_64_bits(ptr):
    with pytest.raises(ValueError, match="is not a 64-bit address"):
        DeviceArray(ptr, (1, 16, 1, 128), "bfloat16")
