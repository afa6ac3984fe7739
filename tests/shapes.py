"""The head dims and problem shapes the suites share, with their test ids, each named once: the Hopper GPU suites
(test_kernel_gpu.py, test_nonfinite_gpu.py, test_quantize_gpu.py) and the gfx950 emulated ones
(test_gfx950_kernel_emulated.py, test_gfx950_quantize_emulated.py) parametrize over these.

A shape is (batch, seqlen_q, seqlen_k, heads_q, heads_kv); its id "b1_sq200_sk200_h2_1".
"""
import pytest

# (dim_qk, dim_v): hd128 and DeepSeek-V2's latent-attention prefill shape, both kernel families' head dims
ATTENTION_DIMS = [(128, 128), (192, 128)]
DIMS_QK = [dim_qk for dim_qk, _ in ATTENTION_DIMS]  # dim_v is 128 in both
QUANTIZE_DIMS = [32, 64, 96, 128, 160, 192, 224, 256]  # the quantizers' head dims (one gfx950 code object each)
# small enough for the emulator: seqlen 1, one full wave tile, a partial second tile, seqlen_q < seqlen_k with GQA,
# batch 2
EMULATED_SHAPES = [(1, 1, 1, 1, 1), (1, 64, 64, 2, 1), (1, 200, 200, 2, 1), (1, 40, 200, 2, 2), (2, 70, 70, 2, 1)]


def dims_id(dims):
    return "qk{}_v{}".format(*dims)


def shape_id(shape):
    return "b{}_sq{}_sk{}_h{}_{}".format(*shape)


over_attention_dims = pytest.mark.parametrize("dims", ATTENTION_DIMS, ids=dims_id)
over_dims_qk = pytest.mark.parametrize("dim_qk", DIMS_QK)
over_quantize_dims = pytest.mark.parametrize("dim", QUANTIZE_DIMS)


def over_shapes(shapes):
    """parametrize "shape" over `shapes` with shape_id's ids."""
    return pytest.mark.parametrize("shape", shapes, ids=shape_id)
