"""The GPU quantizer's packed (varlen) form (flashprefill_quantize with cu_seqlens, through fp.quantize_fp8) against
its numpy model, bit for bit: fp8.quantize_blocks_varlen(prepare.transform_varlen(x, cu_seqlens, signs, subtract)).
Outputs are poisoned first, and the model starts from the same poison, so every row and exponent slot the kernel must
leave alone is checked to be left alone. CuPy arrays in and out (gpu_arrays.py)."""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import shapes
from flashprefill import fp8, prepare

pytestmark = pytest.mark.gpu

POISON_CODE = 0x7F  # NaN: never a code of finite inputs
POISON_EXPONENT = 90  # no block of these inputs takes it


def _uneven(rng, shape):
    """N(0,1) rows times 2^-6..2^6 per 64 rows and head, one channel 30x larger: exponents that vary along a
    sequence and rows the rotation changes."""
    total, heads, dim = shape
    x = rng.standard_normal(shape)
    x *= np.exp2(rng.integers(-6, 7, ((total + 63) // 64, heads)))[np.arange(total) // 64, :, None]
    x[..., 3] *= 30
    return x


def _device(host, dtype):
    return ga.to_device(ga.to_bf16(host) if dtype == "bfloat16" else host.astype(np.float32))


def _run(x, cu_seqlens, max_seqlen, block, signs=None, subtract=None):
    """fp.quantize_fp8 of a packed x into poisoned outputs; (codes uint8, exponents int8) on the host."""
    heads = x.shape[1]
    codes = ga.full(x.shape, POISON_CODE, np.uint8)
    exponents = ga.full((len(cu_seqlens) - 1, heads, -(-max_seqlen // block)), POISON_EXPONENT, np.int8)
    out, scales = fp.quantize_fp8(x, block, signs=signs, subtract=subtract, codes=codes.view(ga.E4M3),
                                  exponents=exponents, cu_seqlens=ga.to_device(np.asarray(cu_seqlens, np.int32)),
                                  max_seqlen=max_seqlen)
    assert scales.block_tokens == block and scales.exponents is exponents
    ga.synchronize()
    return ga.to_host(codes), ga.to_host(exponents)


def _model(x, cu_seqlens, max_seqlen, block, signs=None, subtract=None):
    """The model from the same poison as _run's outputs."""
    heads = x.shape[1]
    before_codes = np.full(x.shape, POISON_CODE, np.uint8)
    before_exponents = np.full((len(cu_seqlens) - 1, heads, -(-max_seqlen // block)), POISON_EXPONENT, np.int8)
    y = prepare.transform_varlen(x, cu_seqlens, signs, subtract)
    return fp8.quantize_blocks_varlen(y, cu_seqlens, max_seqlen, block, codes=before_codes, exponents=before_exponents)


def _assert_equal(got, expected):
    for name, mine, model in zip(("codes", "exponents"), got, expected):
        # a zero's sign is the rotation's order of additions (a smoothed one-row sequence is all zeros): not compared
        mismatch = mine != model
        if name == "codes":
            mismatch &= ((mine & 0x7F) != 0) | ((model & 0x7F) != 0)
        assert not mismatch.any(), (f"{mismatch.sum()} of {mine.size} {name} differ, first at "
                                    f"{np.argwhere(mismatch)[0].tolist()}")


def _sequence_means(x, cu_seqlens):
    """float32 (batch, heads, dim): each sequence's mean over its rows (0 for an empty one), as K smoothing takes."""
    return np.stack([x[begin:end].mean(axis=0) if end > begin else np.zeros(x.shape[1:])
                     for begin, end in zip(cu_seqlens[:-1], cu_seqlens[1:])]).astype(np.float32)


LENGTHS = [300, 0, 1, 129, 257]  # a long one, an empty one, one token, a block and one, two blocks and one


@pytest.mark.parametrize("block", [64, 128, 200])
@pytest.mark.parametrize("mode", ["plain", "rotate", "rotate_smooth"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@shapes.over_quantize_dims
def test_bit_identical_to_the_model(rng, dim, dtype, mode, block):
    """Every dim, bf16 and float32, with and without rotation and per-sequence smoothing: sequences of 0, 1 and
    past-a-block lengths after two rows that belong to none and before five more: codes and exponents as the
    model's, the rows outside and the slots past each sequence's blocks untouched."""
    cu_seqlens = np.concatenate([[0], np.cumsum(LENGTHS)]) + 2
    total = int(cu_seqlens[-1]) + 5
    x = _device(_uneven(rng, (total, 3, dim)), dtype)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if mode != "plain" else None
    subtract = _sequence_means(ga.host_f64(x), cu_seqlens) if mode == "rotate_smooth" else None
    got = _run(x, cu_seqlens, max(LENGTHS), block, None if signs is None else ga.to_device(signs),
               None if subtract is None else ga.to_device(subtract))
    expected = _model(ga.host_f64(x), cu_seqlens, max(LENGTHS), block, signs, subtract)
    _assert_equal(got, expected)
    assert (got[0][:2] == POISON_CODE).all() and (got[0][-5:] == POISON_CODE).all()
    assert (got[1][1] == POISON_EXPONENT).all() and (got[1][2, :, 1:] == POISON_EXPONENT).all()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("dim", shapes.DIMS_QK)
def test_equal_lengths_packed_are_the_batch_form(rng, dim, dtype):
    """The kernel on a batch of equal lengths and on the same rows packed: the same codes and exponents."""
    batch, seqlen, heads, block = 3, 333, 2, 128
    x = _device(_uneven(rng, (batch * seqlen, heads, dim)), dtype)
    signs = ga.to_device(prepare.rotation_signs(dim, int(rng.integers(1 << 31))))
    packed = _run(x, np.arange(batch + 1) * seqlen, seqlen, block, signs)
    codes, scales = fp.quantize_fp8(x.reshape(batch, seqlen, heads, dim), block, signs=signs)
    ga.synchronize()
    np.testing.assert_array_equal(packed[0], ga.bits(ga.to_host(codes)).reshape(-1, heads, dim))
    np.testing.assert_array_equal(packed[1], ga.to_host(scales.exponents))


INVALID_SEQUENCES = {  # (cu_seqlens over 20 rows, max_seqlen): no two sequences share a row
    "decreasing": ([0, 5, 3, 3], 30), "past_total": ([0, 5, 25], 30), "negative": ([-1, 5, 9], 30),
    "past_max_seqlen": ([0, 9, 20], 10)}


@pytest.mark.parametrize("cu_seqlens, max_seqlen", INVALID_SEQUENCES.values(), ids=INVALID_SEQUENCES)
def test_invalid_sequences(rng, cu_seqlens, max_seqlen):
    """Bounds the host cannot check: the sequence is not quantized (its rows keep the poison, its slots all -128),
    the others are, as the model has it."""
    x = _device(rng.standard_normal((20, 2, 128)), "float32")
    got = _run(x, cu_seqlens, max_seqlen, 8)
    expected = _model(ga.host_f64(x), cu_seqlens, max_seqlen, 8)
    _assert_equal(got, expected)
    assert (got[1] == -128).all(axis=(1, 2)).sum() == fp8.varlen_bounds(cu_seqlens, 20, max_seqlen).count(None)


def test_strided_input(rng):
    """k as a view into a packed (total, heads_q + 2 heads_kv, dim) qkv buffer, as an engine holds it."""
    cu_seqlens = np.array([0, 100, 357, 360])
    qkv = ga.to_device(ga.to_bf16(rng.standard_normal((360, 8 + 2 * 2, 128))))
    k = qkv[:, 8:10]
    got = _run(k, cu_seqlens, 257, 128)
    _assert_equal(got, _model(ga.host_f64(k), cu_seqlens, 257, 128))


def test_refusals():
    x = ga.randn((40, 2, 128), seed=1)
    cu_seqlens = ga.to_device(np.array([0, 10, 40], np.int32))
    with pytest.raises(ValueError, match="cu_seqlens needs max_seqlen, an int > 0"):
        fp.quantize_fp8(x, cu_seqlens=cu_seqlens)
    with pytest.raises(ValueError, match="with cu_seqlens, x must be 3-d"):
        fp.quantize_fp8(x[None], cu_seqlens=cu_seqlens, max_seqlen=30)
    with pytest.raises(ValueError, match="cu_seqlens must be contiguous int32"):
        fp.quantize_fp8(x, cu_seqlens=ga.to_device(np.array([0, 10, 40], np.int8)), max_seqlen=30)
    with pytest.raises(ValueError, match="takes the equal-length form"):
        fp.quantize_fp8(x, 16, layout="prepared", cu_seqlens=cu_seqlens, max_seqlen=30)
    with pytest.raises(ValueError, match=r"exponents must be contiguous int8 of shape \(batch, heads, ceil\(max_"):
        fp.quantize_fp8(x, 16, cu_seqlens=cu_seqlens, max_seqlen=30, exponents=ga.full((2, 2, 1), 0, np.int8))
