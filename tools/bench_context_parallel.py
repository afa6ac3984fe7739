"""Context parallelism over the GPUs of one host, timed: `torchrun --nproc-per-node N tools/bench_context_parallel.py`.

One causal prompt of --seqlen tokens (default 131072), hd128 32/8 or DeepSeek 192/128 16/16 heads, bf16 or fp8 (e4m3
codes, one factor per tensor), generated on every rank from one seed; each rank holds its zig-zag shard. Per round,
in an order that alternates: the whole prompt as one attention_varlen call on GPU 0 (the other ranks wait); the
context-parallel forward on every rank (context_parallel_torch.forward); the ring's passes alone, the same shards with
no attention. A timing is the slowest rank's (all_reduce max of each rank's wall time, synchronized at both ends).
Rank 0 prints the speedup over one GPU (its time / the ring's, round by round), the efficiency (speedup / N) and the
passes' time beside the ring's (how much of it the attention hides), writes --out as JSON and appends records rows.
--dry-run: the same on the host (gloo, float64, the reference attention and merge, a short prompt), to check the tool
without GPUs; it writes no records unless --records names a file.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402
import flashprefill as fp  # noqa: E402
from flashprefill import context_parallel as cp  # noqa: E402
from flashprefill import context_parallel_torch as cpt  # noqa: E402

SHAPES = {"hd128": (32, 8, 128, 128), "mla": (16, 16, 192, 128)}  # heads_q, heads_kv, dim_qk, dim_v


def prompt(args, device):
    """q, k, v of the whole prompt on this rank's device, and attention_varlen's descale options."""
    heads_q, heads_kv, dim_qk, dim_v = SHAPES[args.shape]
    generator = torch.Generator(device=device).manual_seed(args.seed)
    xs = [torch.randn((args.seqlen, h, d), generator=generator, device=device)
          for h, d in ((heads_q, dim_qk), (heads_kv, dim_qk), (heads_kv, dim_v))]
    if args.dry_run:
        return [x.double() for x in xs], {}
    if args.kind == "bf16":
        return [x.to(torch.bfloat16) for x in xs], {}
    factors = [x.abs().max() / 448 for x in xs]
    return ([(x / f).to(torch.float8_e4m3fn) for x, f in zip(xs, factors)],
            {f"{n}_descale": f.reshape(1).float() for n, f in zip("qkv", factors)})


def slowest(fn, device):
    """fn's wall time on the slowest rank (seconds)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    dist.barrier()
    began = time.perf_counter()
    fn()
    sync()
    elapsed = torch.tensor([time.perf_counter() - began], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, default=131072)
    ap.add_argument("--shape", choices=list(SHAPES), default="hd128")
    ap.add_argument("--kind", choices=("bf16", "fp8"), default="bf16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="the JSON record (default bench/latest/context_parallel.json)")
    ap.add_argument("--records", default=None, help='the records file (default bench/records.csv); "": none')
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--dry-run", action="store_true", help="on the host: gloo, float64, the reference attention")
    args = ap.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.dry_run:
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    else:
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
        device = torch.device("cuda", local_rank)
    rank, world = dist.get_rank(), dist.get_world_size()
    (q, k, v), options = prompt(args, device)
    shards = [cpt.shard(x) for x in (q, k, v)]
    attention, merge = ((cpt.reference_attention, cpt.reference_merge) if args.dry_run
                        else (cpt.library_attention(**options), cpt.library_merge))
    cu = torch.tensor([0, args.seqlen], dtype=torch.int32, device=device)

    def one_gpu():
        if rank == 0 and args.dry_run:
            attention(q, k, v, True)
        elif rank == 0:
            fp.attention_varlen(q, k, v, cu, cu, args.seqlen, args.seqlen, causal=True, **options)

    def ring():
        cpt.forward(*shards, args.seqlen, attention=attention, merge=merge)

    def passes():
        for _ in cp.ring_shards(shards[1], shards[2], world, cpt.TorchRing(args.seqlen)):
            pass
    runs = {"one GPU": one_gpu, "context parallel": ring, "passes alone": passes}
    for fn in runs.values():  # warm-up: the library, NCCL's channels
        slowest(fn, device)
    times = {name: [] for name in runs}
    for r in range(args.rounds):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            times[name].append(slowest(runs[name], device))

    if rank == 0:
        speedups = [one / ring for one, ring in zip(times["one GPU"], times["context parallel"])]
        median = {name: statistics.median(t) for name, t in times.items()}
        shape = f"{args.shape} {args.seqlen} causal, {world} {'ranks on the host' if args.dry_run else 'GPUs'}"
        device_name = "host (dry run)" if args.dry_run else torch.cuda.get_device_name()
        result = {"shape": shape, "kind": "float64" if args.dry_run else args.kind, "world": world,
                  "device": device_name,
                  "seconds": times, "median_s": median, "speedup": speedups,
                  "efficiency": statistics.median(speedups) / world,
                  "passes_over_ring": median["passes alone"] / median["context parallel"]}
        print(json.dumps(result, indent=1))
        print(f"\n{shape}, {result['kind']}: one GPU {median['one GPU'] * 1e3:.1f} ms, context parallel "
              f"{median['context parallel'] * 1e3:.1f} ms (speedup {statistics.median(speedups):.2f}x "
              f"[{min(speedups):.2f}, {max(speedups):.2f}], efficiency {result['efficiency']:.2f}); the passes alone "
              f"{median['passes alone'] * 1e3:.1f} ms")
        out = args.out or (None if args.dry_run else os.path.join(records.LATEST, "context_parallel.json"))
        if out:
            os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
            with open(out, "w") as f:
                json.dump(result, f, indent=1)
        run = (records.today(), args.commit or records.git_commit(), result["device"], "bench_context_parallel")
        rows = [records.row(run, "ms per call", shape, f"flashprefill {result['kind']} context parallel",
                            f"flashprefill {result['kind']} one GPU", speedups, median["context parallel"] * 1e3,
                            median["one GPU"] * 1e3)]
        if args.records != "" and (args.records or not args.dry_run):
            records.append(rows, args.records or records.RECORDS)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
