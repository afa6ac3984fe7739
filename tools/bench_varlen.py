"""Side-by-side speed of variable-length batches and paged KV caches on one GPU: flashprefill's attention_varlen
(contiguous and paged) and its equal-length path, FlashAttention-3's varlen and paged forms, same inputs, one process.

Groups (tools/bench_varlen_cases.py), each timed in the same interleaved rounds (tools/timing.py, as tools/bench.py):
  equal lengths 16 x 4k through attention_varlen and our equal-length path on the same inputs;
  mixed batch   64k tokens, lengths from a seeded lognormal of median 1k clipped to [16, 16k]; contiguous, paged
                at 64- and 256-token pages (pages in a random order; ours fp8 also in the cache's own form, codes
                with a power-of-two scale per page), and our equal-length path at 16 x 4k;
  chunked       4 sequences of 2k new queries on 30k cached keys (bottom-right causal; each sequence's rows hold
                2k more than it uses: seqused_k), contiguous and paged;
  bf16 q        at hd128 (in each group, and 4 x 4k of its own): q in bf16 against the fp8 cache of k rotated, our
                kernel rotating and rounding q itself (what an engine's call costs), against FA3 given fp8 codes;
each at hd128 32/8 and DeepSeek's 192/128 with 16 heads, fp8 (every implementation on the same e4m3 codes with
one factor per sequence and KV head, FA3's convention, given to FA3 for free; ours with its default scores) and bf16.
Reported: TFLOP/s per call and back to back (work = exact causal FLOPs per sequence, varlen_cases), each output's
relative L2 to FA3's bf16 varlen output (else ours), and the pairs of varlen_cases.pairs as ratios of work per time
taken round by round: ours / FA3 on the same work, paged / contiguous, varlen / equal-length.

    python tools/bench_varlen.py [--out DIR] [--records CSV] [--commit SHA] [--rounds N] [--launches N]
                                 [--groups TEXT] [--dry-run]
writes DIR/bench_varlen.json and DIR/bench_varlen.md (default bench/latest/) and appends one row per pair and
timing to the records file (default bench/records.csv; tools/records.py; --records "" appends nothing).
--dry-run: everything but the GPU: numpy stand-ins of torch, flashprefill and FA3 (tools/varlen_standins.py) on
the same groups with every token count divided by 32 and the heads by 8, the host's clock, 2 rounds of 1 launch;
appends nothing unless --records is given (rows of tool "bench_varlen dry run").
"""
import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_report  # noqa: E402
import records  # noqa: E402
import timing  # noqa: E402
import bench_varlen_cases as varlen_cases  # noqa: E402
import varlen_peers  # noqa: E402
from varlen_arrays import E4M3_MAX  # noqa: E402
from flashprefill import prepare  # noqa: E402  (numpy only: no library loaded)

INPUT_SETS = 3
DRY_RUN_TOKENS, DRY_RUN_HEADS = 32, 8  # what the dry run divides token counts and heads by
COOLDOWN_S = 20.0  # idle before each group: the 4 x 4k ratios moved by 0.1 after the long groups without it
# the output the others are compared with: the first of these that ran
REFERENCES = ("FA3 bf16 varlen", "flashprefill bf16 varlen")


def make_inputs(problem, page_sizes, seed, ops):
    """The inputs of varlen_peers (its docstring lists them) for one problem: random normal q, k, v; fp8 codes
    with one factor per sequence and KV head (amax / 448 over the sequence's rows and the group's heads); the same
    bf16 and fp8 keys in a paged cache per page size, pages in a random order (varlen_cases.page_table)."""
    p = problem
    batch = len(p.lengths_q)
    x = {"lengths_q": p.lengths_q, "max_q": max(p.lengths_q), "max_k": max(p.lengths_k),
         "uses_seqused": p.uses_seqused, "cu_q": ops.asarray(varlen_cases.cu_seqlens(p.lengths_q), "int32"),
         "cu_k": ops.asarray(varlen_cases.cu_seqlens(p.capacity_k), "int32"),
         "used_k": ops.asarray(p.lengths_k, "int32"), "pages": {}}

    def codes(t, lengths):
        """e4m3 codes of t (rows, heads, dim) and their factors, one per sequence and KV head."""
        sequence = ops.asarray(varlen_cases.token_sequences(lengths), "int64")
        groups = t.reshape(sum(lengths), p.heads_kv, -1)  # the heads of one KV group side by side
        descale = ops.clip(ops.segment_amax(ops.amax(abs(groups), 2), sequence, batch) / E4M3_MAX, 1e-12, None)
        return ops.cast(ops.clip(groups / descale[sequence][:, :, None], -E4M3_MAX, E4M3_MAX).reshape(t.shape),
                        "fp8"), descale

    for i, (name, lengths, heads, dim) in enumerate((("q", p.lengths_q, p.heads_q, p.dim_qk),
                                                     ("k", p.capacity_k, p.heads_kv, p.dim_qk),
                                                     ("v", p.capacity_k, p.heads_kv, p.dim_v))):
        t = ops.randn((sum(lengths), heads, dim), 3 * seed + i)
        (x[name + "8"], x[name + "d"]), x[name] = codes(t, lengths), ops.cast(t, "bf16")
    if varlen_cases.takes_bf16_q(p):
        # k rotated as flashprefill.quantize_fp8(k, signs=...) rotates it (k @ H, H = hadamard(dim, seed)) and
        # rounded; q stays bf16 and the kernel rotates it with the same signs, so that q.k is unchanged
        h = ops.asarray(prepare.hadamard(p.dim_qk, seed).astype(np.float32), "float32")
        x["k8r"], x["kdr"] = codes(ops.cast(x["k"], "float32") @ h, p.capacity_k)
        x["signs"] = ops.asarray(prepare.rotation_signs(p.dim_qk, seed), "float32")
    used_rows = ops.asarray(varlen_cases.key_rows(p.capacity_k, p.lengths_k), "int64")
    for page in page_sizes:
        table, num_pages = varlen_cases.page_table(p.lengths_k, page, seed)
        paged = ops.asarray(varlen_cases.paged_rows(p.lengths_k, page, table), "int64")
        x["pages"][page] = cache = {"table": ops.asarray(table, "int32")}
        for name in ("k", "v", "k8", "v8"):
            rows = ops.scatter_rows(x[name], used_rows, paged, num_pages * page)
            cache[name] = rows.reshape((num_pages, page) + tuple(rows.shape[1:]))
        cache.update(page_scales(x, cache, p, page, ops))
    return x


def page_scales(x, cache, problem, page, ops):
    """The fp8 form a paged cache is written in: k's and v's bf16 values quantized per page and KV head (k8p, v8p,
    exponents ke, ve (num_pages, heads_kv)), q's per block of `page` tokens of each sequence and head (q8p, exponents
    qe (batch, heads_q, ceil(max_q / page))); every descale a power of two, BlockScales of block `page`."""
    out = {}
    for name in ("k", "v"):
        values = ops.cast(cache[name], "float32")
        e = ops.pow2_exponents(ops.amax(ops.amax(abs(values), 3), 1))
        out[name + "8p"] = ops.cast(ops.clip(values / ops.exp2(e)[:, None, :, None], -E4M3_MAX, E4M3_MAX), "fp8")
        out[name + "e"] = e
    batch, blocks = len(problem.lengths_q), -(-max(problem.lengths_q) // page)
    sequence = varlen_cases.token_sequences(problem.lengths_q)
    position = np.arange(len(sequence)) - varlen_cases.cu_seqlens(problem.lengths_q)[sequence]
    block = ops.asarray(sequence * blocks + position // page, "int64")
    values = ops.cast(x["q"], "float32")
    e = ops.pow2_exponents(ops.segment_amax(ops.amax(abs(values), 2), block, batch * blocks))
    codes = ops.clip(values / ops.exp2(e)[block][:, :, None], -E4M3_MAX, E4M3_MAX)
    out["q8p"], out["qe"] = ops.cast(codes, "fp8"), ops.cast(e.reshape(batch, blocks, -1).swapaxes(1, 2), "int8")
    return out


def check_outputs(runs, unavailable, reference_order, ops):
    """({name: relative L2 of its output to the reference's}, reference): the first of reference_order that ran is
    the reference; every other run on the same inputs (input set 0) is compared with it. A run whose output is not
    finite moves to `unavailable`: its timing would mean nothing."""
    reference = next((name for name in reference_order if name in runs), None)
    if reference is None:
        return {}, None
    ref = runs[reference][0]()
    errors = {}
    for name in list(runs):
        errors[name] = ops.relative_l2(runs[name][0]().reshape(ref.shape), ref)
        if not math.isfinite(errors[name]):
            unavailable[name] = f"output not finite against {reference} (relative L2 {errors[name]}): not timed"
            del runs[name]
    return errors, reference


def bench_group(group, libs, clock, rounds, launches, idle_s):
    """One group's record: its implementations set up on INPUT_SETS input sets of each of its problems, outputs
    checked, timed in the same rounds; refusals kept with their reasons."""
    specs = varlen_cases.implementations(group)
    flops = {name: (group.equal if spec[2] == "equal" else group.problem).flops for name, spec in specs.items()}
    forms = {group.problem: {form for _, _, form, _ in specs.values()} - {"equal"}}
    if group.equal is not None:
        forms[group.equal] = forms.get(group.equal, set()) | {"equal"}
    runs, unavailable, errors, reference = {}, {}, {}, None
    for problem, its_forms in forms.items():
        setups = {name: varlen_peers.setup(libs, spec) for name, spec in specs.items() if spec[2] in its_forms}
        pages = group.page_sizes if problem == group.problem else ()
        sets = [make_inputs(problem, pages, seed, libs.ops) for seed in range(INPUT_SETS)]
        ran, refused = timing.prepare(setups, sets, clock)
        if problem == group.problem:
            errors, reference = check_outputs(ran, refused, REFERENCES, libs.ops)
        runs.update(ran)
        unavailable.update(refused)
    timed = timing.time_rounds(runs, rounds, launches, flops, clock, idle_s)
    results = {}
    for name, (library, dtype, form, page) in specs.items():
        results[name] = {"library": library, "dtype": dtype, "form": form, "page_size": page, "flops": flops[name]}
        if name in unavailable:
            results[name]["unavailable"] = unavailable[name]
        else:
            results[name].update(timed[name], rel_l2=errors.get(name))
    del runs
    libs.ops.release()
    return {"shape": group.shape, "problem": dataclasses.asdict(group.problem), "flops": group.problem.flops,
            "equal": group.equal and dataclasses.asdict(group.equal), "page_sizes": list(group.page_sizes),
            "reference": reference, "pairs": varlen_cases.pairs(group), "results": results}


def gpu_libraries():
    from varlen_arrays import TorchOps
    import flashprefill
    try:
        import fa3_fwd_interface as fa3
        missing = ""
    except ImportError as e:
        fa3, missing = None, str(e)
    return varlen_peers.Libraries(flashprefill, fa3, TorchOps(), missing)


def dry_run_libraries():
    from varlen_arrays import NumpyOps
    from varlen_standins import FlashAttention3, Flashprefill
    return varlen_peers.Libraries(Flashprefill, FlashAttention3, NumpyOps())


def markdown(record, rows):
    """The TFLOP/s tables (tools/bench_report.py's), the outputs' errors, the pairs' ratios and the refusals."""
    groups, device = record["groups"], record["device"]
    names = list(dict.fromkeys(name for g in groups for name in g["results"]))
    lines = ["Problems: sequences, queries, the keys each sequence's queries see (causal, bottom-right), work", ""]
    for g in groups:
        p = g["problem"]
        lines.append(f"- {g['shape']}: {len(p['lengths_q'])} sequences, {sum(p['lengths_q'])} queries (longest "
                     f"{max(p['lengths_q'])}), keys {min(p['lengths_k'])}-{max(p['lengths_k'])}, "
                     f"{g['flops'] / 1e12:.3f} TFLOP")
    lines.append("")
    lines += bench_report.tflops_tables(groups, device, names)
    lines += ["Relative L2 of each output to the reference's (same inputs)", "", "| shape | reference | " +
              " | ".join(names) + " |", "|---" * (len(names) + 2) + "|"]
    for g in groups:
        cells = [f"{g['results'][n]['rel_l2']:.1e}" if g["results"].get(n, {}).get("rel_l2") is not None else "—"
                 for n in names]
        lines.append(f"| {g['shape']} | {g['reference']} | " + " | ".join(cells) + " |")
    lines += ["", f"Work per time, ours / peer round by round (median [min, max]; the peer's time / ours where the "
                  f"work is the same), {device}", "", "| shape | ours | peer | per call | back to back |",
              "|---|---|---|---|---|"]
    by_pair = {}
    for r in rows:
        by_pair.setdefault((r["shape"], r["ours"], r["peer"]), {})[r["metric"]] = r
    for (shape, ours, peer), metrics in by_pair.items():
        cells = [f"{m['ratio']:.3f} [{m['ratio_min']:.3f}, {m['ratio_max']:.3f}]" if m["ratio_min"] != ""
                 else f"{m['ratio']:.3f}" for m in (metrics[records.PER_CALL], metrics[records.BACK_TO_BACK])]
        lines.append(f"| {shape} | {ours} | {peer} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += bench_report.unavailable_lines(groups)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="default bench/latest/, or a new temporary folder with --dry-run")
    ap.add_argument("--records", default=None,
                    help='the records file to append to (default bench/records.csv; none with --dry-run); "": none')
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--rounds", type=int, default=None, help="default 4 (2 with --dry-run)")
    ap.add_argument("--launches", type=int, default=None, help="default 10 (1 with --dry-run)")
    ap.add_argument("--groups", default=None, help="only the groups whose name contains this text, e.g. chunk")
    ap.add_argument("--cooldown", type=float, default=None,
                    help=f"seconds idle before each group, so that its ratios do not depend on the groups before it "
                         f"(the GPU's clock under its power limit follows its temperature; default {COOLDOWN_S:g}, 0 "
                         f"with --dry-run)")
    ap.add_argument("--dry-run", action="store_true",
                    help=f"numpy stand-ins, no GPU; token counts divided by {DRY_RUN_TOKENS}, heads by {DRY_RUN_HEADS}")
    args = ap.parse_args()
    args.rounds = args.rounds or (2 if args.dry_run else 4)
    args.launches = args.launches or (1 if args.dry_run else 10)
    began = time.perf_counter()
    if args.dry_run:
        libs, clock, device, tool, idle_s = dry_run_libraries(), timing.HostClock, "numpy stand-ins", \
            "bench_varlen dry run", 0.0
        out = args.out or tempfile.mkdtemp(prefix="bench_varlen_")
        records_path = args.records or ""
        groups = varlen_cases.groups(DRY_RUN_TOKENS, DRY_RUN_HEADS)
    else:
        libs = gpu_libraries()
        import torch
        clock, device, tool, idle_s = torch.cuda, torch.cuda.get_device_name(), "bench_varlen", timing.IDLE_S
        out = args.out or records.LATEST
        records_path = records.RECORDS if args.records is None else args.records
        groups = varlen_cases.groups()
    groups = [g for g in groups if args.groups is None or args.groups in g.shape]
    if not groups:
        ap.error(f"no group's name contains {args.groups!r}")
    run = (records.today(), args.commit or records.git_commit(), device, tool)
    record = {"date": run[0], "commit": run[1], "device": device, "tool": tool, "rounds": args.rounds,
              "launches": args.launches, "groups": []}
    os.makedirs(out, exist_ok=True)
    cooldown_s = args.cooldown if args.cooldown is not None else 0.0 if args.dry_run else COOLDOWN_S
    record["cooldown_s"] = cooldown_s
    for g in groups:  # the record is written after every group: a failure later leaves the groups before it
        time.sleep(cooldown_s)
        record["groups"].append(bench_group(g, libs, clock, args.rounds, args.launches, idle_s))
        record["seconds"] = round(time.perf_counter() - began, 1)
        rows = records.varlen_rows(record, run)
        table = markdown(record, rows)
        with open(os.path.join(out, "bench_varlen.json"), "w") as f:
            json.dump(record, f, indent=1)
        with open(os.path.join(out, "bench_varlen.md"), "w") as f:
            f.write(table)
        print(f"{g.shape}: done at {record['seconds']} s", flush=True)
    if records_path:
        records.append(rows, records_path)
    print(table)
    print(f"{len(rows)} record rows{' appended to ' + records_path if records_path else ''}; "
          f"{out}/bench_varlen.json; {record['seconds']} s")


if __name__ == "__main__":
    main()
