"""The benchmark's tables, from its results (tools/bench.py writes them; no GPU or torch needed to read them).

Two TFLOP/s tables (per call, back to back: each peer's median and the spread of its round medians) and one of
ratios to FlashAttention-3: for each round, FA3's time over flashprefill's in that same round, then the median
and the range of those ratios. Peers are timed one after the other within a round, so a round's pair shares the
GPU's state of the moment (clock, temperature) while medians taken column by column do not: the same build has
measured up to 5% apart in two columns of one run (bench/NOTES.md).

    python tools/bench_report.py RESULTS.json      (bench.json, or gpu_check.json with its "bench" entry)
prints the markdown.
"""
import argparse
import json
import statistics

# (label, flashprefill, its peer on the same inputs: the first of these the record has) of the ratio table; their
# timings per round, per call and back to back. "+ quantize_qkv" is the default pipeline from bf16, quantizer included,
# against FA3 given its fp8 inputs. Since 0.7.0 attention's default takes float16 scores where a kernel has them
# ("flashprefill fp8" pins float32 scores; records before had it as the default). Before 0.5.1 the float16-score columns ran on q's codes shrunk into their bound
# and FA3 on the same ("FA3 fp8, same q codes"); since, on FA3's own inputs.
RATIO_PAIRS = (("fp8 fp32 scores", "flashprefill fp8", ("FA3 fp8",)),
               ("fp8 fp32 scores V prepared", "flashprefill fp8, V prepared", ("FA3 fp8",)),
               ("fp8 fp16 scores (default)", "flashprefill fp8, fp16 scores", ("FA3 fp8, same q codes", "FA3 fp8")),
               ("fp8 fp16 scores V prepared", "flashprefill fp8, fp16 scores, V prepared",
                ("FA3 fp8, same q codes", "FA3 fp8")),
               ("bf16", "flashprefill bf16", ("FA3 bf16",)),
               ("fp8 + quantize_qkv (from bf16)", "flashprefill fp8 + quantize_qkv", ("FA3 fp8",)))
TIMINGS = (("per call", "round_medians_ms"), ("back to back", "back_to_back_rounds_ms"))


def paired_ratio(results, ours, peer, rounds_key):
    """(median, min, max) over rounds of peer's time / ours in the same round, or None where either is missing."""
    a, b = results.get(ours, {}).get(rounds_key), results.get(peer, {}).get(rounds_key)
    if not a or not b or len(a) != len(b):
        return None
    ratios = [tb / ta for ta, tb in zip(a, b)]
    return statistics.median(ratios), min(ratios), max(ratios)


def tflops_tables(shapes, device, peers):
    """The two TFLOP/s tables (per call, back to back): a row per shape, a column per peer in `peers`' order."""
    lines = []
    for title, key, spread in (("per call from Python, host included", "tflops", "spread"),
                               ("launched back to back (GPU-bound)", "back_to_back_tflops", "back_to_back_spread")):
        lines += [f"Causal prefill, TFLOP/s {title} (median; ± spread of round medians), {device}", "",
                  "| shape | " + " | ".join(peers) + " |", "|---" * (len(peers) + 1) + "|"]
        for shape in shapes:
            cells = []
            for peer in peers:
                r = shape["results"].get(peer, {})
                cells.append(f"{r[key]:.0f} ±{100 * r[spread]:.0f}%" if key in r else "—")
            lines.append(f"| {shape['shape']} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def unavailable_lines(shapes):
    """One line per peer a shape could not run, with the reason its setup gave."""
    return [f"- {shape['shape']}, {peer}: {r['unavailable']}" for shape in shapes
            for peer, r in shape["results"].items() if "unavailable" in r]


def markdown(shapes, device, peers=None):
    """The tables; `peers` orders the columns (bench.json keeps the order tools/peers.py gives them)."""
    peers = peers or list(dict.fromkeys(peer for shape in shapes for peer in shape["results"]))
    lines = tflops_tables(shapes, device, peers)
    columns = [(label, ours, peer, timing, key) for label, ours, peer in RATIO_PAIRS for timing, key in TIMINGS]
    lines += [f"Speed ratio to FlashAttention-3 (its time / ours in the same round: median [min, max] over rounds), "
              f"{device}", "",
              "| shape | " + " | ".join(f"{label} {timing}" for label, _, _, timing, _ in columns) + " |",
              "|---" * (len(columns) + 1) + "|"]
    for shape in shapes:
        cells = []
        for _, ours, candidates, _, key in columns:
            peer = next((p for p in candidates if p in shape["results"]), candidates[-1])
            r = paired_ratio(shape["results"], ours, peer, key)
            cells.append("—" if r is None else f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]")
        lines.append(f"| {shape['shape']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += unavailable_lines(shapes)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="bench.json, or a gpu_check.json record")
    args = ap.parse_args()
    data = json.load(open(args.results))
    bench = data.get("bench", data)
    print(markdown(bench["shapes"], bench["device"], bench.get("peers")), end="")


if __name__ == "__main__":
    main()
