"""The groups of tests (pytest markers) and the reasons a test may skip, each named once; conftest.py registers the
groups and enforces the GPU rule.

Select a group with -m: `-m gpu` (the Hopper suites, through CuPy), `-m emulator` (gfx950 code objects run in
tools/gfx950_emu: most of CI's time), `-m "not gpu and not emulator"` (the quick host tests).

A gpu test skips only where no GPU is visible. On a machine that shows one (/dev/nvidia*), a gpu test that cannot
run (no CuPy, a CuPy that sees no device, a file skipped as a whole) fails instead; the one skip allowed there is
PEER_SKIPS': a comparison with another library's kernel (torch's SDPA, FlashAttention-3) where that library is
missing, taken after every other check of the test has passed; and HARDWARE_SKIPS': a test that needs more GPUs than
the machine shows.
"""
import importlib.util
import os
import pathlib
import shutil

import pytest

GROUPS = {
    "gpu": "needs an NVIDIA Hopper GPU through CuPy: skipped where none is visible, failed where one is visible but "
           "the test cannot run",
    "emulator": "runs gfx950 code objects in the functional emulator (tools/gfx950_emu); needs llvm-22",
    "wheel": "builds a wheel with pip (make: a no-op after `make all amd`, minutes from a clean tree) and installs it "
             "into a fresh venv; needs nvcc",
}

_PACKAGES = {"clang-22": "clang-22", "ld.lld-22": "lld-22", "llvm-objdump-22": "llvm-22", "llvm-readelf-22": "llvm-22",
             "llvm-mc-22": "llvm-22", "llc-22": "llvm-22", "make": "make"}


def needs_tools(*tools):
    """Skip unless every one of `tools` is on PATH; the reason names them and the Debian packages that hold them."""
    packages = " ".join(dict.fromkeys(_PACKAGES[tool] for tool in tools))
    return pytest.mark.skipif(any(shutil.which(tool) is None for tool in tools),
                              reason=f"needs {', '.join(tools)} (apt-get install {packages})")


needs_llvm22 = needs_tools("clang-22", "ld.lld-22", "llvm-objdump-22", "llvm-readelf-22")  # make amd, the emulator
needs_objdump22 = needs_tools("llvm-objdump-22")  # AMD's code objects, read from the amd-aiter wheel
needs_llvm_mc22 = needs_tools("llvm-objdump-22", "llvm-mc-22")  # the decoder against LLVM
needs_llc22 = needs_tools("llc-22")  # the hazard table against LLVM's
needs_assembler22 = needs_tools("llvm-mc-22", "clang-22", "ld.lld-22")  # tools/gfx950_mutate.py
needs_rebuild22 = needs_tools("clang-22", "ld.lld-22", "llvm-objdump-22")  # mutated kernels assembled and run
needs_make = needs_tools("make")
NO_CC = "no C compiler (cc): the C probes and the HIP stub are built at test time (apt-get install gcc)"
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason=NO_CC)
NO_CXX = "no C++ compiler (c++): the header is compiled as C++ too (apt-get install g++)"
NO_NVCC = "no nvcc (PATH, or NVCC): pip builds the wheel's Hopper library with it"
NO_GFX950_ASSEMBLER = "no gfx950 assembler (clang-22 and ld.lld-22, or ROCm's): the wheel holds no gfx950 library"


def rocm_present(arch, library):
    """The skip reason of a test of the refusal on a machine without ROCm, where this one has it."""
    return f"this machine has a ROCm {arch} through {library}: the refusal without one is not what runs here"


def _aiter_gfx950():
    spec = importlib.util.find_spec("aiter_meta")
    return None if spec is None or not spec.submodule_search_locations else \
        pathlib.Path(list(spec.submodule_search_locations)[0], "hsa", "gfx950")


AITER_GFX950 = _aiter_gfx950()  # the amd-aiter wheel's gfx950 code objects, or None
AITER_TESTED = "0.1.7.post2.dev18"  # .ci/run pins it: the tests pack each kernel's arguments from its structs
needs_aiter = pytest.mark.skipif(AITER_GFX950 is None,
                                 reason="needs the amd-aiter wheel (pip install --no-deps amd-aiter)")


# AMD's fp8 fmha_v3 forward objects are in AMD's aiter repository (hsa/gfx950/fmha_v3_fwd/, from commit e4048607a5
# on), not in the wheel: the folder this variable names holds fwd_hd128_fp8.co and fwd_hd128_fp8_causal.co.
AITER_FP8_VARIABLE = "FLASHPREFILL_AITER_FP8"
AITER_FP8 = pathlib.Path(os.environ[AITER_FP8_VARIABLE]) if os.environ.get(AITER_FP8_VARIABLE) else None
needs_aiter_fp8 = pytest.mark.skipif(
    AITER_FP8 is None, reason=f"AMD's fp8 fmha_v3 forward objects are not in the amd-aiter wheel: set "
    f"{AITER_FP8_VARIABLE} to a folder holding fwd_hd128_fp8.co and fwd_hd128_fp8_causal.co from AMD's aiter "
    f"repository (hsa/gfx950/fmha_v3_fwd/, commit e4048607a5)")


def no_aiter_object(relative):
    """The skip reason where this amd-aiter lacks hsa/gfx950/<relative>."""
    return f"this amd-aiter has no {relative} (tested with {AITER_TESTED})"


def aiter_arguments_differ(name, declared_bytes, packed_bytes):
    """The skip reason where this amd-aiter's kernel takes other arguments than those we pack."""
    return f"{name} takes {declared_bytes} bytes of arguments in this amd-aiter, our packing {packed_bytes}"


# The gfx950 library's clean NO_DEVICE where ROCm is absent can only be seen where it is absent.
without_hip_runtime = pytest.mark.skipif(
    any(pathlib.Path(d, "libamdhip64.so").exists() for d in ("/opt/rocm/lib", "/usr/lib")),
    reason="a HIP runtime is installed here")

NO_CUPY = "CuPy is not installed: the GPU suites run through it (pip install cupy-cuda13x)"
NO_TORCH = "torch is not installed: the comparison with torch's SDPA did not run (every other check passed)"
NO_FA3 = "FlashAttention-3 (fa3_fwd) is not installed: the comparison with its fp8 error did not run (every other " \
         "check passed)"
NO_CUOBJDUMP = "no cuobjdump (pip install nvidia-cuda-cuobjdump)"
NO_KERNEL_BUILT = "this build has no kernel for the candidate shapes yet"
NO_TORCH_INPUTS = "torch is not installed: torch tensors as inputs were not tried"
NO_TRANSFORMERS = "torch and transformers are not installed: the Hugging Face integration runs inside a transformers " \
                  "model"
TRANSFORMERS_INSTALLED = "transformers is installed here: the refusal without it is not what runs here"
PEER_SKIPS = (NO_TORCH, NO_FA3, NO_TORCH_INPUTS)
NO_TORCH_DISTRIBUTED = "torch is not installed: the ring over torch.distributed (gloo, on the host) did not run; " \
                       "test_context_parallel.py runs it on threads"
NO_TORCH_TOOLS = "torch is not installed: the torch-based tools' host pieces (tools/one_launch.py) were not tried"
FEWER_GPUS = "fewer GPUs are visible than the ring has ranks: the multi-GPU run did not run " \
             "(test_context_parallel_gpu.py runs the algorithm on one GPU)"
HARDWARE_SKIPS = (FEWER_GPUS,)  # a gpu test that needs more GPUs than the machine has


def torch_or_skip(reason=NO_TORCH):
    """torch, or a skip with `reason` (one of PEER_SKIPS) where it is not installed."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip(reason)
    import torch
    return torch
