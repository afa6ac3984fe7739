"""flashprefill: causal prefill attention in FP8 and BF16 (see api.py for the calls, varlen.py for variable-length
batches and paged KV caches, scales.py for descales; flashprefill.hf, not imported here, registers the attention with
Hugging Face transformers).

`import flashprefill` needs no built library, no GPU, no CuPy and no torch, and imports neither: the numpy reference
(flashprefill.reference) and the FP8 model (flashprefill.fp8) work without them; the library is loaded on the first
call that needs it. Every failure of a call is an Error (NoDeviceError, LibraryNotFoundError among them), but
TypeError / ValueError for arguments no library could take.
"""
from . import fp8, paged, policy, prepare, reference
from ._arrays import DeviceArray
from ._errors import Error, LibraryNotFoundError, NoDeviceError
from ._params import DescaleKind, DType, Status
from .api import attention, prepare_v, quantize_fp8, quantize_qkv, supports, version
from .merge import merge_state
from .paged import PagedCache, quantize_paged
from .prepared_v import PreparedV
from .scales import BlockScales
from .varlen import attention_varlen, supports_varlen, varlen_workspace_bytes

__all__ = ["BlockScales", "DType", "DescaleKind", "DeviceArray", "Error", "LibraryNotFoundError", "NoDeviceError",
           "PagedCache", "PreparedV", "Status", "attention", "attention_varlen", "fp8", "merge_state", "paged",
           "policy", "prepare", "prepare_v", "quantize_fp8", "quantize_paged", "quantize_qkv", "reference", "supports",
           "supports_varlen", "varlen_workspace_bytes", "version"]
