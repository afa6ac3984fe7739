"""The library's policy for a set of attention options, as the library itself states it (flashprefill_query,
include/flashprefill.h): the kernel that runs, the scores it computes, the v layouts it reads, the block sizes of
per-block descales it takes and prefers, and the bound on q's codes that its float16 scores need. quantize_qkv asks
this of the library that will run the attention instead of repeating its kernel table.

Option names are those of attention(): in_dtype "float8_e4m3fn" or "bfloat16", probabilities "default" / "fp16",
scores "default" / "fp16" / "fp32", v_layout "default" / "prepared".
"""
import ctypes
import dataclasses
import functools

from . import _lib
from ._errors import Error
from ._params import DescaleKind, DType, Probabilities, QueryParams, QueryResult, Scores, Status, VLayout

IN_DTYPES = {"bfloat16": DType.BF16, "float8_e4m3fn": DType.FP8_E4M3}
PROBABILITIES = {"default": Probabilities.DEFAULT, "fp16": Probabilities.FP16}
SCORES = {"default": Scores.DEFAULT, "fp16": Scores.FP16, "fp32": Scores.FP32}
V_LAYOUTS = {"default": VLayout.DEFAULT, "prepared": VLayout.PREPARED}


@dataclasses.dataclass(frozen=True)
class KernelPolicy:
    """flashprefill_query_result: what the library runs for the options asked about."""
    kernel: str                  # e.g. "hopper_fwd_fp8_hd128_kv192_f16s"
    scores: str                  # what it computes: "fp16" or "fp32"
    v_layouts: frozenset         # the layouts of v it reads: "default", "prepared"
    block_tokens_multiple: int   # BlockScales' block_tokens must be a multiple of this (0: it takes none)
    preferred_block_tokens: int  # blocks of a multiple of this run the fastest kernel for the options (0: none)
    q_code_max: float            # the largest magnitude of q's e4m3 codes it takes as they are (448, or the bound of
                                 # float16 scores: 1.125 at dim_qk 128, 0.75 at 192)
    prepared_v_block_tokens_multiple: int  # quantize_fp8 writes v "prepared" for blocks of a multiple of this (0: never)


def query(backend, dim_qk, dim_v, *, in_dtype="float8_e4m3fn", probabilities="default", scores="default",
          v_layout="default", per_block=None):
    """The KernelPolicy of the kernel that `backend`'s library ("cuda" or "hip") runs for these options, or None
    where none does (Status.ERROR_NOT_SUPPORTED). per_block: None for per-head factors (fp8; bf16 takes no descale),
    else BlockScales' tokens per block. Raises Error for options no call could take (Status.ERROR_INVALID_ARGUMENT),
    LibraryNotFoundError where the library is not built. Answers are cached per library and options."""
    for name, value, choices in (("in_dtype", in_dtype, IN_DTYPES), ("probabilities", probabilities, PROBABILITIES),
                                 ("scores", scores, SCORES), ("v_layout", v_layout, V_LAYOUTS)):
        if value not in choices:
            raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    if per_block is not None and (not isinstance(per_block, int) or per_block <= 0):
        raise ValueError(f"per_block must be None or an int > 0, got {per_block!r}")
    return _query(backend, dim_qk, dim_v, in_dtype, probabilities, scores, v_layout, per_block)


@functools.lru_cache(maxsize=256)
def _query(backend, dim_qk, dim_v, in_dtype, probabilities, scores, v_layout, per_block):
    library = _lib.lib(backend)
    if in_dtype == "bfloat16":
        kind = DescaleKind.NONE
    else:
        kind = DescaleKind.PER_HEAD if per_block is None else DescaleKind.PER_BLOCK
    params = QueryParams(in_dtype=IN_DTYPES[in_dtype], dim_qk=dim_qk, dim_v=dim_v,
                         probabilities=PROBABILITIES[probabilities], scores=SCORES[scores],
                         v_layout=V_LAYOUTS[v_layout], descale_kind=kind, block_tokens=per_block or 0)
    result = QueryResult()
    status = library.flashprefill_query(ctypes.byref(params), ctypes.byref(result))
    if status == Status.ERROR_NOT_SUPPORTED:
        return None
    if status != Status.SUCCESS:
        raise Error(status, library.flashprefill_last_error().decode())
    return KernelPolicy(
        kernel=result.kernel.decode(), scores={Scores.FP16: "fp16", Scores.FP32: "fp32"}[result.scores],
        v_layouts=frozenset(name for name, layout in V_LAYOUTS.items() if result.v_layouts >> layout & 1),
        block_tokens_multiple=result.block_tokens_multiple, preferred_block_tokens=result.preferred_block_tokens,
        q_code_max=result.q_code_max, prepared_v_block_tokens_multiple=result.prepared_v_block_tokens_multiple)
