"""Host cost of each piece of fp.attention's binding path (torch tensors), each timed alone over many calls."""
import contextlib, ctypes, statistics, time
import torch
import flashprefill as fp
from flashprefill import _arrays, _lib, api
from flashprefill.scales import descale

def us(f, n=2000):
    for _ in range(50):
        f()
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        best.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(best)

q = torch.randn(1, 1024, 32, 128, device="cuda").to(torch.bfloat16)
k = torch.randn(1, 1024, 8, 128, device="cuda").to(torch.bfloat16)
d = fp.quantize_qkv(q, k, k)
out = torch.empty(1, 1024, 32, 128, device="cuda", dtype=torch.bfloat16)
stream = _arrays.torch_current_stream(0)
keep = []


def ondev():
    c = _arrays.on_device(q, 0)
    c.__enter__()
    c.__exit__(None, None, None)


parts = {
    "attention(**d, out=out) whole": lambda: fp.attention(**d, out=out),
    "attention bf16 whole": lambda: fp.attention(q, k, k, out=out),
    "backend_of": lambda: _arrays.backend_of(q, "q"),
    "_lib.lib": lambda: _lib.lib("cuda"),
    "device_of": lambda: _arrays.device_of(q, "q"),
    "resolve_stream": lambda: _arrays.resolve_stream(None, q, 0),
    "on_device enter/exit": lambda: ondev(),
    "adapt (torch direct)": lambda: _arrays.adapt(q, "q", stream),
    "adapt_v PreparedV": lambda: api._adapt_v(d["v"], stream, []),
    "descale BlockScales": lambda: descale(d["q_descale"], "q_descale", batch=1, heads=32, heads_kv=8, seqlen=1024, stream=stream, keep=[]),
    "torch.empty out": lambda: torch.empty(1, 1024, 32, 128, device="cuda", dtype=torch.bfloat16),
    "_arrays.empty out": lambda: _arrays.empty((1, 1024, 32, 128), "bfloat16", q, stream),
}
for name, f in parts.items():
    print(f"{name:34s} {us(f, 500 if 'whole' in name else 2000):7.2f} us", flush=True)
# the params struct and the library call alone
with api._library_call(q, "q", None) as (library, device, handle, keep):
    qt, kt = (api._adapt(x, n, handle, keep) for x, n in ((d["q"], "q"), (d["k"], "k")))
    vt, layout = api._adapt_v(d["v"], handle, keep)
    problem = api._problem(qt, kt, vt)
    ot = api._adapt(out, "out", handle, keep, writable=True)
    ds = api._descales(problem, d["q_descale"], d["k_descale"], d["v_descale"], handle, keep)
    mk = lambda: api._params(qt, kt, vt, (ot.ptr, ot.strides), None, problem, True, None, ds, "default", "fp16", layout)
    print(f"{'_params':34s} {us(mk):7.2f} us")
    print(f"{'_problem':34s} {us(lambda: api._problem(qt, kt, vt)):7.2f} us")
    print(f"{'_descales (3)':34s} {us(lambda: api._descales(problem, d['q_descale'], d['k_descale'], d['v_descale'], handle, [])):7.2f} us")
    p = mk()
    print(f"{'flashprefill_forward (C) alone':34s} {us(lambda: library.flashprefill_forward(ctypes.byref(p), handle), 500):7.2f} us")
    print(f"{'flashprefill_supports (C) alone':34s} {us(lambda: library.flashprefill_supports(ctypes.byref(p))):7.2f} us")
torch.cuda.synchronize()
