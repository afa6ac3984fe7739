"""tools/gfx950_predict.py's bookkeeping, without the emulator: which keys each workgroup visits, the order the
hardware starts them in, the list schedule onto CUs and the calibration's least squares; and, where AMD's fp8 objects
are given (markers.AITER_FP8), one timed fit of them."""
import pathlib
import sys

import numpy as np
import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gfx950_predict as predict  # noqa: E402
from gfx950_emu.timing_params import value  # noqa: E402

RNG = np.random.default_rng()


@pytest.mark.parametrize("precision, tile", [("bf16", 32), ("fp8", 64)])
def test_our_causal_workgroups_see_keys_up_to_their_last_query(precision, tile):
    seqlen = int(RNG.integers(513, 2000))
    keys = predict.OURS[precision, 128].workgroups(seqlen)
    assert len(keys) == -(-seqlen // 256)
    for block, k in enumerate(keys):
        seen = min(seqlen, 256 * (block + 1))
        assert k == -(-seen // tile) * tile


def test_aiter_causal_pairs_a_short_and_a_long_tile():
    tiles = int(RNG.integers(3, 40))
    keys = predict.AITER[128, True].workgroups(256 * tiles)
    assert len(keys) == (tiles + 1) // 2
    # tiles i and T - 1 - i: 256 (i + 1) + 256 (T - i) keys, the middle tile of an odd T alone
    assert keys[0] == 256 * (tiles + 1)
    assert keys[-1] == (256 * (tiles + 1) if tiles % 2 == 0 else 256 * (tiles + 1) // 2)


def test_ours_start_longest_first_within_a_batch():
    heads, batch, seqlen = int(RNG.integers(2, 6)), 2, 256 * int(RNG.integers(2, 9))
    kernel = predict.OURS["bf16", 128]
    order = predict.dispatch_order(kernel, seqlen, heads, batch)
    per_batch = len(order) // batch
    assert order[:per_batch] == order[per_batch:]
    assert order[:per_batch] == sorted(order[:per_batch], reverse=True)
    assert predict.dispatch_order(kernel, seqlen, heads, batch, grid_order=True) == kernel.workgroups(seqlen) * (
        heads * batch)


def test_list_schedule_bounds():
    kernel = predict.OURS["fp8", 128]
    a, b = float(RNG.uniform(1000, 9000)), float(RNG.uniform(10, 60))
    heads, seqlen = int(RNG.integers(1, 64)), 256 * int(RNG.integers(1, 64))
    work = [a + b * k for k in predict.dispatch_order(kernel, seqlen, heads, 1)]
    cycles = predict.problem_cycles(kernel, (a, b), 1, seqlen, heads)
    assert max(max(work), sum(work) / value("cus")) <= cycles <= sum(work) / value("cus") + max(work)


def test_calibration_recovers_clock_and_overhead():
    clock, overhead = float(RNG.uniform(1.2, 2.4)), float(RNG.uniform(0, 10))
    cycles = RNG.uniform(1e4, 1e7, 3)
    points = [(c, c / (clock * 1e9) + overhead * 1e-6) for c in cycles]
    np.testing.assert_allclose(predict.calibrate(points), (clock, overhead), rtol=1e-6, atol=1e-6)


def test_published_figures_are_fitted_and_held_out():
    used = [in_fit for *_, in_fit, _ in predict.PUBLISHED]
    assert any(used) and not all(used)
    assert all(where.startswith("github.com/") for *_, where in predict.PUBLISHED)


@markers.needs_aiter_fp8
def test_aiter_fp8_fit_above_the_mfma_floor():
    """AMD's fp8 causal kernel timed on small problems: a workgroup's cycles per key at least its MFMA work on one
    SIMD's pipe (two waves of 32 queries x 128 dims, S and P.V, at 8192 / 4 fp8 flop per cycle), and a positive
    fixed cost."""
    kernel = predict.Kernel("fmha_fwd_hd128_fp8_causal", "aiter", "fp8", 128, True, markers.AITER_FP8)
    a, b = predict.fit(kernel, seed=int(RNG.integers(1 << 31)))
    mfma_floor_per_key = 2 * 4 * 32 * 128 / (value("fp8_flop_per_cycle_per_cu") / value("simds_per_cu"))
    assert b >= mfma_floor_per_key and a > 0
