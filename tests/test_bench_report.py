"""The benchmark's report (tools/bench_report.py, CPU only): the ratio to FlashAttention-3 is taken round by round."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import bench_report  # noqa: E402


def _shape(name, ours_ms, fa3_ms, tflops=(900.0, 800.0)):
    def row(rounds, value):
        return {"tflops": value, "spread": 0.01, "back_to_back_tflops": value, "back_to_back_spread": 0.02,
                "round_medians_ms": rounds, "back_to_back_rounds_ms": rounds}
    return {"shape": name, "results": {"flashprefill fp8": row(ours_ms, tflops[0]), "FA3 fp8": row(fa3_ms, tflops[1]),
                                       "FA3 bf16": {"unavailable": "not in this test"}}}


def test_paired_ratio_is_the_median_of_per_round_ratios():
    # A drift that slows both peers in round 2 cancels in the pairs: ratios 1.2, 1.0, 1.1.
    shape = _shape("s", [1.0, 2.0, 3.0], [1.2, 2.0, 3.3])
    median, low, high = bench_report.paired_ratio(shape["results"], "flashprefill fp8", "FA3 fp8", "round_medians_ms")
    assert (round(median, 6), round(low, 6), round(high, 6)) == (1.1, 1.0, 1.2)
    # the ratio of the column medians would say 2.0 / 2.0 = 1.0
    assert bench_report.paired_ratio(shape["results"], "flashprefill bf16", "FA3 bf16", "round_medians_ms") is None


def test_markdown_has_the_ratio_table_and_the_unavailable_peers():
    text = bench_report.markdown([_shape("hd128 16k", [1.0, 2.0, 3.0], [1.2, 2.0, 3.3])], "a GPU")
    assert "| hd128 16k | 1.10 [1.00, 1.20] | 1.10 [1.00, 1.20] | — | — | — | — | — | — | — | — | — | — |" in text
    assert "| shape | fp8 fp32 scores per call | fp8 fp32 scores back to back | fp8 fp32 scores V prepared per call |" in text
    assert "| hd128 16k | 900 ±1% | 800 ±1% | — |" in text
    assert "- hd128 16k, FA3 bf16: not in this test" in text
