"""Side-by-side speed of causal prefill attention on one GPU: flashprefill and its peers (tools/peers.py), same
inputs, one process.

Per shape: three input sets (rotated, so L2 does not flatter), warm-up, then `rounds` rounds in which every
implementation is timed in turn with CUDA events (tools/timing.py, shared with tools/bench_varlen.py), two ways:
  per call      `launches` calls, each between its own two events and waited for: what one call from Python
                costs, host work (argument handling, the launch) included;
  back to back  `launches` calls between one pair of events, not waited for in between: the GPU-bound time per
                call, as an engine that issues its work asynchronously sees it.
Fairness: before each timing the GPU idles timing.IDLE_S, and every second round takes the implementations in reverse
order. Without the pause the H200, held at its 700 W limit, starts each kernel at the clock the previous one left:
the same kernel timed first and third in a round measured 4-8% apart, the ratio to FlashAttention-3 of the one timed
first up to 8% higher than the same kernel's timed later; with it the two agreed within 0-2% and the spreads fell from
~10% to 1-4% (bench/NOTES.md). Sustained speed at the power limit is tools/power.py's.
Reported for each: the median TFLOP/s and the spread (max - min of the per-round medians, relative to the
median); and flashprefill's speed ratio to FlashAttention-3 round by round (tools/bench_report.py). FLOPs of
causal attention with seqlen_q = seqlen_k = S: batch * heads_q * S^2 * (dim_qk + dim_v).

    python tools/bench.py [--out DIR] [--records CSV] [--commit SHA] [--quick] [--shapes TEXT]
writes DIR/bench.json, DIR/bench.md and DIR/bench.png (default bench/latest/, the latest full record) and appends
one row per (shape, flashprefill variant, timing) with its ratio to FlashAttention-3 to the records file
(default bench/records.csv; tools/records.py; --records "" appends nothing).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_report import markdown  # noqa: E402
import records  # noqa: E402
import timing  # noqa: E402
from peers import PEERS  # noqa: E402

# (name, batch, seq, heads_q, heads_kv, dim_qk, dim_v)
SHAPES = [
    ("hd128 32/8 4k b4", 4, 4096, 32, 8, 128, 128),
    ("hd128 32/8 8k b2", 2, 8192, 32, 8, 128, 128),
    ("hd128 32/8 16k", 1, 16384, 32, 8, 128, 128),
    ("hd128 32/8 32k", 1, 32768, 32, 8, 128, 128),
    ("hd128 32/32 16k", 1, 16384, 32, 32, 128, 128),
    ("mla 192/128 16h 4k b4", 4, 4096, 16, 16, 192, 128),  # DeepSeek-V2-Lite prefill: 16 heads, qk 192, v 128
    ("mla 192/128 16h 16k", 1, 16384, 16, 16, 192, 128),
    ("mla 192/128 16h 32k", 1, 32768, 16, 16, 192, 128),
]
INPUT_SETS = 3


def make_inputs(batch, seq, hq, hkv, dqk, dv, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = {"q": torch.randn(batch, seq, hq, dqk, generator=g, device="cuda"),
         "k": torch.randn(batch, seq, hkv, dqk, generator=g, device="cuda"),
         "v": torch.randn(batch, seq, hkv, dv, generator=g, device="cuda")}
    for name, rep in (("q", hq // hkv), ("k", 1), ("v", 1)):
        t = x[name]
        groups = t.reshape(batch, seq, hkv, -1)  # the heads of one KV group side by side
        descale = (groups.abs().amax(dim=(1, 3)) / 448.0).clamp_min(1e-12).float().contiguous()
        scale = descale.repeat_interleave(rep, 1)[:, None, :, None]
        x[name + "8"] = (t / scale).to(torch.float8_e4m3fn)
        x[name + "d"] = descale
        x[name] = t.to(torch.bfloat16)
    return x


def bench_shape(shape, rounds, launches):
    name, batch, seq, hq, hkv, dqk, dv = shape
    flops = batch * hq * seq * seq * (dqk + dv)
    sets = [make_inputs(batch, seq, hq, hkv, dqk, dv, seed) for seed in range(INPUT_SETS)]
    runs, unavailable = timing.prepare({peer: setup for peer, (_, setup) in PEERS.items()}, sets, torch.cuda)
    rows = {peer: {"dtype": PEERS[peer][0], "unavailable": reason} for peer, reason in unavailable.items()}
    timed = timing.time_rounds(runs, rounds, launches, dict.fromkeys(runs, flops), torch.cuda)
    rows.update({peer: {"dtype": PEERS[peer][0], **t} for peer, t in timed.items()})
    del sets, runs
    torch.cuda.empty_cache()
    return {"shape": name, "batch": batch, "seq": seq, "heads_q": hq, "heads_kv": hkv, "dim_qk": dqk,
            "dim_v": dv, "flops": flops, "results": rows}


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    peers = list(PEERS)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(peers)
    for i, peer in enumerate(peers):
        values = [s["results"].get(peer, {}).get("tflops", 0) for s in results]
        ax.bar([j + i * width for j in range(len(results))], values, width, label=peer)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(results))], [s["shape"] for s in results])
    ax.set_ylabel("TFLOP/s (causal)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=records.LATEST)
    ap.add_argument("--records", default=records.RECORDS, help="the records file to append to; empty: none")
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="only the 16k shapes")
    ap.add_argument("--shapes", default=None, help="only the shapes whose name contains this text, e.g. 4k")
    args = ap.parse_args()
    shapes = [s for s in SHAPES if "16k" in s[0]] if args.quick else SHAPES
    shapes = [s for s in shapes if args.shapes is None or args.shapes in s[0]]
    device = torch.cuda.get_device_name()
    results = [bench_shape(s, args.rounds, args.launches) for s in shapes]
    os.makedirs(args.out, exist_ok=True)
    run = (records.today(), args.commit or records.git_commit(), device, "bench")
    record = {"date": run[0], "commit": run[1], "device": device, "torch": torch.__version__, "peers": list(PEERS),
              "shapes": results}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump(record, f, indent=1)
    if args.records:
        records.append(records.bench_rows(record, run), args.records)
    table = markdown(results, device, list(PEERS))
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(table)
    plot(results, os.path.join(args.out, "bench.png"))
    print(table)


if __name__ == "__main__":
    main()
