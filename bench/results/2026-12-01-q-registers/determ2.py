"""Scratch: bf16 calls interleaved with fp8 ones (as run.py interleaves libraries), each bf16 output kept and compared
bit for bit with the first."""
import ctypes, sys, torch
import flashprefill as fp
from flashprefill import _lib
libs = {p.split("/")[-2]: _lib._declare(ctypes.CDLL(p)) for p in sys.argv[1:]}
g = torch.Generator(device="cuda").manual_seed(5)
for b, s, hq, hkv, d in [(1, 32768, 16, 16, 192), (1, 32768, 32, 8, 128)]:
    q = torch.randn(b, s, hq, d, device="cuda", generator=g).to(torch.bfloat16)
    k = torch.randn(b, s, hkv, d, device="cuda", generator=g).to(torch.bfloat16)
    v = torch.randn(b, s, hkv, 128, device="cuda", generator=g).to(torch.bfloat16)
    q8, k8, v8 = q.to(torch.float8_e4m3fn), k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    for name, lib in libs.items():
        outs = []
        for i in range(8):
            _lib.lib = lambda backend="cuda", l=lib: l
            outs.append(fp.attention(q, k, v))
            for other in libs.values():
                _lib.lib = lambda backend="cuda", l=other: l
                fp.attention(q8, k8, v8)
        torch.cuda.synchronize()
        bad = [i for i, o in enumerate(outs) if not torch.equal(o.view(torch.int16), outs[0].view(torch.int16))]
        print(name, s, hq, hkv, d, "identical x8" if not bad else f"DIFFERS at {bad}", flush=True)
