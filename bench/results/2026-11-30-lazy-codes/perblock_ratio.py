"""err / floor of tests/test_kernel_gpu.py::test_fp8 on per_block384 shapes, several seeds, for the library in
FLASHPREFILL_LIBRARY (one line per case: the ratios)."""
import sys, os, torch
sys.path.insert(0, "tests")
import test_kernel_gpu as t
import flashprefill as fp
from flashprefill import reference
res = {}
for shape in [(1, 300, 1000, 4, 1), (2, 1000, 1000, 8, 1)]:
    for dims in t.DIMS:
        for causal in (True, False):
            ratios = []
            for seed in range(1, 9):
                (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = t._fp8_problem(shape, dims, "per_block384", seed)
                ref = reference.attention_reference(*(x.cpu().numpy() for x in (qx, kx, vx)), causal=causal)
                out = t._poisoned(shape[0], shape[1], shape[3], dims[1])
                fp.attention(q8, k8, v8, causal=causal, q_descale=qd, k_descale=kd, v_descale=vd, out=out)
                torch.cuda.synchronize()
                floor = t._rel_l2(t._p_rounding_floor(qx, kx, vx, causal).to(torch.bfloat16), ref)
                ratios.append(t._rel_l2(out, ref) / floor)
            key = f"{shape} {dims} causal={causal}"
            res[key] = ratios
            print(os.environ.get("TAG", ""), key, "mean %.3f max %.3f" % (sum(ratios) / len(ratios), max(ratios)))
