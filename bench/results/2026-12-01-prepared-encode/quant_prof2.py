"""Quantizer kernel time (torch.profiler, CUPTI) and host time per call, per library build."""
import json, os, statistics, sys, time
import torch
from torch.profiler import profile, ProfilerActivity
import flashprefill as fp
from flashprefill import _lib, prepare

LIBS = dict(arg.split("=", 1) for arg in sys.argv[2:])
res = {}
for name, (b, s, hq, hkv, dqk, dv) in {"hd128 16k": (1, 16384, 32, 8, 128, 128),
                                       "mla 4k b4": (4, 4096, 16, 16, 192, 128)}.items():
    g = torch.Generator(device="cuda").manual_seed(0)
    x = {"q": torch.randn(b, s, hq, dqk, device="cuda", generator=g).to(torch.bfloat16),
         "k": torch.randn(b, s, hkv, dqk, device="cuda", generator=g).to(torch.bfloat16),
         "v": torch.randn(b, s, hkv, dv, device="cuda", generator=g).to(torch.bfloat16)}
    signs = torch.from_numpy(prepare.rotation_signs(dqk)).cuda()
    cases = {f"{t} 384": (lambda t=t: fp.quantize_fp8(x[t], 384, signs=None if t == "v" else signs)) for t in "qkv"}
    cases["v 384 + prepare_v"] = lambda: fp.prepare_v(fp.quantize_fp8(x["v"], 384)[0])
    cases["v 384 prepared"] = lambda: fp.quantize_fp8(x["v"], 384, layout="prepared")
    cases["quantize_qkv"] = lambda: fp.quantize_qkv(x["q"], x["k"], x["v"])
    def separate():
        out = fp.quantize_qkv(x["q"], x["k"], x["v"], v_layout="default")
        out["v"] = fp.prepare_v(out["v"])
        return out
    cases["quantize_qkv, prepare_v apart"] = separate
    for lib, path in LIBS.items():
        os.environ["FLASHPREFILL_LIBRARY"] = path
        _lib.lib.cache_clear()
        for c, f in cases.items():
            f(); torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    f()
                torch.cuda.synchronize()
            kern = {}
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    kern.setdefault(e.name.replace("(anonymous namespace)::", "").split("(")[0][-40:], []).append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                f()
            host = (time.perf_counter() - t0) / 20 * 1e6
            torch.cuda.synchronize()
            total = sum(sum(v) for v in kern.values()) / 5
            res[f"{name} {c} {lib}"] = {"gpu_us": total, "host_us": host,
                                        "kernels": {k: sum(v) / 5 for k, v in kern.items()}}
            print(f"{name:10s} {c:30s} {lib}: kernels {total:7.1f} us / call, host {host:7.1f} us / call; " +
                  ", ".join(f"{k} {sum(v)/5:.1f}" for k, v in kern.items()), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
