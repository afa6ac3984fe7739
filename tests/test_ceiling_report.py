"""The ceiling record's analysis (tools/ceiling_report.py, CPU only): the best GEMM of each dtype, the pairs compared,
the fractions in the tables and the rows appended to the records file (records.varlen_rows: work per time, round
by round)."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import ceiling_report as report  # noqa: E402
import records  # noqa: E402

RUN = ("2026-12-01", "abc1234", "a GPU", "ceiling")
TFLOP = 1e12


def _result(kind, dtype, flops, rounds_ms):
    """A timed result of tools/timing.py's form, the same times per call and back to back."""
    median = sorted(rounds_ms)[len(rounds_ms) // 2]
    spread = (max(rounds_ms) - min(rounds_ms)) / median
    return {"kind": kind, "dtype": dtype, "flops": flops, "median_ms": median, "tflops": flops / median / 1e9,
            "spread": spread, "round_medians_ms": rounds_ms, "back_to_back_ms": median,
            "back_to_back_tflops": flops / median / 1e9, "back_to_back_spread": spread,
            "back_to_back_rounds_ms": rounds_ms}


def _record(fa3_installed=True):
    """Attention of 2 TFLOP causal (4 non-causal) at the TFLOP/s given, the loops and GEMMs faster; round 2 of 3 slower
    by half for all (a clock drift, which round-by-round ratios cancel; each spread 50%)."""
    drift = (1.0, 1.5, 1.0)
    gemms = {"fp8 slow": _result("gemm", "fp8", 8 * TFLOP, [4.0 * d for d in drift]),        # 2000 TFLOP/s
             "fp8 fast": _result("gemm", "fp8", 8 * TFLOP, [3.2 * d for d in drift]),        # 2500
             "bf16 only": _result("gemm", "bf16", 2 * TFLOP, [2.0 * d for d in drift]),      # 1000
             "refused": {"kind": "gemm", "dtype": "fp8", "unavailable": "torch refused it"}}
    best = report.best_gemms(gemms)
    groups = []
    for causal in (True, False):
        work = 2 * TFLOP if causal else 4 * TFLOP
        def timed(kind, dtype, tflops):
            return _result(kind, dtype, work, [work / tflops / 1e9 * d for d in drift])
        results = {report.loop_name("fp8_kv192"): timed("loop", "fp8", 2000),
                   report.loop_name("bf16_kv128"): timed("loop", "bf16", 800),
                   "flashprefill fp8": timed("attention", "fp8", 1600),
                   "flashprefill bf16": timed("attention", "bf16", 640),
                   "FA3 fp8": timed("attention", "fp8", 1000) if fa3_installed else
                   {"kind": "attention", "dtype": "fp8", "unavailable": "not installed"},
                   **gemms}
        groups.append({"shape": report.group_shape("hd128 32/8 16k", causal), "causal": causal, "results": results,
                       "pairs": report.pairs(results, best)})
    return {"date": RUN[0], "commit": RUN[1], "device": RUN[2], "gemms": gemms, "best_gemm": best, "groups": groups}


def test_best_gemm_of_each_dtype_by_back_to_back_speed():
    assert _record()["best_gemm"] == {"fp8": "fp8 fast", "bf16": "bf16 only"}


def test_each_attention_against_its_loop_and_best_gemm_each_loop_against_the_gemm():
    pairs = {(ours, peers[0]) for ours, peers in _record()["groups"][0]["pairs"]}
    assert pairs == {("flashprefill fp8", "wgmma loop fp8 kv192"), ("flashprefill fp8", "fp8 fast"),
                     ("FA3 fp8", "wgmma loop fp8 kv192"), ("FA3 fp8", "fp8 fast"),
                     ("flashprefill bf16", "wgmma loop bf16 kv128"), ("flashprefill bf16", "bf16 only"),
                     ("wgmma loop fp8 kv192", "fp8 fast"), ("wgmma loop bf16 kv128", "bf16 only")}


@pytest.mark.parametrize("fa3_installed", [True, False])
def test_records_rows_are_fractions_round_by_round(fa3_installed):
    rows = records.varlen_rows(_record(fa3_installed), RUN)
    by_pair = {(r["shape"], r["ours"], r["peer"], r["metric"]): r for r in rows}
    assert len(rows) == 2 * 2 * (8 if fa3_installed else 6)  # shapes x metrics x pairs
    # causal: fp8 attention at 1600 TFLOP/s, its loop at 2000, the fp8 GEMM at 2500, in every round
    r = by_pair["hd128 32/8 16k", "flashprefill fp8", "wgmma loop fp8 kv192", records.PER_CALL]
    assert (r["ratio"], r["ratio_min"], r["ratio_max"], r["ours_value"], r["peer_value"]) == (0.8, 0.8, 0.8, 1600,
                                                                                              2000)
    assert by_pair["hd128 32/8 16k non-causal", "flashprefill fp8", "fp8 fast", records.BACK_TO_BACK]["ratio"] == 0.64
    assert by_pair["hd128 32/8 16k", "wgmma loop bf16 kv128", "bf16 only", records.PER_CALL]["ratio"] == 0.8
    assert all(r["tool"] == "ceiling" for r in rows)


def test_markdown_names_every_ceiling_and_fraction():
    table = report.markdown(_record(fa3_installed=False))
    assert "| wgmma loop fp8 kv192 | 2000 ±50% / 2000 ±50% | 2000 ±50% / 2000 ±50% |" in table
    assert "| **fp8 fast** | 2500 ±50% / 2500 ±50% |" in table and "| fp8 slow |" in table
    assert "| flashprefill fp8 | 1600 ±50% / 1600 ±50% | 0.80 / 0.80 | 0.64 / 0.64 |" in table
    assert "| FA3 fp8 | — | — | — |" in table
    assert "- FA3 fp8, causal: not installed" in table and "- refused: torch refused it" in table
