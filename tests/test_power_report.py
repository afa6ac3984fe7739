"""The power tool's sampling and summary (tools/power_report.py, CPU only)."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import power_report  # noqa: E402


def test_parse_samples_keeps_whole_lines_only():
    text = ("power.draw [W], clocks.current.sm [MHz], clocks_event_reasons.active\n"
            "671.20, 1695, 0x0000000000000004\n"
            "[N/A], 1695, 0x0000000000000004\n"
            "655.00, 1710, 0x0000000000000000\n"
            "660.1, 17")
    assert power_report.parse_samples(text) == [(671.2, 1695.0, 4), (655.0, 1710.0, 0)]


def test_summary_takes_medians_and_every_reason_seen():
    samples = [(600.0, 1800.0, 0x0), (700.0, 1600.0, 0x4), (650.0, 1700.0, 0x24)]
    s = power_report.summarize(samples, 2.0)
    assert (s["watts"], s["sm_mhz"], s["mj_per_call"]) == (650.0, 1700.0, 1300.0)
    assert s["reasons"] == ["software power cap", "software thermal slowdown"]
    assert power_report.reason_names(0x204) == ["software power cap", "0x200"]
    with pytest.raises(ValueError):
        power_report.summarize([], 1.0)


def test_markdown_ratios_are_fa3_over_ours_of_the_same_dtype():
    row = lambda ms, mj: {"ms_per_call": ms, "watts": 670.0, "sm_mhz": 1700.0, "mj_per_call": mj,
                          "reasons": ["software power cap"]}
    text = power_report.markdown({"16k": {"flashprefill fp8": row(2.0, 1400.0), "FA3 fp8": row(2.5, 1680.0),
                                          "flashprefill bf16": row(3.0, 2000.0)}}, "a GPU", 700.0)
    assert "| 16k | flashprefill fp8 | 2.000 | 670 | 1700 | 1400 | 1.25 | 1.20 | software power cap |" in text
    assert "| 16k | FA3 fp8 | 2.500 | 670 | 1700 | 1680 | — | — | software power cap |" in text
    assert "| 16k | flashprefill bf16 | 3.000 | 670 | 1700 | 2000 | — | — |" in text
