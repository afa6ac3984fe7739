"""tools/bench_hf.py's report without a GPU (torch and transformers are imported by its main() only): the FLOPs it
counts, the markdown table and the rows it appends to the records (tools/records.py, hf_rows)."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import bench_hf  # noqa: E402
import records  # noqa: E402

RUN = ("2026-12-01", "abc1234", "a GPU", "bench_hf")


def test_flops_of_one_token_are_twice_the_layers_weights():
    # Llama-3.1-8B: 8,030,261,248 parameters, of which the embedding and the lm_head 128256 x 4096 each and the
    # norms 65 x 4096; one token's prefill multiplies every layer weight once (2 FLOPs), sees one key per layer and
    # head (2 x 128 x 2 for q.k and p.v, halved for causal: 2 x 128), and makes one position's logits
    layer_weights = 8_030_261_248 - 2 * 128256 * 4096 - 65 * 4096
    assert bench_hf.prefill_flops(bench_hf.CONFIG, 1) == 2 * layer_weights + 32 * 32 * 2 * 128 + 2 * 4096 * 128256


def _timed(rounds_ms, tokens, **accuracy):
    median = sorted(rounds_ms)[len(rounds_ms) // 2]
    return {"median_ms": median, "spread": (max(rounds_ms) - min(rounds_ms)) / median, "round_medians_ms": rounds_ms,
            "tokens_per_s": tokens / median * 1e3, **accuracy}


def _record(fa3):
    results = {bench_hf.SDPA: _timed([200.0, 210.0, 205.0], 4096, reference=True),
               bench_hf.FA3: _timed([100.0, 105.0, 110.0], 4096, logits_rel_l2=4e-3, top1_agreement=0.96) if fa3
               else {"unavailable": "fa3_fwd not installed"},
               bench_hf.OURS_BF16: _timed([100.0, 100.0, 100.0], 4096, logits_rel_l2=4e-3, top1_agreement=0.96),
               bench_hf.OURS_FP8: _timed([80.0, 84.0, 88.0], 4096, logits_rel_l2=2e-2, top1_agreement=0.84)}
    return {"model": bench_hf.MODEL, "layers": 32, "device": "a GPU", "rounds": 3, "launches": 2, "commit": "abc1234",
            "lengths": [{"shape": "Llama-3.1-8B 32L 4k b1", "tokens": 4096, "results": results}]}


@pytest.mark.parametrize("fa3", [True, False])
def test_rows_pair_flashprefill_with_each_peer_round_by_round(fa3):
    rows = records.hf_rows(_record(fa3), RUN)
    pairs = {(r["ours"], r["peer"], r["metric"]): r for r in rows}
    peers = (bench_hf.FA3, bench_hf.SDPA) if fa3 else (bench_hf.SDPA,)
    expected = {(o, p, records.PREFILL) for o in (bench_hf.OURS_BF16, bench_hf.OURS_FP8) for p in peers}
    if fa3:  # the logits' errors against FA3's, both measured against SDPA's
        expected |= {(o, bench_hf.FA3, m) for o in (bench_hf.OURS_BF16, bench_hf.OURS_FP8)
                     for m in (records.LOGITS_ERROR, records.TOP1)}
    assert set(pairs) == expected
    sdpa = pairs[bench_hf.OURS_FP8, bench_hf.SDPA, records.PREFILL]
    assert (sdpa["ratio"], sdpa["ratio_min"], sdpa["ratio_max"]) == (2.5, 2.33, 2.5)  # 200/80, 210/84, 205/88
    assert sdpa["ours_value"] == round(4096 / 84.0 * 1e3, -1) and sdpa["shape"] == "Llama-3.1-8B 32L 4k b1"
    if fa3:
        assert pairs[bench_hf.OURS_FP8, bench_hf.FA3, records.LOGITS_ERROR]["ratio"] == 5.0
        assert pairs[bench_hf.OURS_FP8, bench_hf.FA3, records.TOP1]["ratio"] == 0.875


def test_markdown_has_a_row_per_length_and_backend():
    table = bench_hf.markdown(_record(fa3=False))
    lines = table.splitlines()
    assert lines[0].startswith("Llama-3.1-8B (32 layers") and lines[2].startswith("| tokens | backend |")
    rows = {line.split(" | ")[1]: line for line in lines[4:]}
    assert set(rows) == set(bench_hf.BACKENDS)
    assert "unavailable: fa3_fwd not installed" in rows[bench_hf.FA3]
    assert "| reference | reference |" in rows[bench_hf.SDPA]
    assert "| 84.0 | 9.5% | 48,762 | 2.44× | - | 2.000e-02 | 84.00% |" in rows[bench_hf.OURS_FP8]
