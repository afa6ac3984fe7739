"""Shared test setup: the `gpu` marker, skipped with the reason where no NVIDIA GPU is usable; fresh random
generators whose seed each failing test's captured output names."""
import numpy as np
import pytest


def _no_gpu_reason():
    """None when CuPy sees an NVIDIA GPU, else why not."""
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # ImportError, or CUDARuntimeError without a driver or device
        return f"no NVIDIA GPU usable through CuPy ({type(e).__name__}: {e})"
    return None if count > 0 else "no NVIDIA GPU (CuPy sees 0 devices)"


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (skipped where CuPy sees none)")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    reason = _no_gpu_reason() if gpu_items else None
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


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
