"""Host time of one binding call, split: the library call alone (ctypes, params built once) against the whole call."""
import ctypes, statistics, time
import torch
import flashprefill as fp
from flashprefill import _lib, prepare, api

def per_call(f, n=200):
    for _ in range(10):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        ts.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)

x = torch.randn(1, 256, 8, 128, device="cuda").to(torch.bfloat16)
signs = torch.from_numpy(prepare.rotation_signs(128)).cuda()
codes = torch.empty(x.shape, device="cuda", dtype=torch.float8_e4m3fn)
expo = torch.empty((1, 8, 1), device="cuda", dtype=torch.int8)
lib = _lib.lib("cuda")
params = api.QuantizeParams(x=x.data_ptr(), codes=codes.data_ptr(), exponents=expo.data_ptr(), batch=1, seqlen=256,
                            heads=8, dim=128, block_tokens=384, x_dtype=api._QUANTIZE_DTYPES["bfloat16"], code_max=448.0,
                            signs=signs.data_ptr())
for prefix, st in (("x", x.stride()), ("codes", codes.stride())):
    for axis, stride in zip(("batch", "seq", "head", "dim"), st):
        setattr(params, f"{prefix}_stride_{axis}", stride)
stream = torch.cuda.current_stream().cuda_stream
print(f"quantize: ctypes call alone {per_call(lambda: lib.flashprefill_quantize(ctypes.byref(params), stream)):.1f} us")
print(f"quantize: fp.quantize_fp8 with outputs given {per_call(lambda: fp.quantize_fp8(x, 384, signs=signs, codes=codes, exponents=expo)):.1f} us")
print(f"quantize: fp.quantize_fp8 {per_call(lambda: fp.quantize_fp8(x, 384, signs=signs)):.1f} us")
print(f"torch.empty x2 {per_call(lambda: (torch.empty(x.shape, device='cuda', dtype=torch.float8_e4m3fn), torch.empty((1, 8, 1), device='cuda', dtype=torch.int8))):.1f} us")
q = torch.randn(1, 256, 32, 128, device="cuda").to(torch.bfloat16)
d = fp.quantize_qkv(q, x, x)
out = torch.empty(1, 256, 32, 128, device="cuda", dtype=torch.bfloat16)
print(f"attention(**quantize_qkv defaults, out=) {per_call(lambda: fp.attention(**d, out=out)):.1f} us")
print(f"quantize_qkv {per_call(lambda: fp.quantize_qkv(q, x, x), 50):.1f} us")
print(f"prepare_v {per_call(lambda: fp.prepare_v(d['v'].data if False else codes)):.1f} us")
