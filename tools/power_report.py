"""nvidia-smi samples of power, SM clock and clock-event reasons, and their summary per run (tools/power.py).
Torch-free, so the CPU tests can read it."""
import statistics

QUERY = "power.draw,clocks.sm,clocks_event_reasons.active"

# NVML's clock-event (throttle) reason bits (nvml.h, nvmlClocksEventReason*).
REASONS = {
    0x1: "idle",
    0x2: "applications clocks",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock",
}


def parse_samples(text):
    """(watts, sm_mhz, reason_bits) per line of `nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits`;
    lines that are not three fields (a header, a cut-off last line, "[N/A]") are left out."""
    samples = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            continue
        try:
            samples.append((float(fields[0]), float(fields[1]), int(fields[2], 16)))
        except ValueError:
            continue
    return samples


def reason_names(bits):
    names = [name for bit, name in REASONS.items() if bits & bit]
    unknown = bits & ~sum(REASONS)
    return names + ([f"0x{unknown:x}"] if unknown else [])


def summarize(samples, ms_per_call):
    """Median power and clock over the samples, the reasons seen in any of them, and the energy per call (median
    power x time per call)."""
    if not samples:
        raise ValueError("no nvidia-smi samples while the kernel ran")
    watts = statistics.median(s[0] for s in samples)
    bits = 0
    for s in samples:
        bits |= s[2]
    return {"ms_per_call": ms_per_call, "watts": watts, "sm_mhz": statistics.median(s[1] for s in samples),
            "mj_per_call": watts * ms_per_call, "reasons": reason_names(bits), "samples": len(samples)}


# FA3 on the same inputs where the peer's own name does not say which ("FA3 <last word>" otherwise): the first of
# these that ran. Before 0.5.1 the float16-score columns ran on q's codes shrunk into their bound, and FA3 on the same
# ("FA3 fp8, same q codes"); since, on FA3's own inputs.
SAME_INPUTS_PEER = {"flashprefill fp8, fp16 scores": ("FA3 fp8, same q codes", "FA3 fp8"),
                    "flashprefill fp8, V prepared": ("FA3 fp8",),
                    "flashprefill fp8, fp16 scores, V prepared": ("FA3 fp8, same q codes", "FA3 fp8")}


def markdown(results, device, power_limit_w):
    """One table row per (shape, peer): time, power, clock, energy; the time and energy ratios to FA3 of the same
    dtype (on the same inputs) where both ran."""
    lines = [f"Sustained runs on {device} (power limit {power_limit_w:.0f} W): each peer back to back for the "
             "measuring window, nvidia-smi sampling every 50 ms; medians over the rounds.", "",
             "| shape | peer | ms/call | W | SM MHz | mJ/call | FA3 time / ours | FA3 energy / ours | clock-event reasons |",
             "|---|---|---|---|---|---|---|---|---|"]
    for shape, rows in results.items():
        for peer, r in rows.items():
            ratio_t = ratio_e = "—"
            fa3 = next((rows[p] for p in SAME_INPUTS_PEER.get(peer, (f"FA3 {peer.split()[-1]}",)) if p in rows), None)
            if fa3 and not peer.startswith("FA3"):
                ratio_t = f"{fa3['ms_per_call'] / r['ms_per_call']:.2f}"
                ratio_e = f"{fa3['mj_per_call'] / r['mj_per_call']:.2f}"
            lines.append(f"| {shape} | {peer} | {r['ms_per_call']:.3f} | {r['watts']:.0f} | {r['sm_mhz']:.0f} | "
                         f"{r['mj_per_call']:.0f} | {ratio_t} | {ratio_e} | {', '.join(r['reasons']) or 'none'} |")
    return "\n".join(lines) + "\n"
