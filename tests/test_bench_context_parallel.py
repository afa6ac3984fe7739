"""tools/bench_context_parallel.py's dry run (two gloo processes under torch.distributed.run, float64 reference
attention on the host): it times the three runs in every round, rank 0 writes the JSON record and one records row
whose ratio is the median of the per-round speedups. Needs torch (skips without it); the GPU run itself needs two
GPUs (bench/NOTES.md)."""
import csv
import json
import pathlib
import subprocess
import sys

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_dry_run_writes_the_record(tmp_path):
    markers.torch_or_skip(markers.NO_TORCH_DISTRIBUTED)
    out, rows = tmp_path / "cp.json", tmp_path / "records.csv"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               str(ROOT / "tools" / "bench_context_parallel.py"), "--dry-run", "--seqlen", "203", "--rounds", "3",
               "--out", str(out), "--records", str(rows), "--commit", "test"]
    env = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["world"] == 2 and record["kind"] == "float64" and record["device"] == "host (dry run)"
    assert all(len(t) == 3 and min(t) > 0 for t in record["seconds"].values()), record["seconds"]
    assert len(record["speedup"]) == 3 and record["efficiency"] > 0
    (row,) = list(csv.DictReader(rows.open()))
    assert row["tool"] == "bench_context_parallel" and row["commit"] == "test"
    assert float(row["ratio"]) == float(f"{sorted(record['speedup'])[1]:.4g}")  # records keep 4 digits
