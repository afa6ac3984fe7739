"""Quantizer launches for ncu / compute-sanitizer: small (several shapes, dtypes, smoothing) or big (16k / mla 4k b4 q)."""
import sys
import torch
import flashprefill as fp
from flashprefill import prepare

if sys.argv[1] == "small":
    for dim in (128, 192, 64):
        for dtype in (torch.bfloat16, torch.float32):
            for block in (384, 64):
                x = torch.randn(2, 1000, 3, dim, device="cuda").to(dtype)
                signs = torch.from_numpy(prepare.rotation_signs(dim)).cuda()
                mean = x.float().mean(dim=1).contiguous()
                fp.quantize_fp8(x, block, signs=signs, subtract=mean)
                fp.quantize_fp8(x, block)
else:
    for (b, s, h, d) in ((1, 16384, 32, 128), (4, 4096, 16, 192)):
        x = torch.randn(b, s, h, d, device="cuda").to(torch.bfloat16)
        signs = torch.from_numpy(prepare.rotation_signs(d)).cuda()
        fp.quantize_fp8(x, 384, signs=signs)
torch.cuda.synchronize()
print("done")
