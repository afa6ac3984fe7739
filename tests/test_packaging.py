"""`pip install .` / `pip wheel .`: the build backend (tools/pep517_backend.py) and how _lib.py finds a packaged
library. The host tests check the version, metadata, file lists and toolchain choice without building; the `wheel`
group builds a wheel with pip (make runs: a no-op after `make all amd`, minutes from a clean tree), installs it into
a fresh venv without this machine's site-packages, and imports it from another directory."""
import email.parser
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = ROOT / "include" / "flashprefill.h"
sys.path.insert(0, str(ROOT / "tools"))
import pep517_backend as backend  # noqa: E402

from flashprefill import _lib  # noqa: E402

HEADER_OF = "#define FLASHPREFILL_VERSION_MAJOR {}\n#define FLASHPREFILL_VERSION_MINOR {}\n" \
            "#define FLASHPREFILL_VERSION_PATCH {}\n"


@pytest.mark.parametrize("parts", [(0, 10, 0), (3, 0, 17), (12, 345, 6)])
def test_version_from_header(parts):
    assert backend.version("/* x */\n" + HEADER_OF.format(*parts) + "#define OTHER 1\n") == "%d.%d.%d" % parts


@pytest.mark.parametrize("text", [HEADER_OF.format(1, 2, 3).replace("MINOR", "MINR"),
                                  HEADER_OF.format(1, 2, 3) + "#define FLASHPREFILL_VERSION_PATCH 4\n",
                                  HEADER_OF.format(1, "x", 3)])
def test_version_needs_each_macro_once(text):
    with pytest.raises(ValueError, match="FLASHPREFILL_VERSION_"):
        backend.version(text)


@markers.needs_make
def test_header_version_major_is_the_makefiles_soname():
    """The backend packages build/<name>.<major>: the file the Makefile names from the same header."""
    make = subprocess.run(["make", "-s", "--eval", "print-abi-major: ; @echo $(ABI_MAJOR)", "print-abi-major"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert backend.version(HEADER.read_text()).split(".")[0] == make.stdout.strip()


def test_metadata():
    table = backend.project((ROOT / "pyproject.toml").read_text())
    message = email.parser.Parser().parsestr(backend.metadata(table, "7.8.9"))
    assert (message["Name"], message["Version"], message["Requires-Python"]) == ("flashprefill", "7.8.9", ">=3.10")
    assert message.get_all("Provides-Extra") == ["cupy", "torch", "hf"]
    assert message.get_all("Requires-Dist") == ["numpy", "ml_dtypes", 'cupy-cuda13x; extra == "cupy"',
                                                'torch; extra == "torch"', 'torch; extra == "hf"',
                                                'transformers; extra == "hf"']
    assert message.get_payload() == (ROOT / "README.md").read_text()


@pytest.mark.parametrize("extra", ['license = "MIT"\n', 'scripts = {fp = "flashprefill:main"}\n'])
def test_unwritten_project_keys_are_refused(extra):
    text = (ROOT / "pyproject.toml").read_text().replace("[project]\n", "[project]\n" + extra)
    with pytest.raises(ValueError, match="not written by this backend"):
        backend.project(text)


def test_static_version_is_refused():
    text = (ROOT / "pyproject.toml").read_text().replace('dynamic = ["version"]', 'version = "1.0.0"')
    with pytest.raises(ValueError, match="the header holds the version"):
        backend.project(text)


def test_package_files_are_the_modules_only():
    files = dict(backend.package_files())
    modules = sorted(p for p in (ROOT / "python" / "flashprefill").glob("*.py"))
    assert sorted(files.values()) == modules
    assert all(path == f"flashprefill/{file.name}" for path, file in files.items())


def _executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("on_path, in_rocm, expected", [
    (("clang-22", "ld.lld-22"), ("clang", "ld.lld"), ("bin/clang-22", "bin/ld.lld-22")),
    ((), ("clang", "ld.lld"), ("rocm/llvm/bin/clang", "rocm/llvm/bin/ld.lld")),
    (("clang-22",), ("ld.lld",), ("bin/clang-22", "rocm/llvm/bin/ld.lld")),
    (("clang-22", "clang", "ld.lld"), ("clang",), None),
    ((), (), None),
])
def test_gfx950_toolchain_as_make_picks_it(tmp_path, on_path, in_rocm, expected):
    for tool in on_path:
        _executable(tmp_path / "bin" / tool)
    for tool in in_rocm:
        _executable(tmp_path / "rocm" / "llvm" / "bin" / tool)
    found = backend.gfx950_toolchain({"PATH": str(tmp_path / "bin"), "ROCM_PATH": str(tmp_path / "rocm")})
    assert found == (None if expected is None else tuple(str(tmp_path / tool) for tool in expected))


def _layout(tmp_path, monkeypatch, checkout, packaged):
    """_lib's directories pointed at a package (with lib/<file> where `packaged` names one) in or out of a
    checkout."""
    package = tmp_path / "site" / "flashprefill"
    (package / "lib").mkdir(parents=True)
    for name in packaged:
        (package / "lib" / name).write_bytes(b"")
    if checkout:
        (tmp_path / "include").mkdir()
        (tmp_path / "include" / "flashprefill.h").write_text("")
    monkeypatch.setattr(_lib, "_PACKAGE_DIR", package)
    monkeypatch.setattr(_lib, "_CHECKOUT", tmp_path)
    for _, variable in _lib.LIBRARIES.values():
        monkeypatch.delenv(variable, raising=False)
    return package


@pytest.mark.parametrize("backend_name", ["cuda", "hip"])
@pytest.mark.parametrize("checkout", [True, False])
def test_packaged_library_first_then_the_checkouts_build(tmp_path, monkeypatch, backend_name, checkout):
    name = _lib.LIBRARIES[backend_name][0]
    package = _layout(tmp_path, monkeypatch, checkout, [f"{name}.0", "libother.so.0"])
    assert _lib.candidates(backend_name) == [package / "lib" / f"{name}.0"] + \
        ([tmp_path / "build" / name] if checkout else [])


@pytest.mark.parametrize("checkout", [True, False])
def test_not_found_names_every_place_tried(tmp_path, monkeypatch, checkout):
    package = _layout(tmp_path, monkeypatch, checkout, [])
    _lib.lib.cache_clear()
    try:
        with pytest.raises(_lib.LibraryNotFoundError) as info:
            _lib.lib("cuda")
    finally:
        _lib.lib.cache_clear()
    message = str(info.value)
    assert f"{package / 'lib' / 'libflashprefill.so.*'} (no such file)" in message
    assert (f"{tmp_path / 'build' / 'libflashprefill.so'} (no such file)" in message) == checkout
    assert "pip install ." in message and "FLASHPREFILL_LIBRARY" in message


def test_sdist_holds_what_make_and_the_backend_read(tmp_path):
    name = backend.build_sdist(str(tmp_path))
    base = name.removesuffix(".tar.gz")
    with tarfile.open(tmp_path / name) as sdist:
        names = set(sdist.getnames())
        pkg_info = sdist.extractfile(f"{base}/PKG-INFO").read().decode()
    assert base == "flashprefill-" + backend.version(HEADER.read_text())
    for path in ("pyproject.toml", "Makefile", "include/flashprefill.h", "tools/pep517_backend.py",
                 "python/flashprefill/_lib.py", "src/exports.map"):
        assert f"{base}/{path}" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith((f"{base}/build", f"{base}/tests"))]
    assert email.parser.Parser().parsestr(pkg_info)["Version"] == base.split("-")[1]


# The wheel, built once a session with pip as a user would, from this checkout.

def _clean_env(**extra):
    """This environment without what could lead Python to the checkout or its libraries."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", *(variable for _, variable in _lib.LIBRARIES.values()))
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    if shutil.which(os.environ.get("NVCC", "nvcc")) is None:
        pytest.skip(markers.NO_NVCC)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
                   check=True, env=_clean_env())
    (path,) = out.glob("*.whl")
    return path


@pytest.fixture(scope="session")
def venv(wheel, tmp_path_factory):
    """A fresh venv (no system site-packages) with the wheel and its dependencies installed."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, env=_clean_env())
    python = root / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", str(wheel)], check=True, env=_clean_env())
    return python


@pytest.mark.wheel
def test_wheel_holds_the_package_and_its_libraries_only(wheel):
    version = backend.version(HEADER.read_text())
    major = version.split(".")[0]
    assert wheel.name == f"flashprefill-{version}-{backend._tag()}.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    libraries = {f"flashprefill/lib/libflashprefill.so.{major}"}
    if backend.gfx950_toolchain(os.environ):
        libraries.add(f"flashprefill/lib/libflashprefill_gfx950.so.{major}")
    modules = {path for path, _ in backend.package_files()}
    info = {f"flashprefill-{version}.dist-info/{name}" for name in ("METADATA", "WHEEL", "RECORD")}
    assert names == modules | libraries | info
    assert not [n for n in names if "test" in n.split("/")[-1] or n.startswith("tests/")]


@pytest.mark.wheel
@pytest.mark.parametrize("backend_name", ["cuda", "hip"])
def test_installed_wheel_imports_from_anywhere(venv, tmp_path, backend_name):
    if backend_name == "hip" and not backend.gfx950_toolchain(os.environ):
        pytest.skip(markers.NO_GFX950_ASSEMBLER)
    script = ("import flashprefill, flashprefill._lib as l; "
              f"print(flashprefill.version({backend_name!r})); print(flashprefill.__file__); "
              f"print(*l.candidates({backend_name!r}), sep='\\n')")
    run = subprocess.run([venv, "-c", script], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    version, module, *candidates = run.stdout.splitlines()
    assert version == backend.version(HEADER.read_text())
    site = pathlib.Path(module).resolve().parent
    assert site.is_relative_to(venv.parent.parent.resolve()) and not site.is_relative_to(ROOT)
    name = _lib.LIBRARIES[backend_name][0]
    assert candidates == [str(site / "lib" / f"{name}.{version.split('.')[0]}")]
