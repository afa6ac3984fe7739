"""Shared test setup of both suites (tests/ and the emulator's own, tools/gfx950_emu/tests/, pytest.ini's testpaths):
the markers of tests/markers.py registered, the gpu rule (skip where no GPU is visible, fail where one is but a gpu
test cannot run), and fresh random generators whose seed each failing test's captured output names."""
import glob
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tests"))  # markers and the shared test modules
import markers  # noqa: E402


def _no_gpu_reason():
    """None when CuPy sees an NVIDIA GPU, else why not."""
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # ImportError, or CUDARuntimeError without a driver or device
        return f"no NVIDIA GPU usable through CuPy ({type(e).__name__}: {e})"
    return None if count > 0 else "no NVIDIA GPU (CuPy sees 0 devices)"


def _gpu_visible():
    """Whether the machine shows an NVIDIA GPU, asked of the driver's device files rather than of CuPy."""
    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/proc/driver/nvidia/gpus/*"))


def pytest_configure(config):
    for name, description in markers.GROUPS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    reason = _no_gpu_reason() if gpu_items else None
    if reason is None:
        return
    visible = _gpu_visible()
    for item in gpu_items:
        if visible:
            item.stash[_UNUSABLE] = reason
        else:
            item.add_marker(pytest.mark.skip(reason=reason))


_UNUSABLE = pytest.StashKey[str]()


def pytest_runtest_setup(item):
    if _UNUSABLE in item.stash:
        pytest.fail(f"a GPU is visible (/dev/nvidia*) but this gpu test cannot use it: {item.stash[_UNUSABLE]}")


def _skip_reason(report):
    longrepr = report.longrepr
    return longrepr[2].removeprefix("Skipped: ") if isinstance(longrepr, tuple) else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """On a machine with a GPU, a test file skipped as a whole (a module it needs is missing) is a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(collector, pytest.Module) and _gpu_visible():
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid} was skipped as a whole on a machine with a GPU: "
                           f"{_skip_reason(report)}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a machine with a GPU, a gpu test that skips is a failure, but for a missing peer (markers.PEER_SKIPS) or too
    few GPUs (markers.HARDWARE_SKIPS)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and "gpu" in item.keywords and _gpu_visible():
        reason = _skip_reason(report)
        if reason not in markers.PEER_SKIPS + markers.HARDWARE_SKIPS:
            report.outcome = "failed"
            report.longrepr = f"a gpu test skipped on a machine with a GPU: {reason}"


@pytest.fixture
def rng_seed():
    """(generator, seed): a fresh seed every run, printed so that a failure can be replayed."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"seed={seed}")
    return np.random.default_rng(seed), seed


@pytest.fixture
def rng(rng_seed):
    """A generator with a fresh, printed seed."""
    return rng_seed[0]
