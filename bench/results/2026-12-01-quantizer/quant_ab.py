"""A/B of quantizer builds: quantize_fp8 per tensor, libraries alternated round by round, CUDA-event medians."""
import json, os, statistics, sys
import torch
import flashprefill as fp
from flashprefill import _lib, prepare

LIBS = dict(arg.split("=", 1) for arg in sys.argv[2:])

def use(path):
    os.environ["FLASHPREFILL_LIBRARY"] = path
    _lib.lib.cache_clear()

def times(f, n=15):
    f(); torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

res = {}
for name, (b, s, hq, hkv, dqk, dv) in {"hd128 16k": (1, 16384, 32, 8, 128, 128),
                                       "mla 4k b4": (4, 4096, 16, 16, 192, 128)}.items():
    g = torch.Generator(device="cuda").manual_seed(0)
    x = {"q": torch.randn(b, s, hq, dqk, device="cuda", generator=g).to(torch.bfloat16),
         "k": torch.randn(b, s, hkv, dqk, device="cuda", generator=g).to(torch.bfloat16),
         "v": torch.randn(b, s, hkv, dv, device="cuda", generator=g).to(torch.bfloat16)}
    signs = torch.from_numpy(prepare.rotation_signs(dqk)).cuda()
    cases = {f"{t} {blk}": (lambda t=t, blk=blk: fp.quantize_fp8(x[t], blk, signs=None if t == "v" else signs))
             for t in "qkv" for blk in (128, 384)}
    cases["q f32 384"] = lambda: fp.quantize_fp8(xf, 384, signs=signs)
    xf = x["q"].float()
    r = {lib: {c: [] for c in cases} for lib in LIBS}
    for rnd in range(5):
        for lib in (list(LIBS) if rnd % 2 == 0 else list(LIBS)[::-1]):
            use(LIBS[lib])
            for c, f in cases.items():
                r[lib][c].append(times(f))
    for lib in LIBS:
        r[lib] = {c: (statistics.median(v), min(v), max(v)) for c, v in r[lib].items()}
    res[name] = r
    for c in cases:
        print(f"{name:10s} {c:10s} " + "  ".join(f"{lib} {r[lib][c][0]*1e3:7.1f} us [{r[lib][c][1]*1e3:.1f}, {r[lib][c][2]*1e3:.1f}]" for lib in LIBS), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
