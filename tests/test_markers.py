"""The gpu rule of conftest.py, on a small suite run by pytester with the machine's answers simulated: where no GPU is
visible gpu tests skip; where one is visible, a gpu test that cannot run, or a file skipped as a whole, fails, and
only a missing peer (markers.PEER_SKIPS) or too few GPUs (markers.HARDWARE_SKIPS) may skip. The groups are
registered (`-m gpu`, `-m emulator` select)."""
import glob
import pathlib
import re

import pytest

import markers

pytest_plugins = ["pytester"]
TESTS = pathlib.Path(__file__).resolve().parent

SUITE = {
    "test_gpu_suite": """
        import pytest
        import markers
        pytestmark = pytest.mark.gpu
        def test_runs():
            pass
        def test_needs_a_missing_module():
            pytest.importorskip("flashprefill_no_such_module")
        def test_peer_missing():
            pytest.skip(markers.NO_FA3)
        def test_too_few_gpus():
            pytest.skip(markers.FEWER_GPUS)
    """,
    "test_gpu_whole_file": """
        import pytest
        pytest.importorskip("flashprefill_no_such_module")
        pytestmark = pytest.mark.gpu
        def test_never():
            pass
    """,
    "test_host": """
        import pytest
        @pytest.mark.emulator
        def test_emulated():
            pass
        def test_plain():
            pass
    """,
}


@pytest.fixture
def suite(pytester):
    for path in (TESTS.parent / "conftest.py", TESTS / "markers.py"):
        (pytester.path / path.name).write_text(path.read_text())
    pytester.makepyfile(**SUITE)
    return pytester


def _machine(monkeypatch, visible, devices):
    """Simulates the device files (/dev/nvidia*) and what CuPy's runtime answers (a count, or None: no CuPy)."""
    real_glob = glob.glob
    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0"] if visible and "nvidia" in pattern
                        else [] if "nvidia" in pattern else real_glob(pattern))
    cupy = pytest.importorskip("cupy", reason=markers.NO_CUPY)
    if devices is None:
        def no_driver():
            raise cupy.cuda.runtime.CUDARuntimeError(35)
        monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", no_driver)
    else:
        monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: devices)


def test_no_gpu_visible_skips(suite, monkeypatch):
    _machine(monkeypatch, visible=False, devices=None)
    result = suite.runpytest_inprocess("-rs")
    result.assert_outcomes(passed=2, skipped=5)


def test_gpu_visible_fails_what_cannot_run(suite, monkeypatch):
    _machine(monkeypatch, visible=True, devices=1)
    result = suite.runpytest_inprocess("-rs", "test_gpu_suite.py", "test_host.py")
    result.assert_outcomes(passed=3, failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*a gpu test skipped on a machine with a GPU: could not import*"])
    whole_file = suite.runpytest_inprocess("test_gpu_whole_file.py")
    whole_file.assert_outcomes(errors=1)
    whole_file.stdout.fnmatch_lines(["*test_gpu_whole_file.py was skipped as a whole on a machine with a GPU*"])


def test_gpu_visible_but_unusable_fails(suite, monkeypatch):
    _machine(monkeypatch, visible=True, devices=0)
    result = suite.runpytest_inprocess("-rs", "test_gpu_suite.py")
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines(["*a GPU is visible (/dev/nvidia*) but this gpu test cannot use it: no NVIDIA GPU*"])


@pytest.mark.parametrize("expression, passed", [("emulator", 1), ("not gpu and not emulator", 1)])
def test_groups_select(suite, monkeypatch, expression, passed):
    _machine(monkeypatch, visible=False, devices=None)
    result = suite.runpytest_inprocess("-m", expression, "--strict-markers", "test_host.py", "test_gpu_suite.py")
    result.assert_outcomes(passed=passed)


def test_peer_skips_are_distinct():
    assert len(set(markers.PEER_SKIPS)) == len(markers.PEER_SKIPS)


def test_skip_reasons_are_named_in_markers():
    """No test file (tests/ and the emulator's, tools/gfx950_emu/tests/) writes a skip reason of its own: each reason
    is named once in markers.py, so that the same cause skips with the same words everywhere."""
    own_reason = re.compile(r"""(?:reason\s*=\s*|pytest\.skip\(\s*|\.skipif\()[rfb]*["']""")
    files = [p for p in (*TESTS.glob("*.py"), *(TESTS.parent / "tools" / "gfx950_emu" / "tests").glob("*.py"))
             if p.name not in ("markers.py", "test_markers.py")]
    assert len(files) > 40
    offenders = [f"{p.name}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
                 if own_reason.search(line)]
    assert not offenders, f"skip reasons written outside markers.py: {offenders}"
