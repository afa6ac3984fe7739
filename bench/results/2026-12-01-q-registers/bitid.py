"""Scratch: outputs (and lse) of variant libraries bit-identical to the first one's, default attention on fp8 inputs."""
import ctypes, sys, torch
import flashprefill as fp
from flashprefill import _lib
dtype = sys.argv[1]
libs = [_lib._declare(ctypes.CDLL(p)) for p in sys.argv[2:]]
g = torch.Generator(device="cuda").manual_seed(7)
cases = [(1, 1000, 1000, 4, 2, 128, True), (2, 777, 1500, 4, 4, 192, True), (1, 4096, 4096, 2, 1, 128, True),
         (1, 4096, 4096, 2, 2, 192, True), (3, 300, 300, 2, 2, 192, False), (1, 2500, 2500, 2, 1, 128, False),
         (2, 1153, 1153, 4, 4, 192, True), (1, 64, 640, 2, 2, 128, True), (1, 200, 200, 2, 2, 192, True)]
bad = 0
for b, sq, sk, hq, hkv, d, causal in cases:
    t = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
    q = (torch.randn(b, sq, hq, d, device="cuda", generator=g) * 0.5).to(t)
    k = (torch.randn(b, sk, hkv, d, device="cuda", generator=g) * 2).to(t)
    v = torch.randn(b, sk, hkv, 128, device="cuda", generator=g).to(t)
    outs = []
    for l in libs:
        _lib.lib = lambda backend="cuda", l=l: l
        o, lse = fp.attention(q, k, v, causal=causal, return_lse=True)
        torch.cuda.synchronize()
        outs.append((o.view(torch.int16).clone(), lse.clone()))
    for i, (o, lse) in enumerate(outs[1:], 1):
        same = torch.equal(o, outs[0][0]) and torch.equal(lse.view(torch.int32), outs[0][1].view(torch.int32))
        bad += not same
        print(f"b{b} sq{sq} sk{sk} h{hq}/{hkv} d{d} causal={causal}: lib {i} {'bit-identical' if same else 'DIFFERS'}"
              f" nan={torch.isnan(outs[i][1]).any().item()}")
print("bitid", "FAIL" if bad else "OK", bad)
