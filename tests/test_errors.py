"""One exception family: whatever fails in a call (the library's checks, no GPU, no driver, no CuPy, no library) is
a flashprefill.Error, raised before a GPU runtime could throw its own; and `import flashprefill` imports neither
CuPy nor torch. Runs without a GPU: a missing driver is simulated where CuPy is installed, a missing CuPy in a
subprocess."""
import pathlib
import subprocess
import sys
import textwrap

import pytest

import markers

import flashprefill as fp
from flashprefill import _devices, _errors, _lib
from flashprefill._arrays import DeviceArray
from flashprefill._params import Status

ROOT = pathlib.Path(__file__).resolve().parents[1]
BASE = 0x7F0000000000


def _python(code):
    """Runs `code` in a fresh interpreter with the package on its path; its stdout."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    return run.stdout


def _arrays(dtype="bfloat16"):
    """q, k, v, out: DeviceArray stand-ins (1, 64, 2, 128)."""
    return [DeviceArray(BASE + (i << 32), (1, 64, 2, 128), dtype) for i in range(4)]


def test_import_loads_neither_cupy_nor_torch():
    """flashprefill imports every module of the package (api, fp8, prepare, reference, ...)."""
    out = _python("""
        import sys
        import flashprefill
        print(sorted(m for m in ("cupy", "torch") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_status_strings_are_the_librarys():
    library = _lib.lib()
    for status in Status:
        assert library.flashprefill_status_string(status).decode() == _errors.STATUS_STRINGS[status]


def test_the_family():
    assert issubclass(fp.NoDeviceError, fp.Error) and issubclass(fp.LibraryNotFoundError, fp.NoDeviceError)
    assert issubclass(fp.LibraryNotFoundError, ImportError) and issubclass(fp.Error, RuntimeError)
    error = fp.NoDeviceError("no GPU")
    assert error.status == Status.ERROR_NO_DEVICE and str(error) == "no usable device: no GPU"


def test_error_needs_no_library(monkeypatch):
    """An Error's text comes from Python: raising one never loads the library (which may be what is missing)."""
    monkeypatch.setattr(_lib, "lib", lambda backend="cuda": pytest.fail("the library was loaded"))
    assert str(fp.Error(Status.ERROR_NOT_SUPPORTED, "x")) == "not supported: x"


@pytest.fixture
def no_driver(monkeypatch):
    """CuPy as it is on a machine without the NVIDIA driver: its first runtime call raises."""
    cupy = pytest.importorskip("cupy", reason=markers.NO_CUPY)
    runtime = cupy.cuda.runtime

    def raise_no_driver(*args, **kwargs):
        raise runtime.CUDARuntimeError(35)  # cudaErrorInsufficientDriver

    for name in ("getDeviceCount", "setDevice", "getDevice", "pointerGetAttributes", "malloc"):
        monkeypatch.setattr(runtime, name, raise_no_driver)
    _devices._cupy_reason.cache_clear()
    yield
    _devices._cupy_reason.cache_clear()


@pytest.mark.parametrize("with_out", [False, True])
def test_attention_without_a_driver(no_driver, with_out):
    q, k, v, out = _arrays()
    with pytest.raises(fp.NoDeviceError, match="no usable GPU for q: the GPU driver is missing") as info:
        fp.attention(q, k, v, out=out if with_out else None)
    assert info.value.status == Status.ERROR_NO_DEVICE


def test_quantize_and_prepare_without_a_driver(no_driver):
    x = DeviceArray(BASE, (1, 64, 2, 128), "float32")
    with pytest.raises(fp.NoDeviceError, match="no usable GPU for x"):
        fp.quantize_fp8(x)
    with pytest.raises(fp.NoDeviceError, match="no usable GPU for q"):
        fp.quantize_qkv(x, x, x)
    with pytest.raises(fp.NoDeviceError, match="no usable GPU for v"):
        fp.prepare_v(DeviceArray(BASE, (1, 64, 2, 128), "float8_e4m3fn"))


def test_supports_needs_no_device(no_driver):
    assert fp.supports(*_arrays()[:3]) is True


def test_without_cupy():
    """CuPy absent: a call that would allocate with it says so; one given every array gets the library's own
    NO_DEVICE (no GPU here) or, on a GPU machine, its device check of the fake pointers."""
    out = _python(f"""
        import sys
        sys.modules["cupy"] = None  # import cupy raises ImportError
        import flashprefill as fp
        from flashprefill import DeviceArray
        q, k, v, out = [DeviceArray({BASE} + (i << 32), (1, 64, 2, 128), "bfloat16") for i in range(4)]
        for kwargs in ({{}}, {{"out": out}}):
            try:
                fp.attention(q, k, v, **kwargs)
            except fp.Error as e:
                print(type(e).__name__, int(e.status), e.message)
    """)
    lines = out.splitlines()
    assert lines[0].startswith("NoDeviceError 3 allocating a bfloat16 array (1, 64, 2, 128) needs CuPy, which is "
                               "not installed"), lines
    name, status = lines[1].split()[:2]
    assert (name, status) in (("NoDeviceError", "3"), ("Error", "1")), lines


def test_library_not_found_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHPREFILL_LIBRARY", str(tmp_path / "absent.so"))
    _lib.lib.cache_clear()
    try:
        with pytest.raises(fp.Error, match="libflashprefill.so could not be loaded") as info:
            fp.supports(*_arrays()[:3])
        assert isinstance(info.value, ImportError) and info.value.status == Status.ERROR_NO_DEVICE
    finally:
        _lib.lib.cache_clear()


def test_library_errors_keep_their_status():
    with pytest.raises(fp.Error) as info:
        fp.supports(*_arrays()[:3], softmax_scale=-1.0)
    assert type(info.value) is fp.Error and info.value.status == Status.ERROR_INVALID_ARGUMENT
