"""The H200's ceilings for our attention kernels, measured in the same process and the same rounds as the attention:
  our own wgmma loop (cuda/ceiling/, tools/wgmma_loop.py): the forward kernels' tiles, warp roles, TMA loads and wgmma
      with P = round(S) in place of the softmax, credited with attention's FLOPs;
  GEMMs through torch: fp8 e4m3 torch._scaled_mm (tensor-wise and row-wise scales, bf16 out; fast accumulation, as
      the wgmma loop accumulates, and cuBLASLt's default at 8192³) and bf16 torch.matmul, square and attention-shaped
      (S = Q K^T: seq x seq x 128; O = P V: seq x 128 x seq); the best of each dtype is its GEMM ceiling;
and on hd128 32/8 16k, causal and not: our fp8 (float32 scores; float16 scores with v prepared) and bf16 attention and
FlashAttention-3 where installed, each as a fraction of its dtype's loop and best GEMM (tools/ceiling_report.py).
Everything is timed in interleaved rounds by tools/timing.py (CUDA events, warm-up, an idle pause before each timing,
the order reversed every second round; median and spread, per call and back to back), on two input sets taken in turn.

    python tools/ceiling.py [--out DIR] [--records CSV] [--commit SHA] [--rounds N] [--launches N]
needs `make all ceiling`; writes DIR/ceiling.json and DIR/ceiling.md (default bench/latest/) and appends each pair's
ratio, per call and back to back, to the records file (default bench/records.csv; --records "" appends nothing).
About a minute and a half on an H200.
"""
import argparse
import functools
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ceiling_report  # noqa: E402
import records  # noqa: E402
import timing  # noqa: E402
import wgmma_loop  # noqa: E402
from bench import make_inputs  # noqa: E402
from peers import _fa3  # noqa: E402

import flashprefill as fp  # noqa: E402

# (name, batch, seq, heads_q, heads_kv): tools/bench.py's shape of the same name, dims 128
SHAPE = ("hd128 32/8 16k", 1, 16384, 32, 8)
INPUT_SETS = (0, 1)
SEQ = SHAPE[2]
# (label, M, N, K)
GEMM_SHAPES = (("", 8192, 8192, 8192), ("", 16384, 16384, 16384), (" S-shaped", SEQ, SEQ, 128),
               (" PV-shaped", SEQ, 128, SEQ))


@functools.cache
def inputs(seed):
    """tools/bench.py's inputs of SHAPE (bf16 q, k, v; fp8 q8, k8, v8 with descales) and v8 prepared."""
    _, batch, seq, hq, hkv = SHAPE
    x = make_inputs(batch, seq, hq, hkv, 128, 128, seed)
    x["v8_prepared"] = fp.prepare_v(x["v8"])
    return x


@functools.cache
def out_buffer(seed):
    return torch.empty(inputs(seed)["q"].shape, device="cuda", dtype=torch.bfloat16)


def loop_setup(kernel, causal):
    dtype = wgmma_loop.KERNELS[kernel][0]
    _, batch, seq, hq, hkv = SHAPE

    def setup(seed):
        x = inputs(seed)
        q, k, v = (x["q8"], x["k8"], x["v8_prepared"].data) if dtype == "fp8" else (x["q"], x["k"], x["v"])
        out, stream = out_buffer(seed), torch.cuda.current_stream().cuda_stream
        return lambda: wgmma_loop.run(kernel, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), 0, batch, seq,
                                      hq, hkv, causal, stream)
    return setup


def attention_setups(causal):
    """{label: (dtype, setup)}: tools/peers.py's variants of the same names, causal or not."""
    def ours(dtype, **kw):
        def setup(seed):
            x, out = inputs(seed), out_buffer(seed)
            if dtype == "bf16":
                return lambda: fp.attention(x["q"], x["k"], x["v"], causal=causal, out=out)
            v = x["v8_prepared"] if kw.get("scores") == "fp16" else x["v8"]
            return lambda: fp.attention(x["q8"], x["k8"], v, causal=causal, out=out, q_descale=x["qd"],
                                        k_descale=x["kd"], v_descale=x["vd"], **kw)
        return setup

    def fa3(dtype):
        def setup(seed):
            f, x = _fa3(), inputs(seed)
            if dtype == "bf16":
                return lambda: f(x["q"], x["k"], x["v"], causal=causal)
            return lambda: f(x["q8"], x["k8"], x["v8"], causal=causal, q_descale=x["qd"], k_descale=x["kd"],
                             v_descale=x["vd"])
        return setup
    return {"flashprefill fp8": ("fp8", ours("fp8", scores="fp32")),
            "flashprefill fp8, fp16 scores, V prepared": ("fp8", ours("fp8", scores="fp16")),
            "FA3 fp8": ("fp8", fa3("fp8")),
            "flashprefill bf16": ("bf16", ours("bf16")),
            "FA3 bf16": ("bf16", fa3("bf16"))}


def refusable(make):
    """make(seed) -> run as a setup that reports torch's refusal of the first call (a scaling, accumulation or shape
    this torch does not take) as unavailable instead of ending the run."""
    def setup(seed):
        run = make(seed)
        try:
            run()
        except RuntimeError as e:
            raise timing.PeerUnavailable(f"torch refused it: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return run
    return setup


def gemm_setups():
    """{name: (dtype, flops, setup)}: fp8 with unit scales (tensor-wise: scalars; row-wise: per row of A and column of
    B), B column-major as _scaled_mm requires; bf16 A row-major times B column-major."""
    def fp8(m, n, k, rowwise, fast):
        @refusable
        def setup(seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            a = torch.randn(m, k, generator=g, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, k, generator=g, device="cuda").to(torch.float8_e4m3fn).t()
            sa, sb = ((torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda")) if rowwise else
                      (torch.ones((), device="cuda"), torch.ones((), device="cuda")))
            return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)
        return setup

    def bf16(m, n, k):
        @refusable
        def setup(seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            a = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
            b = torch.randn(n, k, generator=g, device="cuda").to(torch.bfloat16).t()
            return lambda: torch.matmul(a, b)
        return setup
    setups = {}
    for label, m, n, k in GEMM_SHAPES:
        size, flops = f"{m}x{n}x{k}{label}", 2 * m * n * k
        setups[f"torch._scaled_mm fp8 tensor-wise fast-accum {size}"] = ("fp8", flops, fp8(m, n, k, False, True))
        setups[f"torch._scaled_mm fp8 row-wise fast-accum {size}"] = ("fp8", flops, fp8(m, n, k, True, True))
        if not label and m == 8192:  # the GEMM bench/NOTES.md quoted: cuBLASLt's default accumulation
            setups[f"torch._scaled_mm fp8 tensor-wise {size}"] = ("fp8", flops, fp8(m, n, k, False, False))
        setups[f"torch.matmul bf16 {size}"] = ("bf16", flops, bf16(m, n, k))
    return setups


def kernel_names(run):
    """The CUDA kernels one call of run() launches (torch.profiler), or None where the profiler cannot say."""
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    except Exception:  # the profiler's failures have no common type; the names are only a label
        return None


def measure(rounds, launches):
    """The record (ceiling_report.py's layout) of one run."""
    _, batch, seq, hq, hkv = SHAPE
    entries = {}  # timed name: (group index or None for a GEMM, label, kind, dtype, flops, setup)
    for index, causal in enumerate((True, False)):
        flops = wgmma_loop.flops(batch, seq, hq, causal)
        for kernel, (dtype, _) in wgmma_loop.KERNELS.items():
            label = ceiling_report.loop_name(kernel)
            entries[f"{label}, {ceiling_report.causality(causal)}"] = (index, label, "loop", dtype, flops,
                                                                       loop_setup(kernel, causal))
        for label, (dtype, setup) in attention_setups(causal).items():
            entries[f"{label}, {ceiling_report.causality(causal)}"] = (index, label, "attention", dtype, flops, setup)
    for name, (dtype, flops, setup) in gemm_setups().items():
        entries[name] = (None, name, "gemm", dtype, flops, setup)

    runs, unavailable = timing.prepare({name: e[-1] for name, e in entries.items()}, INPUT_SETS, torch.cuda)
    timed = timing.time_rounds(runs, rounds, launches, {name: entries[name][4] for name in runs}, torch.cuda)
    groups = [{"shape": ceiling_report.group_shape(SHAPE[0], causal), "causal": causal, "results": {}}
              for causal in (True, False)]
    gemms = {}
    for name, (index, label, kind, dtype, flops, _) in entries.items():
        result = {"kind": kind, "dtype": dtype, "flops": flops,
                  **(timed[name] if name in timed else {"unavailable": unavailable[name]})}
        if kind == "gemm" and name in runs:
            result["kernels"] = kernel_names(runs[name][0])
        (gemms if index is None else groups[index]["results"])[label] = result
    best = ceiling_report.best_gemms(gemms)
    for group in groups:
        group["results"].update(gemms)
        group["pairs"] = ceiling_report.pairs(group["results"], best)
    return {"gemms": gemms, "best_gemm": best, "groups": groups}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=records.LATEST)
    ap.add_argument("--records", default=records.RECORDS, help="the records file to append to; empty: none")
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--launches", type=int, default=10)
    args = ap.parse_args()
    wgmma_loop.library()  # refuses at once where `make ceiling` has not run
    device = torch.cuda.get_device_name()
    run = (records.today(), args.commit or records.git_commit(), device, "ceiling")
    record = {"date": run[0], "commit": run[1], "device": device, "torch": torch.__version__,
              **measure(args.rounds, args.launches)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ceiling.json"), "w") as f:
        json.dump(record, f, indent=1)
    if args.records:
        records.append(records.varlen_rows(record, run), args.records)
    table = ceiling_report.markdown(record)
    with open(os.path.join(args.out, "ceiling.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
