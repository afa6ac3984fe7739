"""The GPU quantizer (flashprefill_quantize through fp.quantize_fp8 / fp.quantize_qkv) against its numpy model,
bit for bit: fp8.quantize_blocks(prepare.transform(x, signs, subtract), block). Outputs are poisoned first. CuPy
arrays in and out (gpu_arrays.py)."""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import shapes
from flashprefill import fp8, policy, prepare, prepared_v

pytestmark = pytest.mark.gpu

POISON_CODE = 0x7F  # NaN: never a code of finite inputs
POISON_EXPONENT = -128  # below every exponent the quantizer writes


def _uneven(rng, shape):
    """N(0,1) times 2^-6..2^6 per 64 tokens and head, with one channel 30x larger: exponents that vary along a
    head and rows the rotation changes."""
    batch, seq, heads, dim = shape
    x = rng.standard_normal(shape)
    x *= np.exp2(rng.integers(-6, 7, (batch, (seq + 63) // 64, heads)))[:, np.arange(seq) // 64, :, None]
    x[..., 3] *= 30
    return x


def _run(x, block, signs=None, subtract=None, code_max=448.0):
    """fp.quantize_fp8 into poisoned outputs; (codes uint8, exponents int8) on the host."""
    batch, seq, heads, dim = x.shape
    codes = ga.full(x.shape, POISON_CODE, np.uint8)
    exponents = ga.full((batch, heads, -(-seq // block)), POISON_EXPONENT, np.int8)
    fp.quantize_fp8(x, block, signs=signs, subtract=subtract, code_max=code_max, codes=codes.view(ga.E4M3),
                    exponents=exponents)
    ga.synchronize()
    return ga.to_host(codes), ga.to_host(exponents)


def _device(host, dtype):
    """A host float array on the device as `dtype` ("bfloat16" or "float32")."""
    return ga.to_device(ga.to_bf16(host) if dtype == "bfloat16" else host.astype(np.float32))


_host = ga.host_f64


@pytest.mark.parametrize("block", [64, 128, 200, 520, 1100])
@pytest.mark.parametrize("mode", ["plain", "rotate", "rotate_smooth"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@shapes.over_quantize_dims
def test_bit_identical_to_the_model(rng, dim, dtype, mode, block):
    """Every dim the quantizer takes (each split into parts of 8 or 16 lanes a row), bf16 and float32, with and
    without rotation and smoothing, blocks whose rows end mid-set and blocks longer than the sequence: exponents and
    codes as the model's."""
    shape = (2, 300, 3, dim)
    x = _device(_uneven(rng, shape), dtype)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if mode != "plain" else None
    subtract = prepare.key_mean(_host(x)) if mode == "rotate_smooth" else None
    codes, exponents = _run(x, block, None if signs is None else ga.to_device(signs),
                            None if subtract is None else ga.to_device(subtract))
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(_host(x), signs, subtract), block)
    np.testing.assert_array_equal(exponents, model_exponents)
    mismatch = codes != model_codes
    assert not mismatch.any(), (f"{mismatch.sum()} of {codes.size} codes differ, first at "
                                f"{np.argwhere(mismatch)[0].tolist()}")


@pytest.mark.parametrize("code_max", [1.125, 0.75, 2.0**-6])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("dim", shapes.DIMS_QK)
def test_code_max_bit_identical_to_the_model(rng, dim, dtype, code_max):
    """Smaller codes (q's for float16 scores): exponents and codes as the model's, every code within code_max."""
    shape = (2, 300, 3, dim)
    x = _device(_uneven(rng, shape), dtype)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31)))
    codes, exponents = _run(x, 128, ga.to_device(signs), code_max=code_max)
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(_host(x), signs), 128, code_max)
    np.testing.assert_array_equal(exponents, model_exponents)
    np.testing.assert_array_equal(codes, model_codes)
    assert np.abs(fp8.e4m3_decode(codes)).max() <= code_max


def test_special_blocks():
    """All-zero blocks and heads, inf and NaN, float32 subnormals, and a block 100 binades below its head."""
    x = np.random.default_rng(7).standard_normal((1, 40, 4, 64)).astype(np.float32)
    x[0, 0:8, 0] = 0              # head 0: a zero block among normal ones
    x[0, 8:16, 1, 5] = np.inf     # head 1: inf and NaN in one block each
    x[0, 16:24, 1, 9] = np.nan
    x[0, 24:32, 2] *= 2.0**-100   # head 2: one block far below the others (the span floor)
    x[0, :, 3] = 1e-41 * (x[0, :, 3] > 0)  # head 3: subnormal or zero values only
    codes, exponents = _run(ga.to_device(x), 8)
    model_codes, model_exponents = fp8.quantize_blocks(x, 8)
    np.testing.assert_array_equal(exponents, model_exponents)
    np.testing.assert_array_equal(codes, model_codes)


@pytest.mark.parametrize("rotate", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_negative_nan(rng, dtype, rotate):
    """NaN with its sign bit set (the signs are applied as sign-bit flips, which keep a NaN's bits): code 0x7f
    like every NaN, the block's exponent 0, the other blocks as the model's."""
    x = rng.standard_normal((1, 64, 2, 128)).astype(np.float32)
    x = ga.to_bf16(x) if dtype == "bfloat16" else x
    bits, shift = ga.bits(x), 16 if dtype == "bfloat16" else 0
    for (token, head, channel), pattern in (((3, 0, 7), 0xFFC00000), ((40, 1, 0), 0xFF810000)):  # quiet, signalling
        bits[0, token, head, channel] = pattern >> shift
    assert np.isnan(ga.to_float(x)).sum() == 2 and bits[0, 3, 0, 7] >> (31 - shift) == 1
    x = ga.to_device(x)
    signs = prepare.rotation_signs(128, int(rng.integers(1 << 31))) if rotate else None
    codes, exponents = _run(x, 16, None if signs is None else ga.to_device(signs))
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(_host(x), signs), 16)
    assert model_exponents[0, 0, 0] == 0 and model_exponents[0, 1, 2] == 0, "a NaN block's exponent is 0"
    np.testing.assert_array_equal(exponents, model_exponents)
    np.testing.assert_array_equal(codes, model_codes)


@pytest.mark.parametrize("dim", shapes.DIMS_QK)
def test_span_floor_blocks_rotated(rng, dim):
    """Blocks 2^100 below their head's largest (its span floor raises their exponents), rotated, more than 32 blocks
    a head: the blocks encoded again with the raised exponent, bit for bit as the model's."""
    x = _uneven(rng, (2, 300, 3, dim)).astype(np.float32)
    x[0, 16:24, 0] *= 2.0**-100
    x[1, 200:208, 2] *= 2.0**-100
    x[1, 296:, 1] *= 2.0**-100  # the last, partial block
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31)))
    codes, exponents = _run(ga.to_device(x), 8, ga.to_device(signs))
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(x.astype(np.float64), signs), 8)
    assert model_exponents[0, 0, 2] == model_exponents[0, 0].max() - 64, "the span floor did not apply"
    np.testing.assert_array_equal(exponents, model_exponents)
    np.testing.assert_array_equal(codes, model_codes)


def test_nonfinite_blocks_count_as_zero():
    """A head whose largest exponent exceeds 64 with an inf block (raised to that minus 64), and one with a NaN block
    above its finite ones (its zero blocks take 0): exponents and codes as the model's."""
    x = np.zeros((1, 12, 2, 32), np.float32)
    x[0, 0:4, 0] = 2.0**80
    x[0, 4:8, 0, 3] = np.inf
    x[0, 0:4, 1, 1] = np.nan
    x[0, 4:8, 1] = 1.0
    codes, exponents = _run(ga.to_device(x), 4)
    model_codes, model_exponents = fp8.quantize_blocks(x, 4)
    np.testing.assert_array_equal(exponents, model_exponents)
    np.testing.assert_array_equal(codes, model_codes)


def _run_prepared(x, block, signs=None, pitch=None):
    """fp.quantize_fp8(layout="prepared") into poisoned outputs, rows of `pitch` positions (default seq rounded up
    to 16); (codes uint8 (batch, heads, dim, pitch), exponents int8) on the host."""
    batch, seq, heads, dim = x.shape
    pitch = prepared_v.positions(seq) if pitch is None else pitch
    codes = ga.full((batch, heads, dim, pitch), POISON_CODE, np.uint8)
    exponents = ga.full((batch, heads, -(-seq // block)), POISON_EXPONENT, np.int8)
    out, scales = fp.quantize_fp8(x, block, signs=signs, layout="prepared", codes=codes.view(ga.E4M3),
                                  exponents=exponents)
    assert isinstance(out, fp.PreparedV) and out.seqlen == seq and scales.block_tokens == block
    ga.synchronize()
    return ga.to_host(codes), ga.to_host(exponents)


@pytest.mark.parametrize("seq, block", [(300, 16), (300, 112), (300, 384), (640, 128), (1, 16), (33, 48)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@shapes.over_quantize_dims
def test_prepared_layout_is_prepare_v_of_the_codes(rng, dim, dtype, seq, block):
    """layout="prepared": the codes and exponents of the default layout, written as prepare_v writes them (keys in
    P's register order, positions past seq 0), bit for bit; blocks whose end falls mid-set (112, 48: one group of 16
    of a 32-row set is the next block's) and sequences ending mid-group."""
    shape = (2, seq, 3, dim)
    x = _device(_uneven(rng, shape), dtype)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31)))
    codes, exponents = _run_prepared(x, block, ga.to_device(signs))
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(_host(x), signs), block)
    np.testing.assert_array_equal(exponents, model_exponents)
    expected = prepared_v.prepare_v_model(model_codes)
    mismatch = codes != expected
    assert not mismatch.any(), (f"{mismatch.sum()} of {codes.size} codes differ, first at "
                                f"{np.argwhere(mismatch)[0].tolist()}")


def test_prepared_layout_leaves_the_rest_of_a_wider_row(rng):
    """Rows wider than the positions (pitch 336 for 300 keys): the positions past 304 keep their bytes; attention
    takes the result as v and gives prepare_v's output bit for bit."""
    q = ga.to_device(ga.to_e4m3(rng.standard_normal((1, 300, 4, 128))))
    k = ga.to_device(ga.to_e4m3(rng.standard_normal((1, 300, 2, 128))))
    v = ga.to_device(ga.to_bf16(rng.standard_normal((1, 300, 2, 128))))
    codes, _ = _run_prepared(v, 128, pitch=336)
    v8, v_scales = fp.quantize_fp8(v, 128)
    separate = ga.bits(ga.to_host(fp.prepare_v(v8).data))
    assert (codes[..., 304:] == POISON_CODE).all()
    np.testing.assert_array_equal(codes[..., :304], separate)
    fused, fused_scales = fp.quantize_fp8(v, 128, layout="prepared")
    outs = [fp.attention(q, k, value, v_descale=scales) for value, scales in ((fp.prepare_v(v8), v_scales),
                                                                              (fused, fused_scales))]
    ga.synchronize()
    assert ga.all_finite(outs[0]) and ga.equal(outs[0], outs[1])


def test_strided_input(rng):
    """k as a view into a packed (batch, seq, heads_q + 2 heads_kv, dim) qkv buffer."""
    qkv = ga.to_device(ga.to_bf16(rng.standard_normal((2, 257, 8 + 2 * 2, 128))))
    k = qkv[:, :, 8:10]
    codes, exponents = _run(k, 128)
    model_codes, model_exponents = fp8.quantize_blocks(_host(k), 128)
    np.testing.assert_array_equal(exponents, model_exponents)
    np.testing.assert_array_equal(codes, model_codes)


def test_quantize_qkv_per_block_is_the_model(rng):
    """fp.quantize_qkv(per_block=...) on the GPU equals prepare.quantize_qkv on the host (rotation and K
    smoothing included; q's codes within the bound of the scores it chose), and its output runs through attention."""
    shape_q, shape_kv = (1, 333, 8, 128), (1, 333, 2, 128)
    q, k, v = (_device(_uneven(rng, s), "float32") for s in (shape_q, shape_kv, shape_kv))
    seed = int(rng.integers(1 << 31))
    prepared = fp.quantize_qkv(q, k, v, per_block=128, smooth_k=True, seed=seed, v_layout="default")
    bound = policy.query("cuda", 128, 128, scores=prepared["scores"], per_block=128).q_code_max
    model = prepare.quantize_qkv(*(_host(t) for t in (q, k, v)), per_block=128, smooth_k=True, seed=seed,
                                 q_code_max=bound)
    for name in "qkv":
        np.testing.assert_array_equal(ga.bits(ga.to_host(prepared[name])), model[name])
        np.testing.assert_array_equal(ga.to_host(prepared[f"{name}_descale"].exponents), model[f"{name}_descale"][0])
    out = fp.attention(**prepared)
    ga.synchronize()
    assert ga.all_finite(out)


@pytest.mark.parametrize("per_block", [None, 384])
@shapes.over_dims_qk
def test_quantize_qkv_float16_scores(rng, dim_qk, per_block):
    """fp.quantize_qkv(scores="fp16") (rotated; per-head factors or 384-token blocks): q's codes within float16
    scores' bound, its factors those of the host model (blocks: its codes and exponents, bit for bit), k's and v's as
    without the option, and scores="fp16" in the dict ("fp32" in the other's); attention(**prepared) then runs float16 scores (its output
    differs from the float32-score pipeline's) within 1.05x that pipeline's end-to-end error."""
    from flashprefill import reference
    shape_q, shape_kv = (1, 700, 8, dim_qk), (1, 700, 2, dim_qk)
    q, k = (_device(rng.standard_normal(s), "float32") for s in (shape_q, shape_kv))
    v = _device(rng.standard_normal((1, 700, 2, 128)), "float32")
    seed = int(rng.integers(1 << 31))
    prepared = fp.quantize_qkv(q, k, v, seed=seed, scores="fp16", per_block=per_block, v_layout="default")
    plain = fp.quantize_qkv(q, k, v, seed=seed, per_block=per_block, scores="fp32", v_layout="default")
    bound = policy.query("cuda", dim_qk, 128, scores="fp16").q_code_max
    model = prepare.quantize_qkv(*(_host(t) for t in (q, k, v)), seed=seed, q_code_max=bound, per_block=per_block)
    assert prepared["scores"] == "fp16" and plain["scores"] == "fp32"
    q_codes = ga.bits(ga.to_host(prepared["q"]))
    assert np.abs(fp8.e4m3_decode(q_codes)).max() <= bound
    if per_block is None:
        np.testing.assert_allclose(ga.to_host(prepared["q_descale"]), model["q_descale"], rtol=1e-5)
    else:
        np.testing.assert_array_equal(q_codes, model["q"])
        np.testing.assert_array_equal(ga.to_host(prepared["q_descale"].exponents), model["q_descale"][0])
    for name in ("k", "v"):
        assert ga.equal(ga.bits(prepared[name]), ga.bits(plain[name]))
        mine, theirs = prepared[f"{name}_descale"], plain[f"{name}_descale"]
        if per_block is not None:
            mine, theirs = mine.exponents, theirs.exponents
        assert ga.equal(mine, theirs)
    out16 = fp.attention(**prepared)
    out32 = fp.attention(**plain)
    ga.synchronize()
    assert ga.all_finite(out16) and not ga.equal(out16, out32)
    ref = reference.attention_reference(*(_host(t) for t in (q, k, v)), causal=True)
    err16, err32 = (reference.relative_l2(_host(o), ref) for o in (out16, out32))
    assert err16 <= 1.05 * err32, f"{err16:.3e} with float16 scores vs {err32:.3e}"


@pytest.mark.parametrize("per_block, probabilities, scores, v_layout", [
    ("unset", "default", "fp16", "prepared"), (None, "default", "fp16", "prepared"),
    (768, "default", "fp16", "prepared"), (128, "default", "fp16", "prepared"), ("unset", "fp16", "fp32", "default")])
@shapes.over_dims_qk
def test_quantize_qkv_defaults(rng, dim_qk, per_block, probabilities, scores, v_layout):
    """quantize_qkv's defaults on Hopper: the library's preferred blocks (384 tokens, the 192-key kernels' multiple;
    128 for float16 probabilities, whose kernels take 128-key tiles at any multiple of 128, so the finer scales cost
    nothing); "auto" scores and v_layout give float16 scores (192-key kernels, or 128-key ones for blocks of a
    multiple of 128 tokens) and v prepared, neither for float16 probabilities. The library takes the dict
    (supports), and attention gives the output of the same options spelled out, bit for bit."""
    shape_q, shape_kv = (1, 800, 8, dim_qk), (1, 800, 2, dim_qk)
    q, k = (_device(rng.standard_normal(s), "float32") for s in (shape_q, shape_kv))
    v = _device(rng.standard_normal((1, 800, 2, 128)), "float32")
    seed = int(rng.integers(1 << 31))
    blocks = {} if per_block == "unset" else dict(per_block=per_block)
    preferred = 128 if probabilities == "fp16" else 384
    auto = fp.quantize_qkv(q, k, v, seed=seed, probabilities=probabilities, **blocks)
    spelled = fp.quantize_qkv(q, k, v, seed=seed, probabilities=probabilities, scores=scores, v_layout=v_layout,
                              per_block=preferred if per_block == "unset" else per_block)
    assert auto["scores"] == scores and auto.get("probabilities", "default") == probabilities
    assert isinstance(auto["v"], fp.PreparedV) == (v_layout == "prepared")
    if v_layout == "prepared":  # written so by the quantizer (blocks) or by prepare_v (per-head factors): the same
        plain = fp.quantize_qkv(q, k, v, seed=seed, probabilities=probabilities, v_layout="default", **blocks)
        assert ga.equal(auto["v"].data, fp.prepare_v(plain["v"]).data)
    if per_block == "unset":
        assert isinstance(auto["q_descale"], fp.BlockScales) and auto["q_descale"].block_tokens == preferred
    assert fp.supports(**auto)
    outs = [fp.attention(**prepared) for prepared in (auto, spelled)]
    ga.synchronize()
    assert ga.all_finite(outs[0]) and ga.equal(outs[0], outs[1])


def test_refusals():
    x = ga.randn((1, 16, 2, 128), seed=1)
    with pytest.raises(TypeError, match="x must be bfloat16 or float32"):
        fp.quantize_fp8(ga.to_e4m3(x))
    with pytest.raises(ValueError, match="signs must be a contiguous float32 array of shape"):
        fp.quantize_fp8(x, signs=ga.full((64,), 1.0, np.float32))
    with pytest.raises(fp.Error) as info:
        fp.quantize_fp8(ga.randn((1, 16, 2, 48), seed=2))
    assert info.value.status == fp.Status.ERROR_NOT_SUPPORTED and "multiple of 32" in info.value.message
    with pytest.raises(ValueError, match="layout must be one of"):
        fp.quantize_fp8(x, layout="transposed")
    with pytest.raises(ValueError, match=r"codes must be float8_e4m3fn \(batch, heads, dim, >= seq rounded up to 16\)"):
        fp.quantize_fp8(x, layout="prepared", codes=ga.full((1, 16, 2, 128), 0.0, ga.E4M3))
    with pytest.raises(fp.Error) as info:
        fp.quantize_fp8(x, 24, layout="prepared")
    assert info.value.status == fp.Status.ERROR_NOT_SUPPORTED and "multiple of 16" in info.value.message
