"""Declarations of the C ABI (include/flashprefill.h) for ctypes; nothing else.

The shared libraries are loaded on first use, so that `import flashprefill` (and its numpy reference) works
without a build. One library per backend, the same C ABI: "cuda" (NVIDIA Hopper, libflashprefill.so) and
"hip" (AMD gfx950, libflashprefill_gfx950.so). Search order: the environment variable of the backend
(FLASHPREFILL_LIBRARY, FLASHPREFILL_GFX950_LIBRARY: that file only, when set), then the library a wheel installed
inside this package (lib/<name>.<ABI major>, its SONAME file: pip install . puts it there), then, in a checkout,
<repo>/build/<name>, the development link to the SONAME file that `make` builds.
Every call passes structs whose struct_bytes the library checks; a library older than 0.9.0 (whose structs had no
size before 0.8.0, and which has no flashprefill_query) is refused at load.
"""
import ctypes
import functools
import os
import pathlib

from ._errors import LibraryNotFoundError
from ._params import (MergeStateParams, Params, PrepareVParams, QuantizePagedParams, QuantizeParams, QueryParams,
                      QueryResult)

LIBRARIES = {"cuda": ("libflashprefill.so", "FLASHPREFILL_LIBRARY"),
             "hip": ("libflashprefill_gfx950.so", "FLASHPREFILL_GFX950_LIBRARY")}
_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
# The checkout this package sits in (python/flashprefill), where it sits in one: the header marks it.
_CHECKOUT = _PACKAGE_DIR.parent.parent
# The first version whose params structs start with struct_bytes (0.8.0: an older library would misread every call)
# and that answers flashprefill_query (0.9.0: Python reads the kernel table's policy from it).
FIRST_SUPPORTED_VERSION = (0, 9, 0)


def candidates(backend="cuda"):
    """The paths tried for a backend's library, in order."""
    name, variable = LIBRARIES[backend]
    explicit = os.environ.get(variable)
    if explicit:
        return [pathlib.Path(explicit)]
    # The ABI major is the header's, unknown here: the pattern itself stands for the packaged file where none is.
    packaged = sorted((_PACKAGE_DIR / "lib").glob(f"{name}.[0-9]*")) or [_PACKAGE_DIR / "lib" / f"{name}.*"]
    in_checkout = (_CHECKOUT / "include" / "flashprefill.h").is_file()
    return packaged + ([_CHECKOUT / "build" / name] if in_checkout else [])


def _declare_version(lib):
    # const char *flashprefill_version(void);
    lib.flashprefill_version.argtypes = []
    lib.flashprefill_version.restype = ctypes.c_char_p
    return lib


def _declare(lib):
    # const char *flashprefill_status_string(flashprefill_status status);
    lib.flashprefill_status_string.argtypes = [ctypes.c_int]
    lib.flashprefill_status_string.restype = ctypes.c_char_p

    # const char *flashprefill_last_error(void);
    lib.flashprefill_last_error.argtypes = []
    lib.flashprefill_last_error.restype = ctypes.c_char_p

    # flashprefill_status flashprefill_supports(const flashprefill_params *p);
    lib.flashprefill_supports.argtypes = [ctypes.POINTER(Params)]
    lib.flashprefill_supports.restype = ctypes.c_int

    # flashprefill_status flashprefill_query(const flashprefill_query_params *p, flashprefill_query_result *result);
    lib.flashprefill_query.argtypes = [ctypes.POINTER(QueryParams), ctypes.POINTER(QueryResult)]
    lib.flashprefill_query.restype = ctypes.c_int

    # flashprefill_status flashprefill_forward(const flashprefill_params *p, void *stream);
    lib.flashprefill_forward.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p]
    lib.flashprefill_forward.restype = ctypes.c_int

    # flashprefill_status flashprefill_quantize(const flashprefill_quantize_params *p, void *stream);
    lib.flashprefill_quantize.argtypes = [ctypes.POINTER(QuantizeParams), ctypes.c_void_p]
    lib.flashprefill_quantize.restype = ctypes.c_int

    # flashprefill_status flashprefill_quantize_paged(const flashprefill_quantize_paged_params *p, void *stream);
    # From 0.10.0: an older library lacks it, and quantize_paged says so (paged.py).
    if hasattr(lib, "flashprefill_quantize_paged"):
        lib.flashprefill_quantize_paged.argtypes = [ctypes.POINTER(QuantizePagedParams), ctypes.c_void_p]
        lib.flashprefill_quantize_paged.restype = ctypes.c_int

    # flashprefill_status flashprefill_prepare_v(const flashprefill_prepare_v_params *p, void *stream);
    lib.flashprefill_prepare_v.argtypes = [ctypes.POINTER(PrepareVParams), ctypes.c_void_p]
    lib.flashprefill_prepare_v.restype = ctypes.c_int

    # flashprefill_status flashprefill_merge_state(const flashprefill_merge_state_params *p, void *stream);
    # From 0.9.0: a 0.8 library lacks it, and merge_state says so (merge.py).
    if hasattr(lib, "flashprefill_merge_state"):
        lib.flashprefill_merge_state.argtypes = [ctypes.POINTER(MergeStateParams), ctypes.c_void_p]
        lib.flashprefill_merge_state.restype = ctypes.c_int

    # flashprefill_status flashprefill_workspace_bytes(const flashprefill_params *p, int64_t *bytes);
    # flashprefill_status flashprefill_workspace_error(const void *workspace, int32_t *error, char *message,
    #                                                  int32_t message_bytes);
    # From 0.10.0, with the varlen validation: an older library lacks them, and attention_varlen says so (varlen.py).
    if hasattr(lib, "flashprefill_workspace_bytes"):
        lib.flashprefill_workspace_bytes.argtypes = [ctypes.POINTER(Params), ctypes.POINTER(ctypes.c_int64)]
        lib.flashprefill_workspace_bytes.restype = ctypes.c_int
    if hasattr(lib, "flashprefill_workspace_error"):
        lib.flashprefill_workspace_error.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_char_p,
                                                     ctypes.c_int32]
        lib.flashprefill_workspace_error.restype = ctypes.c_int
    return lib


@functools.cache
def lib(backend="cuda"):
    """The backend's loaded library ("cuda" or "hip") with its functions declared; raises LibraryNotFoundError."""
    tried = []
    for path in candidates(backend):
        if not path.is_file():
            tried.append(f"{path} (no such file)")
            continue
        try:
            library = _declare_version(ctypes.CDLL(str(path)))
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        version = library.flashprefill_version().decode()
        if tuple(int(part) for part in version.split(".")) < FIRST_SUPPORTED_VERSION:
            tried.append(f"{path} (version {version}, older than {'.'.join(map(str, FIRST_SUPPORTED_VERSION))}, the "
                         "first whose structs carry their size and that answers flashprefill_query)")
            continue
        return _declare(library)
    name, variable = LIBRARIES[backend]
    raise LibraryNotFoundError(
        f"{name} could not be loaded. Tried: " + "; ".join(tried) + ". Install a wheel that holds it (`pip install .` "
        f"in a checkout builds it{' where clang-22 or ROCm is found' if backend == 'hip' else ''}), build it with "
        f"`make{' amd' if backend == 'hip' else ''}` in a checkout, or set {variable}.")
