"""`make amd` picks its gfx950 assembler and linker: clang-22 / ld.lld-22 when they are on PATH, else ROCm's own
LLVM under ROCM_PATH (default /opt/rocm). Checked by dry runs (`make -n`) with a PATH of stub executables and a
fake ROCm tree, into a fresh build directory so that every code object's commands are printed."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
AMD_SOURCES = sorted((ROOT / "asm" / "gfx950").glob("*.s"))

pytestmark = markers.needs_make


def _stub(path: pathlib.Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(0o755)


def _dry_run(tmp_path, path_dirs, rocm_path=None):
    """The commands `make -n amd` prints with PATH = path_dirs (and ROCM_PATH when given)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROCM_PATH", "CLANG_AMD", "LLD_AMD")}
    env["PATH"] = ":".join(str(d) for d in path_dirs)
    args = [MAKE, "-n", "amd", f"BUILD={tmp_path / 'build'}"] + ([f"ROCM_PATH={rocm_path}"] if rocm_path else [])
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout


def _tools(commands):
    """(assemblers, linkers) the code object rules run."""
    assemble = re.findall(r"^(\S+) -target amdgcn-amd-amdhsa", commands, re.M)
    link = re.findall(r"^(\S+) -shared \S+\.o -o \S+\.co$", commands, re.M)
    return set(assemble), set(link), len(assemble), len(link)


@pytest.mark.parametrize("rocm_path", [None, "fake"])
def test_rocm_llvm_without_clang22_on_path(tmp_path, rocm_path):
    rocm = tmp_path / "rocm" if rocm_path else pathlib.Path("/opt/rocm")
    for tool in ("clang", "ld.lld"):
        _stub(tmp_path / "rocm" / "llvm" / "bin" / tool)
    bin_dir = tmp_path / "bin"
    for tool in ("cc", "nvcc", "clang", "ld.lld", "clang-21"):   # anything but clang-22 / ld.lld-22
        _stub(bin_dir / tool)
    commands = _dry_run(tmp_path, [bin_dir], tmp_path / "rocm" if rocm_path else None)
    assert _tools(commands) == ({f"{rocm}/llvm/bin/clang"}, {f"{rocm}/llvm/bin/ld.lld"}, len(AMD_SOURCES),
                                len(AMD_SOURCES))
    assert "clang-22" not in commands and "ld.lld-22" not in commands


def test_llvm22_on_path_wins_over_rocm(tmp_path):
    for tool in ("clang", "ld.lld"):
        _stub(tmp_path / "rocm" / "llvm" / "bin" / tool)
    first, second = tmp_path / "bin1", tmp_path / "bin2"
    _stub(first / "cc")
    _stub(second / "clang-22")
    _stub(second / "ld.lld-22")
    commands = _dry_run(tmp_path, [first, second], tmp_path / "rocm")
    assert _tools(commands) == ({"clang-22"}, {"ld.lld-22"}, len(AMD_SOURCES), len(AMD_SOURCES))
    assert str(tmp_path / "rocm") not in commands
