"""Scratch: ours bf16 (and fp8 default) at mla 4k x 4 and mla 32k, 40 times, each output checked right after its
call (sync) and again after other kernels ran (FA3 bf16 / fp8 and ours fp8), against the first output."""
import ctypes, os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools"))
import flashprefill as fp
from flashprefill import _lib
from bench import make_inputs
from peers import PEERS
for path in sys.argv[1:]:
    lib = _lib._declare(ctypes.CDLL(path)); _lib.lib = lambda backend="cuda", l=lib: l
    for b, s in ((4, 4096), (1, 32768)):
        x = make_inputs(b, s, 16, 16, 192, 128, 1)
        fa3b = PEERS["FA3 bf16"][1](x); fa3f = PEERS["FA3 fp8"][1](x)
        ours8 = PEERS["flashprefill fp8, fp16 scores"][1](x)
        for dt, kw, q, k, v in (("bf16", {}, x["q"], x["k"], x["v"]),
                                ("fp8", dict(q_descale=x["qd"], k_descale=x["kd"], v_descale=x["vd"]), x["q8"], x["k8"], x["v8"])):
            ref = fp.attention(q, k, v, **kw); torch.cuda.synchronize()
            now = later = 0
            for i in range(40):
                fa3b()
                out = fp.attention(q, k, v, **kw); torch.cuda.synchronize()
                now += not torch.equal(out.view(torch.int16), ref.view(torch.int16))
                fa3f(); ours8(); fa3b(); torch.cuda.synchronize()
                later += not torch.equal(out.view(torch.int16), ref.view(torch.int16))
            print(path.split("/")[-2], b, s, dt, f"mismatches right after: {now}/40, after other kernels: {later}/40", flush=True)
