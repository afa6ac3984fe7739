"""Declarations of the C ABI (include/flashprefill.h) for ctypes; nothing else.

The shared library is loaded on first use, so that `import flashprefill` (and its numpy reference) works
without a build. Search order: the FLASHPREFILL_LIBRARY environment variable (that file only, when set), then
<repo>/build/libflashprefill.so, then a copy beside this package.
"""
import ctypes
import functools
import os
import pathlib

from ._params import Params

LIBRARY_NAME = "libflashprefill.so"
_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


class LibraryNotFoundError(ImportError):
    """The shared library could not be loaded."""


def candidates():
    """The paths tried, in order."""
    explicit = os.environ.get("FLASHPREFILL_LIBRARY")
    if explicit:
        return [pathlib.Path(explicit)]
    return [_PACKAGE_DIR.parent.parent / "build" / LIBRARY_NAME, _PACKAGE_DIR / LIBRARY_NAME]


def _declare(lib):
    # const char *flashprefill_version(void);
    lib.flashprefill_version.argtypes = []
    lib.flashprefill_version.restype = ctypes.c_char_p

    # const char *flashprefill_status_string(flashprefill_status status);
    lib.flashprefill_status_string.argtypes = [ctypes.c_int]
    lib.flashprefill_status_string.restype = ctypes.c_char_p

    # const char *flashprefill_last_error(void);
    lib.flashprefill_last_error.argtypes = []
    lib.flashprefill_last_error.restype = ctypes.c_char_p

    # flashprefill_status flashprefill_supports(const flashprefill_params *p);
    lib.flashprefill_supports.argtypes = [ctypes.POINTER(Params)]
    lib.flashprefill_supports.restype = ctypes.c_int

    # flashprefill_status flashprefill_forward(const flashprefill_params *p, void *stream);
    lib.flashprefill_forward.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p]
    lib.flashprefill_forward.restype = ctypes.c_int
    return lib


@functools.cache
def lib():
    """The loaded library with its functions declared; raises LibraryNotFoundError."""
    tried = []
    for path in candidates():
        if not path.is_file():
            tried.append(f"{path} (no such file)")
            continue
        try:
            return _declare(ctypes.CDLL(str(path)))
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise LibraryNotFoundError(
        f"{LIBRARY_NAME} could not be loaded; build it with `make`, or set FLASHPREFILL_LIBRARY. Tried: "
        + "; ".join(tried))
