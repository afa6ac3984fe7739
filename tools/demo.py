"""`make demo`: the main job on the default problem, the Mistral-7B prefill shape at 16k tokens (batch 1,
32 query heads, 8 KV heads, head dim 128, causal), in bf16 and fp8, on the GPU present.

Prints, per precision: the median time of 10 launches, TFLOP/s, and the relative L2 error of 64 sampled
query rows against float64 attention of the inputs as the kernel received them. Without a usable GPU it
says so and runs what can run: the float64 reference and the FP8 model on a small problem, and the
library's validation (`supports`) of the 16k call.
"""
import math
import time

import numpy as np

import flashprefill as fp

BATCH, SEQ, HEADS_Q, HEADS_KV, DIM = 1, 16384, 32, 8, 128


def _gpu():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception as e:  # no CuPy, no driver, no device
        print(f"no usable GPU ({type(e).__name__}: {e})")
        return None
    print("no usable GPU (CuPy sees 0 devices)")
    return None


def quantize_grouped(x, heads_kv):
    """FA3-style fp8 codes and (batch, heads_kv) descales; for q, one factor per group of query heads (the
    heads of a group are adjacent, so the group is one wider head). Returns codes, descale, dequantized."""
    xp = fp.fp8.array_module(x)
    batch, seq, heads, dim = x.shape
    codes, descale = fp.fp8.quantize_per_head(x.reshape(batch, seq, heads_kv, heads // heads_kv * dim))
    codes = codes.reshape(x.shape)
    scale = xp.repeat(descale.astype(xp.float64), heads // heads_kv, axis=1)[:, None, :, None]
    return codes, descale, fp.fp8.e4m3_decode(codes).astype(xp.float64) * scale


def _sampled_error(cp, out, q, k, v, rows):
    """Relative L2 of out[rows] against float64 causal attention; q, k, v float64 CuPy arrays."""
    rep = HEADS_Q // HEADS_KV
    kk, vv = cp.repeat(k[0], rep, axis=1), cp.repeat(v[0], rep, axis=1)
    s = cp.einsum("qhd,khd->hqk", q[0, rows], kk) / math.sqrt(DIM)
    s[:, cp.arange(SEQ)[None, :] > rows[:, None]] = -cp.inf
    p = cp.exp(s - s.max(-1, keepdims=True))
    ref = cp.einsum("hqk,khd->qhd", p / p.sum(-1, keepdims=True), vv)
    got = out[0, rows].astype(cp.float64)
    return float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))


def run_gpu(cp):
    import ml_dtypes
    rng = cp.random.default_rng()
    x = {n: rng.standard_normal((BATCH, SEQ, h, DIM), dtype=cp.float32)
         for n, h in (("q", HEADS_Q), ("k", HEADS_KV), ("v", HEADS_KV))}
    rows = cp.concatenate([cp.array([0, SEQ - 1]), rng.integers(0, SEQ, 62)])
    flops = BATCH * HEADS_Q * SEQ * SEQ * 2 * DIM
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: batch {BATCH}, {SEQ} tokens, "
          f"{HEADS_Q}/{HEADS_KV} heads, head dim {DIM}, causal")
    for precision in ("bf16", "fp8"):
        if precision == "bf16":
            args = [x[n].astype(ml_dtypes.bfloat16) for n in "qkv"]
            kwargs = {}
            exact = [a.astype(cp.float64) for a in args]
        else:
            codes, descales, exact = zip(*(quantize_grouped(x[n], HEADS_KV) for n in "qkv"))
            args = [c.view(ml_dtypes.float8_e4m3fn) for c in codes]
            kwargs = dict(zip(("q_descale", "k_descale", "v_descale"), descales))
        if not fp.supports(*args, **kwargs):
            print(f"  {precision}: no kernel in this build")
            continue
        out = fp.attention(*args, **kwargs)
        times = []
        for _ in range(10):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fp.attention(*args, out=out, **kwargs)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        ms = float(np.median(times))
        err = _sampled_error(cp, out, *exact, rows)
        print(f"  {precision}: {ms:7.3f} ms  {flops / ms / 1e9:6.0f} TFLOP/s  relative L2 (64 rows) {err:.2e}")


def run_cpu():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 256, h, DIM)).astype(np.float32) for h in (4, 1, 1))
    t = time.perf_counter()
    ref = fp.reference.attention_reference(q, k, v, causal=True)
    print(f"float64 reference, 256 tokens, 4/1 heads: {1e3 * (time.perf_counter() - t):.1f} ms")
    (q8, qd, _), (k8, kd, _), (v8, vd, _) = (quantize_grouped(a, 1) for a in (q, k, v))
    model = fp.fp8.attention_fp8_model(q8, k8, v8, qd, kd, vd, causal=True)
    print(f"numpy model of the exp-free FP8 pipeline (per-head scales), end to end: relative L2 "
          f"{fp.reference.relative_l2(model, ref):.2e}")
    try:
        shapes = [(BATCH, SEQ, h, DIM) for h in (HEADS_Q, HEADS_KV, HEADS_KV)]
        stand_ins = [fp.DeviceArray(ptr, shape, "bfloat16") for ptr, shape in zip((1 << 32, 2 << 32, 3 << 32), shapes)]
        print(f"library {fp.version()}: a bf16 kernel for the 16k Mistral-7B shape: {fp.supports(*stand_ins)}")
    except fp.LibraryNotFoundError as e:
        print(f"library not built ({e}); `make` builds it")


def main():
    cp = _gpu()
    if cp is None:
        run_cpu()
    else:
        run_gpu(cp)


if __name__ == "__main__":
    main()
