"""The policy Python reads from the library (flashprefill.policy, flashprefill_query) is the library's own, for both
backends, without a GPU: the q code bound of float16 scores equals the one the header states and the numpy model's
fallback (fp8.f16_scores_q_code_max_without_library), the block sizes are those of the kernel tables' tiles, and the
choices quantize_qkv makes from them ("auto" scores, v layout and block) are the ones each table implies."""
import pytest

import shapes
from flashprefill import Error, Status, api, fp8, policy



@pytest.mark.parametrize("dims", shapes.ATTENTION_DIMS)
def test_hopper_float16_scores_bound(dims):
    chosen = policy.query("cuda", *dims, scores="fp16")
    assert chosen.scores == "fp16" and chosen.kernel.endswith("_kv192_f16s")
    assert chosen.q_code_max == fp8.f16_scores_q_code_max_without_library(dims[0]) == {128: 1.125, 192: 0.75}[dims[0]]
    assert policy.query("cuda", *dims, scores="fp32").q_code_max == fp8.E4M3_MAX


@pytest.mark.parametrize("dims", shapes.ATTENTION_DIMS)
@pytest.mark.parametrize("per_block, kernel, multiple", [(None, "_kv192_f16s", 0), (384, "_kv192_f16s", 384),
                                                         (768, "_kv192_f16s", 384), (128, "_f16s", 128),
                                                         (256, "_f16s", 128)])
def test_hopper_default_scores_follow_the_blocks(dims, per_block, kernel, multiple):
    """Float16 scores by default: the 192-key kernels where they take the scales (factors, or blocks of whole
    384-token tiles), else the 128-key ones (blocks of 128 tokens, a paged cache's per-page exponents); float32 scores
    where asked for; the preferred block is the fastest kernel's either way."""
    chosen = policy.query("cuda", *dims, per_block=per_block)
    assert chosen.scores == "fp16" and chosen.kernel.endswith(kernel), chosen
    assert chosen.kernel.endswith("_kv192_f16s") == (kernel == "_kv192_f16s"), chosen
    assert (chosen.block_tokens_multiple if per_block else 0) == multiple, chosen
    if per_block == 128:
        assert policy.query("cuda", *dims, scores="fp32", per_block=128).kernel.endswith(("_hd128", "_qk192_v128"))
    assert chosen.preferred_block_tokens == 384
    assert chosen.v_layouts == {"default", "prepared"} and chosen.prepared_v_block_tokens_multiple == 16
    assert policy.query("cuda", *dims, per_block=200) is None


@pytest.mark.parametrize("dims", shapes.ATTENTION_DIMS)
def test_hopper_float16_probabilities(dims):
    chosen = policy.query("cuda", *dims, probabilities="fp16", per_block=128)
    assert chosen.kernel.endswith("_fp16p") and chosen.scores == "fp32" and chosen.q_code_max == fp8.E4M3_MAX
    assert chosen.preferred_block_tokens == 128 and chosen.v_layouts == {"default"}
    assert chosen.prepared_v_block_tokens_multiple == 0


@pytest.mark.parametrize("dims", shapes.ATTENTION_DIMS)
def test_gfx950_policy(dims):
    """gfx950: float32 scores only, v as every tensor, blocks of whole 64-key tiles."""
    for per_block in (None, 64, 384):
        chosen = policy.query("hip", *dims, per_block=per_block)
        assert chosen.kernel.startswith("gfx950_fwd_fp8_") and chosen.scores == "fp32"
        assert chosen.q_code_max == fp8.E4M3_MAX and chosen.preferred_block_tokens == 64
        assert chosen.v_layouts == {"default"} and chosen.prepared_v_block_tokens_multiple == 0
    assert policy.query("hip", *dims, scores="fp16") is None
    assert policy.query("hip", *dims, v_layout="prepared") is None
    assert policy.query("hip", *dims, per_block=96) is None


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_bf16_takes_no_blocks(backend):
    chosen = policy.query(backend, 128, 128, in_dtype="bfloat16")
    assert chosen.kernel.endswith("_bf16_hd128") and chosen.scores == "fp32"
    assert chosen.block_tokens_multiple == 0 and chosen.preferred_block_tokens == 0


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_invalid_options_raise_the_library_message(backend):
    with pytest.raises(Error, match="scores FP16 is an fp8 option") as error:
        policy.query(backend, 128, 128, in_dtype="bfloat16", scores="fp16")
    assert error.value.status == Status.ERROR_INVALID_ARGUMENT
    with pytest.raises(ValueError, match="per_block must be None or an int > 0"):
        policy.query(backend, 128, 128, per_block=0)
    assert policy.query(backend, 100, 128) is None


@pytest.mark.parametrize("dims", shapes.ATTENTION_DIMS)
@pytest.mark.parametrize("backend, probabilities, scores, block", [
    ("cuda", "default", "auto", 384), ("cuda", "default", "fp32", 384), ("cuda", "fp16", "auto", 128),
    ("hip", "default", "auto", 64)])
def test_quantize_qkv_preferred_block(dims, backend, probabilities, scores, block):
    """quantize_qkv's per_block="auto": the block the serving library's fastest kernel for the options takes."""
    assert api._preferred_block(backend, dims, probabilities, scores) == block
