"""The attention implementations the benchmark runs side by side, each as `setup(inputs) -> run()`.

inputs: dict of torch CUDA tensors in (batch, seq, heads, dim) layout: q, k, v (bf16) and q8, k8, v8 (fp8 e4m3)
with FA3-style descales qd, kd, vd (float32, (batch, heads_kv)). run() returns the output (SDPA's in its own
(batch, heads, seq, dim) layout; cuDNN fp8's as uint8 e4m3 codes). Every setup raises PeerUnavailable with the
reason when its library is missing or refuses the shape, so the benchmark reports it instead of failing.
"""
import math

import torch

import flashprefill as fp
from flashprefill import fp8, policy, prepare
from timing import PeerUnavailable


def _out(x):
    return torch.empty(x["q"].shape[:3] + (x["v"].shape[-1],), device="cuda", dtype=torch.bfloat16)


def ours_bf16(x):
    out = _out(x)
    if not fp.supports(x["q"], x["k"], x["v"]):
        raise PeerUnavailable("flashprefill has no bf16 kernel for this shape")
    return lambda: fp.attention(x["q"], x["k"], x["v"], causal=True, out=out)


def ours_fp8(x):
    """FA3's fp8 inputs with float32 scores (scores="fp32"; attention's default takes float16 scores where a kernel
    has them: the "fp16 scores" peers)."""
    out = _out(x)
    kw = dict(q_descale=x["qd"], k_descale=x["kd"], v_descale=x["vd"], scores="fp32")
    if not fp.supports(x["q8"], x["k8"], x["v8"], **kw):
        raise PeerUnavailable("flashprefill has no fp8 kernel for this shape")
    return lambda: fp.attention(x["q8"], x["k8"], x["v8"], causal=True, out=out, **kw)


def ours_fp8_prepared_v(x, each_call=False):
    """The fp8 inputs with v prepared (prepare_v: the layout the kernels load as V^T without transposing it): once
    here, or in every call (each_call, its cost included); float32 scores as ours_fp8."""
    out = _out(x)
    kw = dict(q_descale=x["qd"], k_descale=x["kd"], v_descale=x["vd"], scores="fp32")
    prepared = fp.prepare_v(x["v8"])
    if not fp.supports(x["q8"], x["k8"], prepared, **kw):
        raise PeerUnavailable("flashprefill has no fp8 kernel for a prepared v of this shape")
    if each_call:
        return lambda: fp.attention(x["q8"], x["k8"], fp.prepare_v(x["v8"], out=prepared.data), causal=True,
                                    out=out, **kw)
    return lambda: fp.attention(x["q8"], x["k8"], prepared, causal=True, out=out, **kw)


def ours_fp8_fp16_p(x):
    """The fp8 inputs with probabilities="fp16": P as float16, V widened, P.V at the 16-bit rate."""
    out = _out(x)
    kw = dict(q_descale=x["qd"], k_descale=x["kd"], v_descale=x["vd"], probabilities="fp16")
    if not fp.supports(x["q8"], x["k8"], x["v8"], **kw):
        raise PeerUnavailable("flashprefill has no fp8 kernel with float16 probabilities for this shape")
    return lambda: fp.attention(x["q8"], x["k8"], x["v8"], causal=True, out=out, **kw)


def ours_fp8_f16_scores(x, prepared_v=False):
    """scores="fp16" (what attention's default takes here) on FA3's inputs (the kernel divides q's codes into float16
    scores' bound per 64 rows), v prepared once here where prepared_v."""
    out = _out(x)
    kw = dict(q_descale=x["qd"], k_descale=x["kd"], v_descale=x["vd"], scores="fp16")
    v = fp.prepare_v(x["v8"]) if prepared_v else x["v8"]
    if not fp.supports(x["q8"], x["k8"], v, **kw):
        raise PeerUnavailable("flashprefill has no fp8 kernel with float16 scores for this shape")
    return lambda: fp.attention(x["q8"], x["k8"], v, causal=True, out=out, **kw)


def _q_code_max(x, scores):
    """The largest magnitude of q's codes for `scores` (float16 scores: the bound the library states)."""
    if scores != "fp16":
        return fp8.E4M3_MAX
    return policy.query("cuda", x["q"].shape[-1], x["v"].shape[-1], scores="fp16").q_code_max


def ours_fp8_blocks(x, block=128, scores="fp32"):
    """The same inputs quantized with per-block power-of-two scales (`block` tokens x head dim, quantize_fp8; q's
    codes within float16 scores' bound where scores="fp16")."""
    out = _out(x)
    (q, qs), (k, ks), (v, vs) = (fp.quantize_fp8(x[n], block=block, code_max=_q_code_max(x, scores) if n == "q"
                                                 else fp8.E4M3_MAX) for n in "qkv")
    kw = dict(q_descale=qs, k_descale=ks, v_descale=vs, scores=scores)
    if not fp.supports(q, k, v, **kw):
        raise PeerUnavailable("flashprefill has no fp8 kernel with block scales for this shape")
    return lambda: fp.attention(q, k, v, causal=True, out=out, **kw)


def ours_fp8_quantized(x, block=128, scores="fp32"):
    """From the bf16 inputs each call: the GPU quantizer (q and k rotated, scales per `block` tokens; q's codes
    within float16 scores' bound where scores="fp16"), then attention."""
    if x["q"].shape[-1] % 32 or x["q"].shape[-1] > 256:
        raise PeerUnavailable("the quantizer takes dims that are multiples of 32 up to 256")
    out = _out(x)
    signs = torch.from_numpy(prepare.rotation_signs(x["q"].shape[-1])).cuda()
    q_code_max = _q_code_max(x, scores)

    def run():
        q, qs = fp.quantize_fp8(x["q"], block, signs=signs, code_max=q_code_max)
        k, ks = fp.quantize_fp8(x["k"], block, signs=signs)
        v, vs = fp.quantize_fp8(x["v"], block)
        return fp.attention(q, k, v, causal=True, out=out, q_descale=qs, k_descale=ks, v_descale=vs, scores=scores)
    return run


def ours_fp8_quantize_qkv(x):
    """From the bf16 inputs each call: quantize_qkv with its defaults (rotation, 384-token blocks; on Hopper float16
    scores and v prepared), then attention: the default pipeline, the quantizer's kernels and host time included."""
    out = _out(x)
    if not fp.supports(**fp.quantize_qkv(x["q"], x["k"], x["v"])):
        raise PeerUnavailable("flashprefill has no fp8 kernel for quantize_qkv's defaults at this shape")
    return lambda: fp.attention(**fp.quantize_qkv(x["q"], x["k"], x["v"]), causal=True, out=out)


def _fa3():
    try:
        from fa3_fwd_interface import flash_attn_func
    except ImportError as e:
        raise PeerUnavailable(f"fa3_fwd not installed ({e})")
    return flash_attn_func


def fa3_bf16(x):
    f = _fa3()
    return lambda: f(x["q"], x["k"], x["v"], causal=True)


def fa3_fp8(x):
    f = _fa3()
    return lambda: f(x["q8"], x["k8"], x["v8"], causal=True, q_descale=x["qd"], k_descale=x["kd"],
                     v_descale=x["vd"])



def _sdpa(x, backend):
    from torch.nn.attention import sdpa_kernel
    rep = x["q"].shape[2] // x["k"].shape[2]
    q = x["q"].transpose(1, 2)
    k = x["k"].transpose(1, 2)
    v = x["v"].transpose(1, 2)
    gqa = rep > 1

    def run():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    try:
        run()
    except RuntimeError as e:
        raise PeerUnavailable(f"torch SDPA {backend}: {str(e).splitlines()[0]}")
    return run


def sdpa_cudnn_bf16(x):
    from torch.nn.attention import SDPBackend
    return _sdpa(x, SDPBackend.CUDNN_ATTENTION)


def sdpa_flash_bf16(x):
    from torch.nn.attention import SDPBackend
    return _sdpa(x, SDPBackend.FLASH_ATTENTION)


def cudnn_fp8(x):
    """cuDNN's fp8 SDPA through cudnn-frontend; on Hopper its output is fp8 too (one more rounding)."""
    try:
        import cudnn
    except ImportError as e:
        raise PeerUnavailable(f"cudnn-frontend not installed ({e})")
    q8, k8, v8 = x["q8"], x["k8"], x["v8"]
    batch, seq_q, heads_q, dim = q8.shape
    dim_v = v8.shape[-1]
    fp8 = cudnn.data_type.FP8_E4M3
    try:
        handle = cudnn.create_handle()
        cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
        graph = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=handle)

        def bhsd(name, t):  # cuDNN wants (batch, heads, seq, dim) dims with the tensor's real strides
            b, s, h, d = t.shape
            sb, ss, sh, sd = t.stride()
            return graph.tensor(name=name, dim=[b, h, s, d], stride=[sb, sh, ss, sd], data_type=fp8)

        def scalar(name):
            return graph.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=cudnn.data_type.FLOAT)
        q, k, v = bhsd("q", q8), bhsd("k", k8), bhsd("v", v8)
        names = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
        scales = {n: scalar(n) for n in names}
        o, _, amax_s, amax_o = graph.sdpa_fp8(q=q, k=k, v=v, **scales, is_inference=True,
                                              attn_scale=1 / math.sqrt(dim), use_causal_mask=True)
        out = torch.empty((batch, seq_q, heads_q, dim_v), device="cuda", dtype=torch.uint8)
        o.set_output(True).set_dim([batch, heads_q, seq_q, dim_v]).set_stride(
            [seq_q * heads_q * dim_v, dim_v, heads_q * dim_v, 1]).set_data_type(fp8)
        for a in (amax_s, amax_o):
            a.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
    except Exception as e:  # cudnn raises its own types; any refusal means "not available for this shape"
        raise PeerUnavailable(f"cuDNN fp8: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    # Per-tensor descales (cuDNN fp8 takes scalars): the largest per-head factor of each input.
    values = {"descale_q": x["qd"].max(), "descale_k": x["kd"].max(), "descale_v": x["vd"].max(),
              "descale_s": torch.tensor(1 / 448.0), "scale_s": torch.tensor(448.0), "scale_o": torch.tensor(1.0)}
    pack = {scales[n]: values[n].reshape(1, 1, 1, 1).float().cuda() for n in names}
    pack.update({q: q8, k: k8, v: v8, o: out, amax_s: torch.empty(1, device="cuda"),
                 amax_o: torch.empty(1, device="cuda")})
    workspace = torch.empty(graph.get_workspace_size(), device="cuda", dtype=torch.uint8)

    def run():
        graph.execute(pack, workspace, handle=handle)
        return out
    return run


PEERS = {
    "flashprefill fp8": ("fp8", ours_fp8),
    "flashprefill fp8, V prepared": ("fp8", ours_fp8_prepared_v),
    "flashprefill fp8 + prepare_v": ("fp8", lambda x: ours_fp8_prepared_v(x, each_call=True)),
    "flashprefill fp8 blocks": ("fp8", ours_fp8_blocks),
    "flashprefill fp8, fp16 P": ("fp8", ours_fp8_fp16_p),
    "flashprefill fp8 + quantizer": ("fp8", ours_fp8_quantized),
    "flashprefill fp8 + quantize_qkv": ("fp8", ours_fp8_quantize_qkv),
    "FA3 fp8": ("fp8", fa3_fp8),
    "flashprefill fp8, fp16 scores": ("fp8", ours_fp8_f16_scores),
    "flashprefill fp8, fp16 scores, V prepared": ("fp8", lambda x: ours_fp8_f16_scores(x, prepared_v=True)),
    "cuDNN fp8 (fp8 out)": ("fp8", cudnn_fp8),
    "flashprefill bf16": ("bf16", ours_bf16),
    "FA3 bf16": ("bf16", fa3_bf16),
    "cuDNN bf16 (SDPA)": ("bf16", sdpa_cudnn_bf16),
    "FA2 bf16 (SDPA flash)": ("bf16", sdpa_flash_bf16),
}
