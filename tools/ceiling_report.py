"""The ceiling record (tools/ceiling.py measures it): its layout, the pairs it compares, the best GEMM of each dtype
and its tables. Torch-free, so that the CPU tests read it.

Record: {"date", "commit", "device", "torch", "gemms": {name: result}, "best_gemm": {dtype: name},
"groups": [{"shape", "causal", "results": {name: result}, "pairs": [[ours, [peer]]]}]}: one group per causality of the
attention shape, holding the wgmma loops, the attention implementations and (again) every GEMM, so that
records.varlen_rows pairs them as it pairs varlen with its peers: work per time, round by round. A result is
tools/timing.py's timing with "kind" (loop, attention, gemm), "dtype" and "flops", or {"kind", "dtype",
"unavailable": reason}; a GEMM's also "kernels", the CUDA kernels one call ran (torch.profiler), where read.
"""
import statistics

# The loop kernel whose configuration the forward kernel runs on the attention shape (fwd_launch.cu's table: fp8 with
# KV tiles of 192 keys, bf16 with 128), by dtype.
LOOP_OF = {"fp8": "fp8_kv192", "bf16": "bf16_kv128"}


def loop_name(kernel):
    return f"wgmma loop {kernel.replace('_', ' ')}"


def causality(causal):
    return "causal" if causal else "non-causal"


def group_shape(shape, causal):
    """The records' shape name: the attention shape's (causal, as tools/bench.py's), "non-causal" appended."""
    return shape if causal else f"{shape} non-causal"


def timed(result):
    return "unavailable" not in result


def best_gemms(gemms):
    """{dtype: name} of the GEMM with the most TFLOP/s back to back (GPU-bound: no host time in it) of each dtype."""
    best = {}
    for name, r in gemms.items():
        if timed(r) and (r["dtype"] not in best or r["back_to_back_tflops"] >
                         gemms[best[r["dtype"]]]["back_to_back_tflops"]):
            best[r["dtype"]] = name
    return best


def pairs(results, best_gemm):
    """[[ours, [peer]]]: each attention against its dtype's loop and best GEMM, each loop against its dtype's GEMM."""
    out = []
    for name, r in results.items():
        peers = [loop_name(LOOP_OF[r["dtype"]])] if r["kind"] == "attention" else []
        peers += [best_gemm[r["dtype"]]] if r["kind"] in ("attention", "loop") and r["dtype"] in best_gemm else []
        out += [[name, [peer]] for peer in peers if peer in results]
    return out


def paired(results, ours, peer, rounds_key):
    """Median over rounds of ours' TFLOP/s over peer's in the same round, or None where either did not run."""
    a, b = results.get(ours, {}), results.get(peer, {})
    if not (timed(a) and timed(b)) or len(a[rounds_key]) != len(b[rounds_key]):
        return None
    work = a["flops"] / b["flops"]
    return statistics.median(work * tb / ta for ta, tb in zip(a[rounds_key], b[rounds_key]))


def _tflops(r):
    if not timed(r):
        return "—"
    return (f"{r['tflops']:.0f} ±{100 * r['spread']:.0f}% / "
            f"{r['back_to_back_tflops']:.0f} ±{100 * r['back_to_back_spread']:.0f}%")


def _fraction(results, ours, peer):
    per_call = paired(results, ours, peer, "round_medians_ms")
    burst = paired(results, ours, peer, "back_to_back_rounds_ms")
    return "—" if per_call is None else f"{per_call:.2f} / {burst:.2f}"


def markdown(record):
    """The tables: the ceilings, the GEMMs, and each attention as a fraction of its ceilings."""
    groups, gemms, best = record["groups"], record["gemms"], record["best_gemm"]

    def names(kind):
        return list(dict.fromkeys(n for g in groups for n, r in g["results"].items() if r["kind"] == kind))
    lines = [f"# Ceilings for {groups[0]['shape']}: {record['device']}, commit {record['commit']}, {record['date']}",
             "", "TFLOP/s per call / back to back (median, ± spread of the round medians). The wgmma loop and "
             "attention are credited attention's FLOPs (4 seq² dim per head, half of it causal), a GEMM 2 M N K. "
             "Fractions: ours' TFLOP/s over the ceiling's in the same round, median over rounds (per call / back to "
             "back).", "", "## Our own wgmma loop (cuda/ceiling/)", "",
             "| loop | " + " | ".join(causality(g["causal"]) for g in groups) + " |", "|---" * (len(groups) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(_tflops(g["results"][name]) for g in groups) + " |" for name in names("loop")]
    lines += ["", "## GEMMs through torch (cuBLASLt, or what torch picks); the best of each dtype in bold", "",
              "| GEMM | TFLOP/s | kernels |", "|---|---|---|"]
    for name, r in gemms.items():
        label = f"**{name}**" if name in best.values() else name
        kernels = ", ".join(r.get("kernels") or ()) if timed(r) else r["unavailable"]
        lines.append(f"| {label} | {_tflops(r)} | {kernels} |")
    lines += ["", "## Attention against the ceilings", "",
              "| attention | " + " | ".join(f"{causality(g['causal'])} {column}" for g in groups
                                            for column in ("TFLOP/s", "of the loop", "of the best GEMM")) + " |",
              "|---" * (3 * len(groups) + 1) + "|"]
    for name in names("attention"):
        cells = []
        for g in groups:
            r = g["results"][name]
            cells += [_tflops(r), _fraction(g["results"], name, loop_name(LOOP_OF[r["dtype"]])),
                      _fraction(g["results"], name, best.get(r["dtype"], ""))]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {name}, {causality(g['causal'])}: {r['unavailable']}" for g in groups
              for name, r in g["results"].items() if r["kind"] != "gemm" and not timed(r)]
    lines += [f"- {name}: {r['unavailable']}" for name, r in gemms.items() if not timed(r)]
    return "\n".join(lines) + "\n"
