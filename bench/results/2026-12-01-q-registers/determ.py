"""Scratch: the same call three times on the same inputs, outputs compared bit for bit (bf16)."""
import ctypes, sys, torch
import flashprefill as fp
from flashprefill import _lib
lib = _lib._declare(ctypes.CDLL(sys.argv[1])); _lib.lib = lambda backend="cuda": lib
g = torch.Generator(device="cuda").manual_seed(3)
for b, s, hq, hkv, d in [(1, 32768, 32, 8, 128), (1, 32768, 16, 16, 192), (4, 4096, 16, 16, 192), (1, 16384, 32, 8, 128)]:
    q = torch.randn(b, s, hq, d, device="cuda", generator=g).to(torch.bfloat16)
    k = torch.randn(b, s, hkv, d, device="cuda", generator=g).to(torch.bfloat16)
    v = torch.randn(b, s, hkv, 128, device="cuda", generator=g).to(torch.bfloat16)
    outs = [fp.attention(q, k, v).view(torch.int16).clone() for _ in range(3)]
    torch.cuda.synchronize()
    same = [torch.equal(outs[0], o) for o in outs[1:]]
    print(sys.argv[1].split("/")[-2], b, s, hq, hkv, d, "identical" if all(same) else f"DIFFERS {same}", flush=True)
