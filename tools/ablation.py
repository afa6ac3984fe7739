"""The FP8 ideas one at a time: each switched off against the full kernel, speed and error
side by side in one process with FlashAttention-3 fp8.

    python tools/ablation.py [--out DIR] [--rounds 6]      (or python tools/bench.py --ablation)

Variants (fp8, hd128 causal):
  full            the library: exp-free probabilities, ping-pong, FA3-style per-(batch, kv head) factors
  exp-free off    build/ablation/expfree: probabilities by MUFU ex2 + cvt to e4m3  (`make ablation`)
  MUFU 1/4, 2/4   build/ablation/split1, split2: that share of each tile's probabilities by MUFU, the rest
                  exp-free (both pipes at once)
  ping-pong off   build/ablation/pingpong: the two consumer warpgroups issue without taking turns
  block scales    per-block power-of-two scales, inputs quantized beforehand: blocks of 128 tokens (the kernel
                  with 128-key tiles) and of 384 (the one with 192-key tiles, as the full row)
  + rotation      q and k rotated and quantized per block by the GPU quantizer inside every timed call
  float16 scores  scores="fp16" where q's codes allow: with factors (q's codes within +-1.125), and with 384-token
                  blocks (the quantizer's code_max), plain and rotated
  float16 P       not an idea switched off but the accuracy option (probabilities="fp16"): P as float16, V
                  widened, P.V at the 16-bit rate
Speed: 32/8 heads at 16k tokens (median TFLOP/s, spread of round medians). Error: end to end from float32
inputs against float64 attention, 4096 tokens, 8/2 heads, N(0,1) and outlier-channel inputs (accuracy.py).
Writes DIR/ablation.json and DIR/ablation.md (default bench/latest/) and appends each variant's ratio to FA3 fp8 to
the records file (default bench/records.csv; --records "" appends nothing).
"""
import argparse
import functools
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy  # noqa: E402
import bench  # noqa: E402
import flashprefill as fp  # noqa: E402
from flashprefill import _lib  # noqa: E402
import peers  # noqa: E402
import records  # noqa: E402
from peers import PEERS  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = ("hd128 32/8 16k", 1, 16384, 32, 8, 128, 128)


def use_library(path):
    """Point flashprefill at the library at `path` (None: the default build) for the calls that follow."""
    if path is None:
        os.environ.pop("FLASHPREFILL_LIBRARY", None)
    else:
        os.environ["FLASHPREFILL_LIBRARY"] = path
    _lib.lib.cache_clear()


def variants():
    """(name, library path or None, setup(inputs) -> run(), prepare) of each row; prepare: the fp.quantize_qkv
    options its error is measured with, or the peer whose FA3-style inputs it takes."""
    ablated = lambda name: os.path.join(ROOT, "build", "ablation", name, "libflashprefill.so")
    ours, fp16_p = "flashprefill fp8", "flashprefill fp8, fp16 P"
    rows = [("full", None, PEERS[ours][1], ours),
            ("exp-free off", ablated("expfree"), PEERS[ours][1], ours),
            ("MUFU for 1/4 of P", ablated("split1"), PEERS[ours][1], ours),
            ("MUFU for 2/4 of P", ablated("split2"), PEERS[ours][1], ours),
            ("ping-pong off", ablated("pingpong"), PEERS[ours][1], ours)]
    for block in (128, 384):
        rows += [(f"block scales {block}", None, functools.partial(peers.ours_fp8_blocks, block=block),
                  dict(per_block=block, rotate=False)),
                 (f"block scales {block} + rotation, quantizer timed", None,
                  functools.partial(peers.ours_fp8_quantized, block=block), dict(per_block=block))]
    rows += [("float16 scores (scores=\"fp16\")", None,
              PEERS["flashprefill fp8, fp16 scores"][1], dict(per_block=None, scores="fp16", rotate=False)),
             ("block scales 384, float16 scores", None,
              functools.partial(peers.ours_fp8_blocks, block=384, scores="fp16"),
              dict(per_block=384, rotate=False, scores="fp16")),
             ("block scales 384 + rotation, float16 scores, quantizer timed", None,
              functools.partial(peers.ours_fp8_quantized, block=384, scores="fp16"), dict(per_block=384, scores="fp16"))]
    return rows + [("float16 P (probabilities=\"fp16\")", None, PEERS[fp16_p][1], fp16_p),
                   ("FA3 fp8", None, PEERS["FA3 fp8"][1], "FA3 fp8")]


def speed(rounds, launches):
    _, batch, seq, hq, hkv, dqk, dv = SHAPE
    flops = batch * hq * seq * seq * (dqk + dv)
    x = bench.make_inputs(batch, seq, hq, hkv, dqk, dv, seed=0)
    runs = {}
    for name, path, setup, _ in variants():
        use_library(path)
        runs[name] = (path, setup(x))
        runs[name][1]()
    torch.cuda.synchronize()
    per_round = {name: [] for name in runs}
    order = list(runs)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:  # as bench.py: reversed every second round, idle first
            path, run = runs[name]
            use_library(path)
            bench.settle()
            per_round[name].append(statistics.median(bench.time_launches(run, launches)))
    use_library(None)
    return {name: {"tflops": flops / statistics.median(ms) / 1e9, "spread": (max(ms) - min(ms)) / statistics.median(ms),
                   "round_medians_ms": ms} for name, ms in per_round.items()}


def error(path, prepare, dist):
    """End-to-end relative L2 of one variant (its library path and prepare, as in variants()) on accuracy.py's
    inputs."""
    q, k, v = accuracy.make(dist, 4096, seed=7)
    exact = accuracy.reference(q, k, v)
    use_library(path)
    try:
        if isinstance(prepare, dict):
            out = fp.attention(**fp.quantize_qkv(q, k, v, **{"scores": "fp32", **prepare}), causal=True)
        else:
            (q8, qd, _), (k8, kd, _), (v8, vd, _) = (accuracy.quantize(t) for t in (q, k, v))
            x = {"q8": q8, "k8": k8, "v8": v8, "qd": qd, "kd": kd, "vd": vd, "q": q, "k": k, "v": v}
            out = PEERS[prepare][1](x)()
            out = out[0] if isinstance(out, tuple) else out
    finally:
        use_library(None)
    return accuracy.rel_l2(out, exact)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=records.LATEST)
    ap.add_argument("--records", default=records.RECORDS, help="the records file to append to; empty: none")
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--launches", type=int, default=10)
    args = ap.parse_args(argv)
    missing = [path for _, path, _, _ in variants() if path is not None and not os.path.isfile(path)]
    if missing:
        sys.exit(f"ablation builds missing ({', '.join(missing)}): run `make ablation` first")
    rows = speed(args.rounds, args.launches)
    for name, path, _, prepare in variants():
        for dist in ("normal", "outlier"):
            rows[name][f"error_{dist}"] = error(path, prepare, dist)
    fa3 = rows["FA3 fp8"]["tflops"]
    lines = [f"FP8 ablation, {SHAPE[0]} causal, {torch.cuda.get_device_name()}: TFLOP/s (median ± spread of round "
             "medians), ratio to FA3 fp8 in the same run; relative L2 end to end at 4096 tokens", "",
             "| variant | TFLOP/s | / FA3 | error N(0,1) | error outliers |", "|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['tflops']:.0f} ±{100 * r['spread']:.0f}% | {r['tflops'] / fa3:.2f} | "
                     f"{r['error_normal']:.2e} | {r['error_outlier']:.2e} |")
    os.makedirs(args.out, exist_ok=True)
    run = (records.today(), args.commit or records.git_commit(), torch.cuda.get_device_name(), "ablation")
    record = {"date": run[0], "commit": run[1], "device": run[2], "shape": SHAPE, "rows": rows}
    with open(os.path.join(args.out, "ablation.json"), "w") as f:
        json.dump(record, f, indent=1)
    if args.records:
        records.append(records.ablation_rows(record, run), args.records)
    with open(os.path.join(args.out, "ablation.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
