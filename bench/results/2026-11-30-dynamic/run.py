"""Scratch (not committed): variant libraries side by side with FA3, one process, alternating rounds."""
import argparse, ctypes, json, os, statistics, sys, time
import torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import flashprefill as fp
from flashprefill import _lib
from bench import make_inputs, time_launches, time_back_to_back
from peers import PEERS

def use(path):
    l = _lib._declare(ctypes.CDLL(path))
    _lib.lib = lambda backend="cuda": l

ap = argparse.ArgumentParser()
ap.add_argument("--variants", nargs="+", required=True)  # name=path
ap.add_argument("--rounds", type=int, default=6)
ap.add_argument("--launches", type=int, default=8)
ap.add_argument("--out", default=None)
ap.add_argument("--dts", default="bf16;fp8")
ap.add_argument("--shapes", default="16k;4k b4;32k")
ap.add_argument("--per-call", dest="b2b", action="store_false")
ap.add_argument("--gap", type=float, default=0.0)
ap.add_argument("--qshift", type=int, default=0)  # q's e4m3 codes divided by 2^qshift, its descale multiplied
ap.add_argument("--once", default=None)  # peer name for ncu: run once at 16k
ap.add_argument("--shape", default="1,16384")  # batch,seq for --once
ap.add_argument("--heads-dim", default="32,8,128")  # heads_q,heads_kv,dim_qk for --once
a = ap.parse_args()
variants = dict(v.split("=", 1) for v in a.variants)
if a.once:
    b_, s_ = map(int, a.shape.split(","))
    hq_, hkv_, dqk_ = map(int, a.heads_dim.split(","))
    x = make_inputs(b_, s_, hq_, hkv_, dqk_, 128, 0)
    if a.qshift:
        x["q8"] = (x["q8"].float() / 2 ** a.qshift).to(torch.float8_e4m3fn)
        x["qd"] = x["qd"] * 2 ** a.qshift
    name, _, dt = a.once.partition(":")
    if name in variants:
        use(variants[name]); fn = PEERS[f"flashprefill {dt}"][1](x)
    else:
        fn = PEERS[f"FA3 {dt}"][1](x)
    fn(); torch.cuda.synchronize(); fn(); torch.cuda.synchronize(); sys.exit()
DTS = a.dts.split(";")
shapes = [("16k", 1, 16384, 32, 8, 128), ("4k b4", 4, 4096, 32, 8, 128), ("32k", 1, 32768, 32, 8, 128),
          ("mla 16k", 1, 16384, 16, 16, 192), ("mla 4k b4", 4, 4096, 16, 16, 192), ("mla 32k", 1, 32768, 16, 16, 192), ("32/32 16k", 1, 16384, 32, 32, 128)]
shapes = [x for x in shapes if x[0] in a.shapes.split(";")]
res = {}
for sname, b, s, hq, hkv, dqk in shapes:
    flops = b * hq * s * s * (dqk + 128)
    x = make_inputs(b, s, hq, hkv, dqk, 128, 1)
    if a.qshift:
        x["q8"] = (x["q8"].float() / 2 ** a.qshift).to(torch.float8_e4m3fn)
        x["qd"] = x["qd"] * 2 ** a.qshift
    fns = {}
    for dt in DTS:
        if dt in ("bf16", "fp8"): fns[f"FA3 {dt}"] = PEERS[f"FA3 {dt}"][1](x)
        for n, p in variants.items():
            use(p); f = PEERS[f"flashprefill {dt}"][1](x); f()
            lib = _lib.lib()
            fns[f"{n} {dt}"] = (lambda f=f, lib=lib: (setattr(_lib, "lib", lambda backend="cuda", l=lib: l), f()))
    outs = {}
    for k, f in fns.items():
        r = f()
        r = r[1] if isinstance(r, tuple) and len(r) == 2 and not torch.is_tensor(r[0]) else r
        outs[k] = r[0] if isinstance(r, tuple) else r
    torch.cuda.synchronize()
    for dt in DTS:
        ks = [f"{n} {dt}" for n in variants]
        ref = outs[ks[0]].float()
        print(sname, dt, "diff vs", ks[0], " ".join(f"{k}: {((outs[k].float() - ref).norm() / ref.norm()).item():.2e} nan={torch.isnan(outs[k].float()).any().item()}" for k in ks[1:]), flush=True)
    per = {k: [] for k in fns}
    for r in range(a.rounds):
        for k, f in fns.items():
            if a.gap: torch.cuda.synchronize(); time.sleep(a.gap)
            per[k].append(time_back_to_back(f, a.launches) if a.b2b else statistics.median(time_launches(f, a.launches)))
    row = {}
    for k, v in per.items():
        m = statistics.median(v); row[k] = {"tflops": flops / m / 1e9, "spread": (max(v) - min(v)) / m, "rounds_ms": v}
    res[sname] = row
    for dt in DTS:
        fa = row[f"FA3 {dt[:4].strip(',')}"]["tflops"]
        print(sname, dt, f"FA3 {fa:.0f}", " ".join(f"{n} {row[f'{n} {dt}']['tflops']:.0f} ({row[f'{n} {dt}']['tflops']/fa:.3f}, ±{row[f'{n} {dt}']['spread']*100:.0f}%)" for n in variants), flush=True)
    del x, fns; torch.cuda.empty_cache()
if a.out:
    json.dump(res, open(a.out, "w"), indent=1)
