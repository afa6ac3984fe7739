"""The groups of tests (pytest markers) and the reasons a test may skip, each named once; conftest.py registers the
groups and enforces the GPU rule.

Select a group with -m: `-m gpu` (the Hopper suites, through CuPy), `-m emulator` (gfx950 code objects run in
tools/gfx950_emu: most of CI's time), `-m "not gpu and not emulator"` (the quick host tests).

A gpu test skips only where no GPU is visible. On a machine that shows one (/dev/nvidia*), a gpu test that cannot
run (no CuPy, a CuPy that sees no device, a file skipped as a whole) fails instead; the one skip allowed there is
PEER_SKIPS': a comparison with another library's kernel (torch's SDPA, FlashAttention-3) where that library is
missing, taken after every other check of the test has passed.
"""
import importlib.util
import pathlib
import shutil

import pytest

GROUPS = {
    "gpu": "needs an NVIDIA Hopper GPU through CuPy: skipped where none is visible, failed where one is visible but "
           "the test cannot run",
    "emulator": "runs gfx950 code objects in the functional emulator (tools/gfx950_emu); needs llvm-22",
}

LLVM22_TOOLS = ("clang-22", "ld.lld-22", "llvm-objdump-22", "llvm-readelf-22")
needs_llvm22 = pytest.mark.skipif(any(shutil.which(tool) is None for tool in LLVM22_TOOLS),
                                  reason="needs clang-22, ld.lld-22, llvm-objdump-22 and llvm-readelf-22 "
                                         "(apt-get install clang-22 lld-22 llvm-22)")

# The gfx950 library's clean NO_DEVICE where ROCm is absent can only be seen where it is absent.
without_hip_runtime = pytest.mark.skipif(
    any(pathlib.Path(d, "libamdhip64.so").exists() for d in ("/opt/rocm/lib", "/usr/lib")),
    reason="a HIP runtime is installed here")

NO_CUPY = "CuPy is not installed: the GPU suites run through it (pip install cupy-cuda13x)"
NO_TORCH = "torch is not installed: the comparison with torch's SDPA did not run (every other check passed)"
NO_FA3 = "FlashAttention-3 (fa3_fwd) is not installed: the comparison with its fp8 error did not run (every other " \
         "check passed)"
NO_TORCH_INPUTS = "torch is not installed: torch tensors as inputs were not tried"
PEER_SKIPS = (NO_TORCH, NO_FA3, NO_TORCH_INPUTS)


def torch_or_skip(reason=NO_TORCH):
    """torch, or a skip with `reason` (one of PEER_SKIPS) where it is not installed."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip(reason)
    import torch
    return torch
