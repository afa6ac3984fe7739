"""The exceptions of flashprefill: one family, rooted at Error, whatever failed (the library's checks, the device,
the library or array module that is missing).

Error carries the C status (Status) and message; TypeError / ValueError remain for arrays and arguments the library
could never take. Nothing here loads the library, so an Error can be raised where no library exists.
"""
from ._params import Status

# flashprefill_status_string() of each status (src/api.c; tests/test_errors.py holds them equal).
STATUS_STRINGS = {Status.SUCCESS: "success", Status.ERROR_INVALID_ARGUMENT: "invalid argument",
                  Status.ERROR_NOT_SUPPORTED: "not supported", Status.ERROR_NO_DEVICE: "no usable device",
                  Status.ERROR_DEVICE: "device error"}


class Error(RuntimeError):
    """A failed call. status: Status; message: what failed and why (flashprefill_last_error() of a library call)."""

    def __init__(self, status, message):
        self.status = Status(status)
        self.message = message
        super().__init__(f"{STATUS_STRINGS[self.status]}: {message}")


class NoDeviceError(Error):
    """No usable device for the call: no GPU, no driver, or no CuPy where the call needs it (status ERROR_NO_DEVICE).
    Raised before any call of a GPU runtime that could throw its own exception."""

    def __init__(self, message):
        super().__init__(Status.ERROR_NO_DEVICE, message)


class LibraryNotFoundError(NoDeviceError, ImportError):
    """The backend's shared library could not be loaded (not built, not found, or too old)."""
