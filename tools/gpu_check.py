"""The GPU check: on a machine with an NVIDIA GPU, run the whole test suite (GPU tests included) and the
benchmark, and write one JSON record stamped with the git commit it measured.

    python tools/gpu_check.py [--out DIR] [--commit SHA] [--quick] [--marks "not emulator"]

Writes DIR/gpu_check.json (test outcomes, which GPU tests ran, the benchmark), DIR/pytest.xml, and the
benchmark's bench.json / bench.md / bench.png (DIR defaults to bench/latest/, the latest full record; the
benchmark appends its ratios to bench/records.csv, or to --records). The commit defaults to `git rev-parse HEAD`
(pass it where the tree is a copy without .git). Exits non-zero if any test failed.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_tests(out, marks):
    xml = os.path.join(out, "pytest.xml")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(ROOT, "python"),
                                                                    os.environ.get("PYTHONPATH")])))
    rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-ra", f"--junitxml={xml}"] +
                        (["-m", marks] if marks else []), cwd=ROOT, env=env).returncode
    cases = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
                detail = child.get("message", "")
                break
        else:
            detail = ""
        cases.append({"test": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                      "seconds": float(case.get("time", 0)), "detail": detail[:300]})
    return rc, cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "latest"))
    ap.add_argument("--records", default=os.path.join(ROOT, "bench", "records.csv"),
                    help="the records file the benchmark appends to; empty: none")
    ap.add_argument("--commit", default=None)
    ap.add_argument("--quick", action="store_true", help="benchmark only the 16k shapes")
    ap.add_argument("--marks", default="", help='pytest -m expression, e.g. "not emulator" (CPU-only tests CI runs)')
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch
    record = {"commit": args.commit or git_commit(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    rc, cases = run_tests(args.out, args.marks)
    gpu = [c for c in cases if "gpu" in c["test"]]
    record["tests"] = {"returncode": rc, "marks": args.marks, "cases": cases,
                       "counts": {o: sum(c["outcome"] == o for c in cases) for o in ("passed", "failure", "error",
                                                                                     "skipped")},
                       "gpu_ran": sum(c["outcome"] in ("passed", "failure", "error") for c in gpu),
                       "gpu_skipped": sum(c["outcome"] == "skipped" for c in gpu)}
    bench = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench.py"), "--out", args.out, "--records",
                            args.records, "--commit", record["commit"][:7]] + (["--quick"] if args.quick else []),
                           cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                               filter(None, [os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH")]))))
    bench_json = os.path.join(args.out, "bench.json")
    record["bench"] = json.load(open(bench_json)) if bench.returncode == 0 and os.path.exists(bench_json) else None
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(record, f, indent=1)
    t = record["tests"]
    print(f"commit {record['commit'][:12]} on {record['device']}: tests {t['counts']}, GPU tests ran {t['gpu_ran']}, "
          f"skipped {t['gpu_skipped']}; bench {'ok' if record['bench'] else 'FAILED'}")
    sys.exit(1 if rc != 0 or bench.returncode != 0 else 0)


if __name__ == "__main__":
    main()
