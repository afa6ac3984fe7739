"""Scratch: per (batch, 128-row block, head), where a library's output differs from the production build's."""
import ctypes, os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import flashprefill as fp
from flashprefill import _lib
from bench import make_inputs
base_path, libs = sys.argv[1], sys.argv[2:]
def use(path):
    lib = _lib._declare(ctypes.CDLL(path)); _lib.lib = lambda backend="cuda", l=lib: l
cases = [("bf16", 1, 32768, 16, 16, 192), ("bf16", 4, 4096, 16, 16, 192), ("bf16", 1, 16384, 32, 8, 128), ("bf16", 4, 4096, 32, 8, 128),
         ("fp8", 1, 32768, 16, 16, 192), ("fp8", 4, 4096, 16, 16, 192)]
cases = cases[:int(os.environ.get("CASES", len(cases)))]
for dt, b, s, hq, hkv, d in cases:
    x = make_inputs(b, s, hq, hkv, d, 128, 1)
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    fa3 = lambda: big @ big
    args = (x["q"], x["k"], x["v"]) if dt == "bf16" else (x["q8"], x["k8"], x["v8"])
    kw = {} if dt == "bf16" else dict(q_descale=x["qd"], k_descale=x["kd"], v_descale=x["vd"])
    def run(path, poison):
        use(path)
        out = torch.full((b, s, hq, 128), float(poison), device="cuda", dtype=torch.bfloat16)
        fp.attention(*args, causal=True, out=out, **kw); torch.cuda.synchronize()
        return out
    ref = run(base_path, "nan"); ref2 = run(base_path, 7.0)
    print(dt, b, s, hq, hkv, d, "base twice equal:", torch.equal(ref, ref2), flush=True)
    rr = ref.float().reshape(b, s // 128, 128, hq, 128)
    for path in libs:
        for call in range(int(os.environ.get('CALLS', 4))):
            if call % 2: fa3()
            out = run(path, "nan" if call % 2 else -3.0)
            dd = (out.float().reshape(b, s // 128, 128, hq, 128) - rr)
            e = dd.norm(dim=(2, 4)) / rr.norm(dim=(2, 4))
            diff = (out.view(torch.int16) != ref.view(torch.int16)).reshape(b, s // 128, 128, hq, 128)
            rows = diff.any(dim=4)  # (b, mb, row, head)
            bad = rows.any(dim=2).nonzero().tolist()
            detail = []
            for bb, mb, hh in bad[:4]:
                r = rows[bb, mb, :, hh].nonzero().flatten().tolist()
                detail.append(f"(b{bb} mb{mb} h{hh}: {len(r)} rows {r[0]}-{r[-1]}, rel {e[bb, mb, hh].item():.1e})")
            print(f"  {path.split('/')[-2]} call {call}: nan {out.isnan().sum().item()} blocks differing {len(bad)}", " ".join(detail), flush=True)
    del x; torch.cuda.empty_cache()
