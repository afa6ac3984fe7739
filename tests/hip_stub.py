"""Builds tests/hip_stub.c, the stand-in libamdhip64.so that lets the gfx950 library load and launch on a machine
without ROCm (it records the launches instead of running them), and the C probes that call the library on it;
runs a command with the stub on its library path."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]


def build(directory):
    """Compiles the stub into directory/libamdhip64.so (its soname, which the library dlopens); returns directory,
    for a child process's LD_LIBRARY_PATH."""
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libamdhip64.so", "-o",
                    str(pathlib.Path(directory) / "libamdhip64.so"), str(ROOT / "tests" / "hip_stub.c")], check=True)
    return directory


def run(directory, args, **env):
    """The stdout of `args` run with the stub built in `directory` on its library path (and `env` beside it); a
    failing command raises with its output."""
    return subprocess.run([str(a) for a in args], env={**os.environ, "LD_LIBRARY_PATH": str(directory), **env},
                          capture_output=True, text=True, check=True).stdout


def stand_in_address(i):
    """The probes' i-th fake device address (their address(i)): distinct, 2^36 apart, never dereferenced."""
    return (0x7F0 + i) << 36


def build_probe(directory, source, library):
    """Compiles tests/<source> (a probe calling the library at `library` from C, with the header's own params) into
    directory/probe; returns its path."""
    probe = pathlib.Path(directory) / "probe"
    subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", f"-I{ROOT / 'include'}", "-o", str(probe),
                    str(ROOT / "tests" / source), str(library), "-ldl", f"-Wl,-rpath,{pathlib.Path(library).parent}"],
                   check=True)
    return probe
