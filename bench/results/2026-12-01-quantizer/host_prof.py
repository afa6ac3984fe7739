"""Where the Python binding's host time goes: cProfile over repeated calls (no sync inside)."""
import cProfile, pstats, io, sys, time
import torch
import flashprefill as fp
from flashprefill import prepare

q = torch.randn(1, 1024, 32, 128, device="cuda").to(torch.bfloat16)
k = torch.randn(1, 1024, 8, 128, device="cuda").to(torch.bfloat16)
v = torch.randn(1, 1024, 8, 128, device="cuda").to(torch.bfloat16)
signs = torch.from_numpy(prepare.rotation_signs(128)).cuda()
d = fp.quantize_qkv(q, k, v)
calls = {"quantize_fp8": lambda: fp.quantize_fp8(q, 384, signs=signs),
         "prepare_v": lambda: fp.prepare_v(d["v"].data if False else fp.quantize_fp8(v, 384)[0]),
         "attention": lambda: fp.attention(**d),
         "quantize_qkv": lambda: fp.quantize_qkv(q, k, v)}
for name, f in calls.items():
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        f()
    t = (time.perf_counter() - t0) / 50 * 1e6
    torch.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(50):
        f()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    print(f"===== {name}: {t:.1f} us per call (host)")
    print("\n".join(l for l in s.getvalue().splitlines() if l.strip())[:3500])
