"""The array plumbing of tools/mi355x_device.py on an NVIDIA GPU: its torch and CuPy backends are the same code on
CUDA and ROCm builds of those libraries (only detect()'s ROCm and gfx950 checks and the aiter launcher differ), so
the round trips of every dtype the check moves, the poisoned outputs and the event clock can be checked here before
anyone has an MI355X; and the device path of the merge_state and varlen_check cases (library_call, the verdict read
through flashprefill_workspace_error, the judgement) through the Hopper library, whose merge_state and varlen check
follow the same ABI, bounds and rule. Nothing in this file touches an AMD GPU."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import mi355x_cases  # noqa: E402
import mi355x_check  # noqa: E402
import mi355x_device  # noqa: E402
import timing  # noqa: E402

pytestmark = pytest.mark.gpu


def _host_arrays(rng):
    x = rng.standard_normal((3, 70, 2, 32)).astype(np.float32)
    return [x.astype(ml_dtypes.bfloat16), x.astype(ml_dtypes.float8_e4m3fn), x,
            rng.integers(-128, 128, (5, 9), dtype=np.int8), rng.integers(0, 1 << 30, (17,), dtype=np.int32)]


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_round_trips_poison_and_clock(library, rng):
    if library == "cupy":
        import cupy
        backend = mi355x_device.Cupy(cupy, 0)
    else:
        backend = mi355x_device.Torch(markers.torch_or_skip(markers.NO_TORCH_INPUTS), 0)
    assert backend.library == "cuda"  # the flashprefill library workspace_verdict asks
    for x in _host_arrays(rng):
        device_array = backend.to_device(x)
        assert backend.pointer(device_array) != 0
        back = backend.to_host(device_array)
        assert back.dtype == x.dtype and back.shape == x.shape
        assert np.array_equal(back.view(np.uint8), x.view(np.uint8)), x.dtype
    for dtype, bits in (("bfloat16", 0x7FC0), ("float8_e4m3fn", 0x7F), ("int8", 0x80), ("float32", 0x7FC00000)):
        poisoned = backend.to_host(mi355x_check._poisoned(backend, (4, 3), dtype))
        view = {"bfloat16": np.uint16, "float32": np.uint32}.get(dtype, np.uint8)
        assert (poisoned.view(view) == bits).all(), dtype
    work = backend.to_device(np.ones((1 << 20,), np.float32))
    milliseconds = timing.time_launches(backend.clock, lambda: work * 2, 3)
    assert all(0 < t < 1e3 for t in milliseconds) and isinstance(backend.stream(), int)
    with pytest.raises(mi355x_device.Refusal, match="not an MI355X|ROCm"):
        mi355x_device.detect(0)  # an NVIDIA device is refused by name, or its CUDA libraries are


# the check's cases, and merge_state's up to 37 rows: the host's float64 judgement takes a second or less each
HOPPER_CASES = [c for c in mi355x_cases.all_cases()
                if c.form == "varlen_check" or (c.form.startswith("merge_state") and c.longest <= 37)]


@pytest.mark.parametrize("case", HOPPER_CASES, ids=[c.name for c in HOPPER_CASES])
def test_case_through_the_hopper_library(case, rng):
    """mi355x_check.run_case on CuPy arrays and the Hopper library: every check of merge_state within
    merge_state_bounds (every backend's); the check's verdict read back equal to the rule's, out and lse all NaN at
    fault, and where the arrays are valid out and lse within 10x the gfx950 forward's bounds (not Hopper's to meet:
    what is checked is that the values written are the attention's, where the poison (1000) is far outside)."""
    import cupy
    import flashprefill
    backend = mi355x_device.Cupy(cupy, 0)
    args = mi355x_check.parse(["--rounds", "1", "--launches", "2", "--idle-s", "0", "--no-aiter"])
    record = mi355x_check.run_case(case, args, backend, flashprefill, rng, None, None)
    assert "error" not in record and record["timing"]["flashprefill"]["median_ms"] > 0, record
    checks = {c["what"]: c for c in record["checks"]}
    if case.form == "varlen_check" and "out NaN after the fault" not in checks:
        assert checks.pop("verdict")["ok"], record
        assert checks and all(c["error"] <= 10 * c["bound"] for c in checks.values()), record
    else:
        assert record["ok"], record
