"""flashprefill: causal prefill attention in FP8 and BF16 (see api.py for the calls, scales.py for descales).

`import flashprefill` needs no built library: the numpy reference (flashprefill.reference) and the FP8 model
(flashprefill.fp8) work without it; the library is loaded on the first call that needs it.
"""
from . import fp8, prepare, reference
from ._arrays import DeviceArray
from ._lib import LibraryNotFoundError
from ._params import DescaleKind, DType, Status
from .api import Error, attention, prepare_v, quantize_fp8, quantize_qkv, supports, version
from .prepared_v import PreparedV
from .scales import BlockScales

__all__ = ["BlockScales", "DType", "DescaleKind", "DeviceArray", "Error", "LibraryNotFoundError", "PreparedV", "Status",
           "attention", "fp8", "prepare", "prepare_v", "quantize_fp8", "quantize_qkv", "reference", "supports",
           "version"]
