"""The wgmma-loop ceiling (cuda/ceiling/, tools/wgmma_loop.py) computes the GEMMs it times: out = the sum over the KV
tiles each query tile visits of round(Q K^T) V, and for fp8 the row sums of round(Q K^T), against float64 of the same
rounded P (CuPy arrays, gpu_arrays.py). A benchmark kernel that computes garbage proves nothing.

Bounds on relative L2: out is bf16, so the error of the float64 reference rounded to bf16 (~1e-3), plus the
accumulation's: bf16, S and O in float32 (~1e-6 here): 1e-4; fp8, the fp8 wgmma keeps ~14 bits while it accumulates
(DeepSeek-V3 measured up to 2% at K = 4096), over at most 512 keys here: 1e-2 (fp8's float32 row sums: the same). A
wrong KV tile, key order or causal limit costs 0.3 or more. Outputs are poisoned with NaN first: every element must be
written (bf16 kernels leave row_sums alone: it must stay NaN).
"""
import pathlib
import sys

import numpy as np
import pytest

import gpu_arrays as ga
import markers
from flashprefill import prepared_v
from flashprefill.reference import error_report, relative_l2

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import wgmma_loop  # noqa: E402

cp = pytest.importorskip("cupy", reason=markers.NO_CUPY)
pytestmark = pytest.mark.gpu

# (batch, seqlen, heads_q, heads_kv)
SHAPES = {
    "seqlen 1": (1, 1, 1, 1),
    "keys past the last tile, GQA 2": (1, 300, 4, 2),
    "several items per CTA, GQA 4": (3, 512, 16, 4),  # 192 items: a second round on every CTA of an H200's 132
}
ACCUMULATION = {"bf16": 1e-4, "fp8": 1e-2}


def _inputs(rng, dtype, batch, seqlen, heads_q, heads_kv):
    """(host q, k, v as the kernel's dtype, device q, k, v): N(0, 1) rounded; fp8 v in the prepared layout."""
    to = ga.to_e4m3 if dtype == "fp8" else ga.to_bf16
    q, k, v = (to(rng.standard_normal((batch, seqlen, heads, wgmma_loop.DIM)).astype(np.float32))
               for heads in (heads_q, heads_kv, heads_kv))
    v_device = ga.to_device(prepared_v.prepare_v_model(ga.bits(v)).view(ga.E4M3)) if dtype == "fp8" else \
        ga.to_device(v)
    return (q, k, v), (ga.to_device(q), ga.to_device(k), v_device)


def _reference(kernel, q, k, v, causal):
    """(out, row sums) in float64: P = round(Q K^T) to the kernel's dtype over the keys each query tile visits."""
    dtype = wgmma_loop.KERNELS[kernel][0]
    batch, seqlen, heads_q, _ = q.shape
    group = heads_q // k.shape[2]
    limits = np.repeat(wgmma_loop.visited_keys(kernel, seqlen, causal), wgmma_loop.BLOCK_M)[:seqlen]
    visible = np.arange(seqlen)[None, :] < limits[:, None]
    qf, kf, vf = (ga.to_f64(x).transpose(0, 2, 1, 3) for x in (q, k, v))  # (batch, heads, seqlen, dim)
    kf, vf = (np.repeat(x, group, axis=1) for x in (kf, vf))
    s = qf @ kf.transpose(0, 1, 3, 2)
    p = ga.to_f64(ga.to_e4m3(s) if dtype == "fp8" else ga.to_bf16(s)) * visible
    return (p @ vf).transpose(0, 2, 1, 3), p.sum(axis=-1)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("causal", [False, True], ids=["non-causal", "causal"])
@pytest.mark.parametrize("kernel", wgmma_loop.KERNELS)
def test_wgmma_loop_computes_its_gemms(kernel, causal, shape, rng):
    dtype = wgmma_loop.KERNELS[kernel][0]
    batch, seqlen, heads_q, heads_kv = shape
    host, (q, k, v) = _inputs(rng, dtype, *shape)
    out = ga.poisoned_bf16((batch, seqlen, heads_q, wgmma_loop.DIM))
    row_sums = ga.full((batch, heads_q, seqlen), np.nan, np.float32)
    wgmma_loop.run(kernel, q.data.ptr, k.data.ptr, v.data.ptr, out.data.ptr, row_sums.data.ptr, batch, seqlen,
                   heads_q, heads_kv, causal)
    ga.synchronize()
    ref_out, ref_sums = _reference(kernel, *host, causal)
    out, row_sums = ga.host_f64(out), ga.to_host(row_sums)
    bound = relative_l2(ga.to_f64(ga.to_bf16(ref_out)), ref_out) + ACCUMULATION[dtype]
    assert relative_l2(out, ref_out) <= bound, f"out (bound {bound:.2e}): {error_report(out, ref_out)}"
    if dtype == "fp8":
        assert relative_l2(row_sums, ref_sums) <= ACCUMULATION[dtype], \
            f"row sums: {error_report(row_sums, ref_sums)}"
    else:
        assert np.isnan(row_sums).all(), "a bf16 kernel wrote row_sums, which it leaves alone"


def test_unknown_kernel_is_refused():
    with pytest.raises(wgmma_loop.CeilingError, match="no wgmma loop kernel named"):
        wgmma_loop.run("fp8_kv64", 0, 0, 0, 0, 0, 1, 128, 1, 1, False)
