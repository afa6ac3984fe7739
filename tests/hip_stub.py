"""Builds tests/hip_stub.c, the stand-in libamdhip64.so that lets the gfx950 library load and launch on a machine
without ROCm (it records the launches instead of running them)."""
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]


def build(directory):
    """Compiles the stub into directory/libamdhip64.so (its soname, which the library dlopens); returns directory,
    for a child process's LD_LIBRARY_PATH."""
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libamdhip64.so", "-o",
                    str(pathlib.Path(directory) / "libamdhip64.so"), str(ROOT / "tests" / "hip_stub.c")], check=True)
    return directory
