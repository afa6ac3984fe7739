"""Scratch: which (head, 128-row block) of bf16 dim-192 outputs go wrong, per library and call, against an fp32 reference."""
import ctypes, os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import flashprefill as fp
from flashprefill import _lib
from bench import make_inputs
from peers import PEERS

def reference(q, k, v):
    b, s, h, d = q.shape
    out = torch.empty(b, s, h, v.shape[-1], device="cuda", dtype=torch.float32)
    scale = d ** -0.5
    for bi in range(b):
        for hi in range(h):
            kk = k[bi, :, hi].float(); vv = v[bi, :, hi].float()
            for q0 in range(0, s, 4096):
                qq = q[bi, q0:q0 + 4096, hi].float()
                sc = (qq @ kk.T) * scale
                rows = torch.arange(q0, q0 + qq.shape[0], device="cuda")[:, None]
                sc.masked_fill_(torch.arange(s, device="cuda")[None, :] > rows, float("-inf"))
                out[bi, q0:q0 + qq.shape[0], hi] = torch.softmax(sc, -1) @ vv
    return out

libs = sys.argv[1:]
for b, s in ((1, 32768), (1, 16384), (4, 4096)):
    x = make_inputs(b, s, 16, 16, 192, 128, 1)
    ref = reference(x["q"], x["k"], x["v"])
    fa3 = PEERS["FA3 bf16"][1](x)
    r = fa3(); r = r[0] if isinstance(r, tuple) else r
    def blocks(o):
        d = (o.float() - ref).reshape(b, s // 128, 128, 16, 128)
        rr = ref.reshape(b, s // 128, 128, 16, 128)
        return (d.norm(dim=(2, 4)) / rr.norm(dim=(2, 4)))  # (b, mblock, head)
    e = blocks(r); print(b, s, "FA3 bf16 rel L2", f"{((r.float()-ref).norm()/ref.norm()).item():.3e}", "worst block", f"{e.max().item():.3e}", flush=True)
    for path in libs:
        lib = _lib._declare(ctypes.CDLL(path)); _lib.lib = lambda backend="cuda", l=lib: l
        for call in range(4):
            out = torch.full((b, s, 16, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
            if call % 2: fa3()
            fp.attention(x["q"], x["k"], x["v"], causal=True, out=out); torch.cuda.synchronize()
            e = blocks(out)
            bad = (e > 2e-2) | e.isnan()
            idx = bad.nonzero().tolist()
            print(b, s, path.split("/")[-2], call, f"rel L2 {((out.float()-ref).norm()/ref.norm()).item():.3e} nan {out.isnan().sum().item()}",
                  f"median block {e.median().item():.2e} bad blocks {len(idx)}", idx[:12], [f"{e[tuple(i)].item():.2e}" for i in idx[:6]], flush=True)
    del x, ref; torch.cuda.empty_cache()
