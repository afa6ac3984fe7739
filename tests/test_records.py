"""The records file (tools/records.py, CPU only): what the benchmark, power and accuracy tools append to
bench/records.csv, and that appending keeps every earlier row."""
import csv
import pathlib
import random
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import records  # noqa: E402

RUN = ("2026-12-01", "abc1234", "a GPU", "bench")


def _timing(rounds_ms, dtype):
    median = sorted(rounds_ms)[len(rounds_ms) // 2]
    return {"dtype": dtype, "tflops": 1.0 / median, "spread": (max(rounds_ms) - min(rounds_ms)) / median,
            "round_medians_ms": rounds_ms, "back_to_back_tflops": 1.0 / median, "back_to_back_spread": 0.0,
            "back_to_back_rounds_ms": rounds_ms}


def _bench(ours_ms, fa3_ms):
    return {"shapes": [{"shape": "hd128 16k", "results": {
        "flashprefill fp8": _timing(ours_ms, "fp8"), "flashprefill fp8, fp16 scores": _timing(ours_ms, "fp8"),
        "FA3 fp8": _timing(fa3_ms, "fp8"), "flashprefill bf16": _timing(ours_ms, "bf16"),
        "FA3 bf16": {"dtype": "bf16", "unavailable": "not installed"}, "cuDNN fp8 (fp8 out)": _timing(fa3_ms, "fp8")}}]}


def test_bench_rows_pair_each_variant_with_fa3_round_by_round():
    # a drift that slows both in round 2 cancels in the pairs: per-round ratios 1.2, 1.0, 1.1
    rows = records.bench_rows(_bench([1.0, 2.0, 3.0], [1.2, 2.0, 3.3]), RUN)
    pairs = {(r["ours"], r["metric"]): r for r in rows}
    assert set(pairs) == {(o, m) for o in ("flashprefill fp8", "flashprefill fp8, fp16 scores")
                          for m in (records.PER_CALL, records.BACK_TO_BACK)}  # bf16's FA3 did not run
    r = pairs["flashprefill fp8", records.PER_CALL]
    assert (r["peer"], r["ratio"], r["ratio_min"], r["ratio_max"]) == ("FA3 fp8", 1.1, 1.0, 1.2)
    assert (r["date"], r["commit"], r["gpu"], r["tool"], r["shape"]) == RUN + ("hd128 16k",)


@pytest.mark.parametrize("appends", [1, 2, 3])
def test_append_writes_the_header_once_and_keeps_earlier_rows(tmp_path, appends):
    path = tmp_path / "records.csv"
    written = []
    for i in range(appends):
        ours = [random.uniform(1.0, 2.0) for _ in range(6)]
        rows = records.bench_rows(_bench(ours, [t * random.uniform(1.1, 1.4) for t in ours]),
                                  ("2026-12-0%d" % (i + 1),) + RUN[1:])
        assert records.append(rows, str(path)) == len(rows) > 0
        written += rows
    text = path.read_text()
    assert text.count("date,commit,gpu") == 1 and text.endswith("\n")
    back = records.read(str(path))
    assert len(back) == len(written)
    for got, want in zip(back, written):
        assert got == {k: str(v) for k, v in want.items()}
        assert 1.1 <= float(got["ratio"]) <= 1.4


def test_append_refuses_a_file_of_another_format(tmp_path):
    path = tmp_path / "records.csv"
    path.write_text("date,commit,ratio\n2026-11-30,abc,1.2\n")
    with pytest.raises(ValueError):
        records.append(records.bench_rows(_bench([1.0, 1.0], [1.2, 1.2]), RUN), str(path))
    assert path.read_text() == "date,commit,ratio\n2026-11-30,abc,1.2\n"
    assert records.append([], str(path)) == 0


def test_power_and_accuracy_rows():
    ms = lambda t: {"ms_per_call": t, "rounds": [{"ms_per_call": t * 0.99}, {"ms_per_call": t * 1.01}]}
    power = {"shapes": {"16k": {"flashprefill fp8, V prepared": ms(2.0), "FA3 fp8": ms(2.5),
                                "flashprefill bf16": ms(3.0), "FA3 bf16": ms(2.94)}}}
    rows = {r["ours"]: r for r in records.power_rows(power, {"16k": 4e12}.get, RUN)}
    assert rows["flashprefill fp8, V prepared"]["ratio"] == 1.25
    assert rows["flashprefill fp8, V prepared"]["ours_value"] == 2000.0  # 4e12 FLOP in 2 ms
    assert rows["flashprefill bf16"]["ratio"] == 0.98 and rows["flashprefill bf16"]["ours_spread"] == 0.02
    acc = {"seq": 4096, "heads": [8, 2], "dims": [128, 128], "rows": [
        {"dist": "normal", "peer": "flashprefill fp8", "dtype": "fp8", "end_to_end": 0.05, "kernel_only": 0.024},
        {"dist": "normal", "peer": "FA3 fp8", "dtype": "fp8", "end_to_end": 0.04, "kernel_only": 0.02},
        {"dist": "normal", "peer": "flashprefill fp8: rotation", "dtype": "fp8", "end_to_end": 0.01},
        {"dist": "normal", "peer": "FA3 bf16", "unavailable": "not installed"},
        {"dist": "normal", "peer": "flashprefill bf16", "dtype": "bf16", "end_to_end": 0.003}]}
    shape = records.accuracy_shape(acc)
    rows = records.accuracy_rows(acc, shape, RUN)
    assert shape == "hd128 8/2 4k"
    assert [(r["ours"], r["metric"], r["ratio"]) for r in rows] == [
        ("flashprefill fp8", records.ERROR, 1.25), ("flashprefill fp8", records.KERNEL_ERROR, 1.2),
        ("flashprefill fp8: rotation", records.ERROR, 0.25)]
    with open(ROOT / "bench" / "records.csv", newline="") as f:  # the repository's own file has this format
        assert tuple(next(csv.reader(f))) == records.COLUMNS
