"""Sustained speed under the GPU's power limit: each peer (tools/peers.py) runs back to back for a window of seconds
while nvidia-smi samples power, SM clock and the clock-event reasons; time, power, clock and energy per call.

Run back to back, every peer here holds an H200 at its 700 W limit and runs at the clock that limit allows, so the
time per call follows the energy per call: what a kernel saves in data movement or instructions comes back as clock.

    python tools/power.py [--out DIR] [--records CSV] [--shapes TEXT] [--peers NAME ...] [--rounds N] [--seconds S]
writes DIR/power.json and DIR/power.md (default bench/latest/) and appends each flashprefill variant's sustained
ratio to FlashAttention-3 to the records file (default bench/records.csv; --records "" appends nothing).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import SHAPES, make_inputs  # noqa: E402
from peers import PEERS, PeerUnavailable  # noqa: E402
import power_report  # noqa: E402
import records  # noqa: E402

DEFAULT_PEERS = ["flashprefill fp8", "flashprefill fp8, V prepared", "FA3 fp8", "flashprefill fp8, fp16 scores",
                 "flashprefill fp8, fp16 scores, V prepared", "flashprefill bf16", "FA3 bf16"]
SAMPLE_MS = 50


class Sampler:
    """nvidia-smi every SAMPLE_MS in the background; samples() gives those taken between start() and stop()."""

    def __init__(self):
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={power_report.QUERY}", "--format=csv,noheader,nounits",
                                      "-lms", str(SAMPLE_MS)], stdout=subprocess.PIPE, text=True)
        self.lines, self.window = [], None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line))

    def measure(self, run):
        t0 = time.monotonic()
        value = run()
        t1 = time.monotonic()
        return value, power_report.parse_samples("".join(l for t, l in list(self.lines) if t0 <= t <= t1))

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def back_to_back_for(fn, seconds):
    """Calls fn in batches of 10 until `seconds` have passed; milliseconds per call by CUDA events."""
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, t0 = 0, time.monotonic()
    start.record()
    while time.monotonic() - t0 < seconds:
        for _ in range(10):
            fn()
        calls += 10
        stop.record()
        stop.synchronize()
    return start.elapsed_time(stop) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=records.LATEST)
    ap.add_argument("--records", default=records.RECORDS, help="the records file to append to; empty: none")
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--shapes", default="16k", help="the shapes of tools/bench.py whose name contains this text")
    ap.add_argument("--peers", nargs="+", default=DEFAULT_PEERS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0, help="the measuring window per peer and round")
    ap.add_argument("--warmup-seconds", type=float, default=0.5)
    args = ap.parse_args()
    device = torch.cuda.get_device_name()
    limit = float(subprocess.run(["nvidia-smi", "--query-gpu=power.limit", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, check=True).stdout.split()[0])
    sampler = Sampler()
    results = {}
    try:
        for name, batch, seq, hq, hkv, dqk, dv in [s for s in SHAPES if args.shapes in s[0]]:
            x = make_inputs(batch, seq, hq, hkv, dqk, dv, 0)
            fns = {}
            for peer in args.peers:
                try:
                    fns[peer] = PEERS[peer][1](x)
                    fns[peer]()
                except PeerUnavailable as e:
                    print(f"{name}: {peer} unavailable: {e}")
            per_round = {peer: [] for peer in fns}
            for _ in range(args.rounds):
                for peer, fn in fns.items():
                    back_to_back_for(fn, args.warmup_seconds)
                    ms, samples = sampler.measure(lambda: back_to_back_for(fn, args.seconds))
                    per_round[peer].append(power_report.summarize(samples, ms))
            results[name] = {}
            for peer, rounds in per_round.items():
                row = {k: statistics.median(r[k] for r in rounds) for k in ("ms_per_call", "watts", "sm_mhz",
                                                                             "mj_per_call")}
                row["reasons"] = sorted({n for r in rounds for n in r["reasons"]})
                row["rounds"] = rounds
                results[name][peer] = row
            del x, fns
            torch.cuda.empty_cache()
    finally:
        sampler.close()
    os.makedirs(args.out, exist_ok=True)
    run = (records.today(), args.commit or records.git_commit(), device, "power")
    record = {"date": run[0], "commit": run[1], "device": device, "power_limit_w": limit, "seconds": args.seconds,
              "shapes": results}
    with open(os.path.join(args.out, "power.json"), "w") as f:
        json.dump(record, f, indent=1)
    if args.records:
        flops = {s[0]: s[1] * s[3] * s[2] * s[2] * (s[5] + s[6]) for s in SHAPES}
        records.append(records.power_rows(record, flops.get, run), args.records)
    table = power_report.markdown(results, device, limit)
    with open(os.path.join(args.out, "power.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
