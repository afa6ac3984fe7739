"""tools/ab_builds.py's switch between two builds (CPU): after select(name) the binding's calls reach that build's
file, not the one loaded last (two imports of the binding once ran one library for both, so that every A/B read 1.00),
switching back returns the first; the same file twice is refused; and timing.time_rounds calls select before each
build's timings, so that every call of a build is made while that build is selected."""
import pathlib
import shutil
import sys

import pytest

import flashprefill as fp
from flashprefill import _lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import ab_builds  # noqa: E402
import timing  # noqa: E402

LIBRARY = ROOT / "build" / "libflashprefill.so"


@pytest.fixture
def two_builds(tmp_path, monkeypatch):
    if not LIBRARY.exists():
        pytest.fail(f"{LIBRARY} is missing: run `make` first")
    paths = {name: tmp_path / f"lib{name}.so" for name in "AB"}
    for path in paths.values():
        shutil.copyfile(LIBRARY.resolve(), path)
    monkeypatch.setenv("FLASHPREFILL_LIBRARY", str(LIBRARY))
    yield ab_builds.Builds(fp, paths), paths
    _lib.lib.cache_clear()


def _called_file():
    import ctypes
    return ab_builds.mapped_file(ctypes.cast(_lib.lib().flashprefill_version, ctypes.c_void_p).value)


def test_select_reaches_the_selected_file(two_builds):
    builds, paths = two_builds
    for name in "ABA":
        builds.select(name)
        assert _called_file() == str(paths[name].resolve()), f"after select({name!r})"
        assert builds.selected == name
    assert fp.version() == _lib.lib().flashprefill_version().decode()


def test_the_same_file_twice_is_refused(tmp_path):
    with pytest.raises(ValueError, match="different files"):
        ab_builds.Builds(fp, {"A": LIBRARY, "B": LIBRARY})


def test_each_build_timed_while_selected(two_builds):
    builds, _ = two_builds
    calls = []

    def run(name):
        def call():
            calls.append((name, builds.selected, _called_file()))
        return call
    runs = {name: [run(name)] for name in "AB"}
    timing.time_rounds(runs, 4, 3, dict.fromkeys("AB", 1.0), timing.HostClock, idle_s=0, before=builds.select)
    assert len(calls) == 4 * 2 * (3 + 3)
    assert all(name == selected for name, selected, _ in calls), calls
    assert {name: file for name, _, file in calls} == {name: builds.paths[name] for name in "AB"}
