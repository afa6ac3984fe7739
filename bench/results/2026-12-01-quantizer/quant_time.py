"""Quantizer timings: quantize_fp8 per tensor (block, rotation), and quantize_qkv paths, CUDA events, medians."""
import json, statistics, sys
import torch
import flashprefill as fp
from flashprefill import fp8, prepare

def timeit(f, n=20):
    f(); torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts), min(ts), max(ts)

res = {}
for name, (b, s, hq, hkv, dqk, dv) in {"hd128 16k": (1, 16384, 32, 8, 128, 128),
                                       "mla 4k b4": (4, 4096, 16, 16, 192, 128),
                                       "mla 16k": (1, 16384, 16, 16, 192, 128)}.items():
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, s, hq, dqk, device="cuda", generator=g).to(torch.bfloat16)
    k = torch.randn(b, s, hkv, dqk, device="cuda", generator=g).to(torch.bfloat16)
    v = torch.randn(b, s, hkv, dv, device="cuda", generator=g).to(torch.bfloat16)
    signs = torch.from_numpy(prepare.rotation_signs(dqk)).cuda()
    r = {}
    for block in (128, 384):
        r[f"q block {block} rot"] = timeit(lambda: fp.quantize_fp8(q, block, signs=signs))
        r[f"k block {block} rot"] = timeit(lambda: fp.quantize_fp8(k, block, signs=signs))
        r[f"v block {block}"] = timeit(lambda: fp.quantize_fp8(v, block))
    v8 = fp.quantize_fp8(v, 384)[0]
    r["prepare_v"] = timeit(lambda: fp.prepare_v(v8))
    r["quantize_qkv per_block=384 (defaults)"] = timeit(lambda: fp.quantize_qkv(q, k, v, per_block=384), 10)
    r["quantize_qkv defaults (per-head, CuPy)"] = timeit(lambda: fp.quantize_qkv(q, k, v), 5)
    mb = (q.numel() + k.numel() + v.numel()) * 2 / 1e6
    r["bf16 MB in"] = mb
    res[name] = r
    print(name, {k_: (round(v_[0], 4) if isinstance(v_, tuple) else v_) for k_, v_ in r.items()}, flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
