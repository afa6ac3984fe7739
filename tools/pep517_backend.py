"""The build backend of `pip install .` and `pip wheel .` (pyproject.toml names it; PEP 517 and PEP 660 hooks).

A wheel holds python/flashprefill and the libraries that `make` builds, each as its SONAME file under
flashprefill/lib/ (a wheel cannot hold the build/ links): the Hopper library always (nvcc), the gfx950 one where an
assembler for it is found (clang-22 / ld.lld-22 on PATH, or ROCm's under ROCM_PATH, as the Makefile picks them);
without one the build says so and goes on. The version is the header's FLASHPREFILL_VERSION_*, its one home; the
rest of the metadata is pyproject.toml's [project] table. Standard library only, so that no build requirement has
to be fetched (but tomli on Python 3.10).
"""
import base64
import hashlib
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = ROOT / "include" / "flashprefill.h"
PACKAGE = ROOT / "python" / "flashprefill"
BUILD = ROOT / "build"
HOPPER_LIBRARY = "libflashprefill.so"
GFX950_LIBRARY = "libflashprefill_gfx950.so"
# What an sdist holds: everything `make` and this backend read, and the README its metadata names.
SDIST_PATHS = ("pyproject.toml", "README.md", "Makefile", "include", "src", "cuda", "hip", "asm", "python",
               "tools/pep517_backend.py")
# The [project] keys written into METADATA; any other key fails the build rather than being dropped unseen.
PROJECT_KEYS = {"name", "dynamic", "description", "readme", "requires-python", "dependencies",
                "optional-dependencies"}
# Zip entries get this date (the zip format's earliest), so that one tree gives one wheel byte for byte.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def version(header_text):
    """"MAJOR.MINOR.PATCH" of the header's FLASHPREFILL_VERSION_* macros."""
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        found = re.findall(rf"^#define FLASHPREFILL_VERSION_{part} (\d+)$", header_text, re.M)
        if len(found) != 1:
            raise ValueError(f"the header defines FLASHPREFILL_VERSION_{part} {len(found)} times, not once")
        parts.append(str(int(found[0])))
    return ".".join(parts)


def project(pyproject_text):
    """The [project] table of pyproject.toml's text, checked to hold only keys that metadata() writes."""
    table = tomllib.loads(pyproject_text)["project"]
    unknown = set(table) - PROJECT_KEYS
    if unknown or table.get("dynamic") != ["version"]:
        raise ValueError(f"pyproject.toml [project]: keys {sorted(unknown)} are not written by this backend, or "
                         f"dynamic {table.get('dynamic')} is not ['version'] (the header holds the version)")
    return table


def metadata(table, version_string):
    """The METADATA file (core metadata 2.1) of `table` ([project]) at `version_string`."""
    lines = ["Metadata-Version: 2.1", f"Name: {table['name']}", f"Version: {version_string}",
             f"Summary: {table['description']}", f"Requires-Python: {table['requires-python']}"]
    lines += [f"Requires-Dist: {requirement}" for requirement in table["dependencies"]]
    for extra, requirements in table["optional-dependencies"].items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {requirement}; extra == \"{extra}\"" for requirement in requirements]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + (ROOT / table["readme"]).read_text()


def gfx950_toolchain(environ):
    """(assembler, linker) that `make amd` would run under `environ`, or None where either is missing."""
    rocm_llvm = pathlib.Path(environ.get("ROCM_PATH", "/opt/rocm"), "llvm", "bin")
    path = environ.get("PATH", "")
    clang = environ.get("CLANG_AMD") or shutil.which("clang-22", path=path) or str(rocm_llvm / "clang")
    lld = environ.get("LLD_AMD") or shutil.which("ld.lld-22", path=path) or str(rocm_llvm / "ld.lld")
    found = [shutil.which(tool, path=path) for tool in (clang, lld)]
    return tuple(found) if all(found) else None


def build_libraries():
    """Runs make for the Hopper library and, where its assembler is found, the gfx950 one; their SONAME files."""
    nvcc = os.environ.get("NVCC", "nvcc")
    if shutil.which(nvcc) is None:
        raise RuntimeError(f"flashprefill: {nvcc} not found (set NVCC or PATH): the Hopper library needs nvcc 12.8+")
    targets = ["all"]
    if gfx950_toolchain(os.environ):
        targets.append("amd")
    else:
        print("flashprefill: no gfx950 assembler (clang-22 and ld.lld-22 on PATH, or ROCm's clang and ld.lld under "
              "ROCM_PATH): building the Hopper library only", file=sys.stderr)
    jobs = [] if "MAKEFLAGS" in os.environ else [f"-j{len(os.sched_getaffinity(0))}"]
    subprocess.run(["make", "-C", str(ROOT), *jobs, *targets], check=True, stdout=sys.stderr)
    names = [HOPPER_LIBRARY] + ([GFX950_LIBRARY] if "amd" in targets else [])
    abi_major = version(HEADER.read_text()).split(".")[0]
    return [BUILD / f"{name}.{abi_major}" for name in names]


def package_files():
    """[(path in the wheel, file)] of the Python package: its modules (no caches, nothing a build left there)."""
    return [(f"flashprefill/{path.relative_to(PACKAGE).as_posix()}", path) for path in sorted(PACKAGE.rglob("*.py"))]


def _checkout_metadata(version_string):
    return metadata(project((ROOT / "pyproject.toml").read_text()), version_string).encode()


def _tag():
    """The wheel tag: any Python 3 (the libraries are loaded through ctypes), this machine's platform."""
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def _dist_info(version_string):
    """[(path in the wheel, bytes)] of the .dist-info folder, RECORD aside."""
    folder = f"flashprefill-{version_string}.dist-info"
    wheel = f"Wheel-Version: 1.0\nGenerator: flashprefill pep517_backend\nRoot-Is-Purelib: false\nTag: {_tag()}\n"
    return folder, [(f"{folder}/METADATA", _checkout_metadata(version_string)),
                    (f"{folder}/WHEEL", wheel.encode())]


def _write_wheel(directory, entries):
    """Writes a wheel of `entries` [(path in the wheel, bytes, executable)] and its RECORD; its file name."""
    version_string = version(HEADER.read_text())
    folder, info = _dist_info(version_string)
    entries = list(entries) + [(path, data, False) for path, data in info]
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for path, data, _ in entries] + [f"{folder}/RECORD,,"]
    entries.append((f"{folder}/RECORD", ("\n".join(record) + "\n").encode(), False))
    name = f"flashprefill-{version_string}-{_tag()}.whl"
    with zipfile.ZipFile(pathlib.Path(directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data, executable in entries:
            info = zipfile.ZipInfo(path, ZIP_DATE)
            info.external_attr = (0o755 if executable else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return name


# PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    folder, info = _dist_info(version(HEADER.read_text()))
    for path, data in info:
        pathlib.Path(metadata_directory, path).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(metadata_directory, path).write_bytes(data)
    return folder


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    libraries = [(f"flashprefill/lib/{path.name}", path.read_bytes(), True) for path in build_libraries()]
    modules = [(path, file.read_bytes(), False) for path, file in package_files()]
    return _write_wheel(wheel_directory, modules + libraries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose .pth puts this checkout's python/ on sys.path; the libraries stay in build/, where _lib.py
    looks in a checkout."""
    build_libraries()
    return _write_wheel(wheel_directory, [("flashprefill.pth", f"{ROOT / 'python'}\n".encode(), False)])


def build_sdist(sdist_directory, config_settings=None):
    version_string = version(HEADER.read_text())
    base = f"flashprefill-{version_string}"
    name = f"{base}.tar.gz"
    pkg_info = _checkout_metadata(version_string)
    with tarfile.open(pathlib.Path(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for top in SDIST_PATHS:
            sdist.add(ROOT / top, f"{base}/{top}", filter=lambda info: None if "__pycache__" in info.name else info)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        sdist.addfile(info, io.BytesIO(pkg_info))
    return name
