"""The append-only log of measured results, bench/records.csv: one row per (run, shape, our variant, peer), so that
every run's ratios stay comparable across commits while only the latest full record (bench/latest/) is kept in
the tree. Torch-free, so the CPU tests can exercise it.

Columns (COLUMNS): the run (date, commit, gpu, tool), what was measured (metric, shape), the pair compared (ours,
peer), `ratio` = ours / peer of the metric (speed: higher is better; error: lower is better), taken round by round
where the tool has rounds (median, with ratio_min and ratio_max over the rounds), each one's value and each one's
relative spread over the rounds ((max - min) / median) where there is one.
"""
import csv
import datetime
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "bench", "records.csv")
LATEST = os.path.join(ROOT, "bench", "latest")

COLUMNS = ("date", "commit", "gpu", "tool", "metric", "shape", "ours", "peer", "ratio", "ratio_min", "ratio_max",
           "ours_value", "peer_value", "ours_spread", "peer_spread")

# metric names: speed as causal TFLOP/s (batch * heads_q * S^2 * (dim_qk + dim_v) / time), error as relative L2
PER_CALL, BACK_TO_BACK, SUSTAINED = "TFLOP/s per call", "TFLOP/s back to back", "TFLOP/s sustained"
ERROR, KERNEL_ERROR = "rel. L2 end to end", "rel. L2 kernel only"
# a whole model's prefill (tools/bench_hf.py): tokens per second per call; its logits against SDPA's as relative L2
# (lower is better) and as the fraction of positions whose top-1 token agrees (higher is better)
PREFILL, LOGITS_ERROR, TOP1 = "tokens/s prefill per call", "rel. L2 logits vs SDPA", "top-1 agreement with SDPA"


def git_commit():
    """The short commit of the tree, or "unknown" where it is a copy without .git."""
    try:
        return subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def today():
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def fa3_of(ours, dtype, available):
    """FlashAttention-3 on the same inputs as one of our variants: before 0.5.1 the float16-score variants ran on q's
    codes shrunk into their bound and FA3 on the same ("FA3 fp8, same q codes"); since, on FA3's own inputs."""
    candidates = ("FA3 fp8, same q codes", "FA3 fp8") if "fp16 scores" in ours else (f"FA3 {dtype}",)
    return next((p for p in candidates if p in available), None)


def _round(x, digits=4):
    return "" if x is None else float(f"{x:.{digits}g}")


def row(run, metric, shape, ours, peer, ratios, ours_value, peer_value, ours_spread=None, peer_spread=None):
    """One record; `run` is (date, commit, gpu, tool); `ratios` the per-round ratios (or one ratio)."""
    ratios = [ratios] if isinstance(ratios, (int, float)) else list(ratios)
    date, commit, gpu, tool = run
    return {"date": date, "commit": commit, "gpu": gpu, "tool": tool, "metric": metric, "shape": shape, "ours": ours,
            "peer": peer, "ratio": _round(statistics.median(ratios)),
            "ratio_min": _round(min(ratios)) if len(ratios) > 1 else "",
            "ratio_max": _round(max(ratios)) if len(ratios) > 1 else "",
            "ours_value": _round(ours_value), "peer_value": _round(peer_value), "ours_spread": _round(ours_spread, 2),
            "peer_spread": _round(peer_spread, 2)}


# (metric, value, its spread, its round medians) of the benchmarks' timings (tools/timing.py)
_TIMINGS = ((PER_CALL, "tflops", "spread", "round_medians_ms"),
            (BACK_TO_BACK, "back_to_back_tflops", "back_to_back_spread", "back_to_back_rounds_ms"))


def bench_rows(bench, run):
    """tools/bench.py's record (bench.json): every flashprefill variant against FA3 on the same inputs, per call and
    back to back, the ratio taken round by round (tools/bench_report.py)."""
    rows = []
    for shape in bench["shapes"]:
        results = shape["results"]
        for ours, r in results.items():
            peer = fa3_of(ours, r.get("dtype", ""), results) if ours.startswith("flashprefill") else None
            if peer is None or "unavailable" in r or "unavailable" in results[peer]:
                continue
            p = results[peer]
            for metric, value, spread, rounds in _TIMINGS:
                a, b = r.get(rounds), p.get(rounds)
                if not a or not b or len(a) != len(b):
                    continue
                rows.append(row(run, metric, shape["shape"], ours, peer, [tb / ta for ta, tb in zip(a, b)],
                                r[value], p[value], r[spread], p[spread]))
    return rows


def varlen_rows(record, run):
    """tools/bench_varlen.py's record (bench_varlen.json), and tools/ceiling.py's (ceiling.json, the same layout of
    groups): each of a group's pairs (ours, the first of its candidate peers that ran), per call and back to back. The
    two may do different work (varlen against the equal-length path, attention against a GEMM), so the ratio is of
    work per time, round by round: (flops_ours / t_ours) / (flops_peer / t_peer), which is the peer's time over ours
    where the work is the same."""
    rows = []
    for group in record["groups"]:
        results = group["results"]
        ran = {name for name, r in results.items() if "unavailable" not in r}
        for ours, candidates in group["pairs"]:
            peer = next((p for p in candidates if p in ran), None)
            if ours not in ran or peer is None:
                continue
            r, p = results[ours], results[peer]
            work = r["flops"] / p["flops"]
            for metric, value, spread, rounds in _TIMINGS:
                rows.append(row(run, metric, group["shape"], ours, peer,
                                [work * tp / to for to, tp in zip(r[rounds], p[rounds])], r[value], p[value],
                                r[spread], p[spread]))
    return rows


def _ms_spread(result):
    """(max - min) / median of a sustained result's time per call over its rounds, or None without rounds."""
    ms = [r["ms_per_call"] for r in result.get("rounds", ())]
    return (max(ms) - min(ms)) / result["ms_per_call"] if ms else None


def power_rows(power, flops_of, run):
    """tools/power.py's record (power.json): time per call sustained at the power limit, as TFLOP/s (flops_of maps a
    shape's name to its FLOPs), every flashprefill variant against FA3 on the same inputs."""
    rows = []
    for shape, results in power["shapes"].items():
        flops = flops_of(shape)
        for ours, r in results.items():
            peer = fa3_of(ours, ours.split()[1].rstrip(","), results) if ours.startswith("flashprefill") else None
            if peer is None or flops is None:
                continue
            p = results[peer]
            rows.append(row(run, SUSTAINED, shape, ours, peer, p["ms_per_call"] / r["ms_per_call"],
                            flops / r["ms_per_call"] / 1e9, flops / p["ms_per_call"] / 1e9, _ms_spread(r), _ms_spread(p)))
    return rows


def accuracy_shape(accuracy):
    """The problem of an accuracy record by name, e.g. "hd128 8/2 4k" or "mla 16/16 4k"."""
    heads, seq = accuracy["heads"], accuracy["seq"]
    kind = "mla" if accuracy.get("dims", [128])[0] == 192 else "hd128"
    return f"{kind} {heads[0]}/{heads[1]} {seq // 1024}k" if seq % 1024 == 0 else f"{kind} {heads[0]}/{heads[1]} {seq}"


def accuracy_rows(accuracy, shape, run):
    """tools/accuracy.py's record: each flashprefill row's error against FA3's of the same dtype on the same inputs
    (end to end, and kernel-only where both have it); `shape` names the problem, the input distribution is added."""
    rows = []
    by_dist = {}
    for r in accuracy["rows"]:
        if "unavailable" not in r:
            by_dist.setdefault(r["dist"], {})[r["peer"]] = r
    for dist, results in by_dist.items():
        for ours, r in results.items():
            peer = f"FA3 {r.get('dtype', '')}" if ours.startswith("flashprefill") else None
            if peer not in results:
                continue
            p = results[peer]
            rows.append(row(run, ERROR, f"{shape}, {dist}", ours, peer, r["end_to_end"] / p["end_to_end"],
                            r["end_to_end"], p["end_to_end"]))
            if "kernel_only" in r and "kernel_only" in p:
                rows.append(row(run, KERNEL_ERROR, f"{shape}, {dist}", ours, peer, r["kernel_only"] / p["kernel_only"],
                                r["kernel_only"], p["kernel_only"]))
    return rows


def hf_rows(record, run, ours=("flashprefill bf16", "flashprefill fp8"), peers=("FA3 bf16", "SDPA")):
    """tools/bench_hf.py's record (bench_hf.json): each flashprefill backend's prefill speed against every peer that
    ran, the ratio taken round by round; its logits' error and top-1 agreement against FlashAttention-3's (both
    measured against SDPA's logits, so SDPA itself has none)."""
    rows = []
    for length in record["lengths"]:
        results = length["results"]
        ran = {name for name, r in results.items() if "unavailable" not in r}
        for name in (o for o in ours if o in ran):
            r = results[name]
            for peer in (p for p in peers if p in ran):
                p = results[peer]
                rows.append(row(run, PREFILL, length["shape"], name, peer,
                                [tp / to for to, tp in zip(r["round_medians_ms"], p["round_medians_ms"])],
                                r["tokens_per_s"], p["tokens_per_s"], r["spread"], p["spread"]))
                for metric, key in ((LOGITS_ERROR, "logits_rel_l2"), (TOP1, "top1_agreement")):
                    if key in p and p[key]:
                        rows.append(row(run, metric, length["shape"], name, peer, r[key] / p[key], r[key], p[key]))
    return rows


def append(rows, path=RECORDS):
    """Appends rows to the records file, writing the header first where the file is new; refuses a file whose
    header is not COLUMNS (a different format must not be mixed in)."""
    if not rows:
        return 0
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        with open(path, newline="") as f:
            header = next(csv.reader(f), None)
        if tuple(header or ()) != COLUMNS:
            raise ValueError(f"{path}: header {header} is not {list(COLUMNS)}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        if new:
            w.writeheader()
        w.writerows(rows)
    return len(rows)


def read(path=RECORDS):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
