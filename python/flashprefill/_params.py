"""ctypes mirrors of the parameter types of include/flashprefill.h.

The C header is the definition; tests/test_params_layout.py compiles it and checks that every field here has
the C offset and size. C enums are `int` on every ABI this library targets, hence ctypes.c_int. Each params struct
starts with struct_bytes, which a new instance sets to the mirror's own size (as the header's *_init() functions
do), so that a library of another layout refuses the call with a message instead of misreading it.
"""
import ctypes
import enum


class Status(enum.IntEnum):
    """flashprefill_status."""
    SUCCESS = 0
    ERROR_INVALID_ARGUMENT = 1  # the call can never be valid: fix the arguments
    ERROR_NOT_SUPPORTED = 2     # valid, but no kernel of this build handles it
    ERROR_NO_DEVICE = 3         # no usable GPU (no driver, no device, wrong architecture)
    ERROR_DEVICE = 4            # the GPU runtime reported an error (launch, memory)


class DType(enum.IntEnum):
    """flashprefill_dtype."""
    BF16 = 1
    FP8_E4M3 = 2  # OCP e4m3fn
    FP32 = 3      # flashprefill_quantize's input only


class DescaleKind(enum.IntEnum):
    """flashprefill_descale_kind: how FP8 codes turn back into values (value = code * descale)."""
    NONE = 0
    PER_TENSOR = 1  # factors: 1 float
    PER_HEAD = 2    # factors: float[batch][heads_kv]
    PER_BLOCK = 3   # exponents: int8[batch][heads][ceil(seqlen / block_tokens)], descale = 2^exponent


class Probabilities(enum.IntEnum):
    """flashprefill_probabilities: what P of P.V is rounded to (fp8 inputs)."""
    DEFAULT = 0  # bf16 for bf16 inputs; e4m3, computed exp-free, for fp8 inputs
    FP16 = 1     # fp8 inputs: float16, V widened to float16, P.V at the 16-bit tensor rate


class Scores(enum.IntEnum):
    """flashprefill_scores: how S = Q K^T is accumulated (fp8 inputs with DEFAULT probabilities)."""
    DEFAULT = 0  # FP16 where a float16-score kernel takes the params, else FP32
    FP16 = 1     # float16 where q's codes rule out an overflow (|code| <= 1.125 at dim_qk 128, 0.75 at 192)
    FP32 = 2     # float32


class VLayout(enum.IntEnum):
    """flashprefill_v_layout: how v's elements are laid out."""
    DEFAULT = 0   # (batch, seqlen_k, heads_kv, dim_v) as every tensor
    PREPARED = 1  # flashprefill_prepare_v's rows of keys (fp8 with DEFAULT probabilities, Hopper)


class Descale(ctypes.Structure):
    """flashprefill_descale."""
    _fields_ = [
        ("kind", ctypes.c_int),             # flashprefill_descale_kind
        ("block_tokens", ctypes.c_int32),   # PER_BLOCK only
        ("factors", ctypes.c_void_p),       # const float *, PER_TENSOR / PER_HEAD
        ("exponents", ctypes.c_void_p),     # const int8_t *, PER_BLOCK
    ]


class SizedStruct(ctypes.Structure):
    """A params struct of the ABI: struct_bytes defaults to the size of the mirror."""

    def __init__(self, *args, **fields):
        fields.setdefault("struct_bytes", ctypes.sizeof(type(self)))
        super().__init__(*args, **fields)


def _strides(tensor):
    return [(f"{tensor}_stride_{axis}", ctypes.c_int64) for axis in ("batch", "seq", "head", "dim")]


class Params(SizedStruct):
    """flashprefill_params: device pointers, int64 strides in elements, shapes, numerics."""
    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        *_strides("q"),
        *_strides("k"),
        *_strides("v"),
        *_strides("out"),
        ("batch", ctypes.c_int32),
        ("seqlen_q", ctypes.c_int32),
        ("seqlen_k", ctypes.c_int32),
        ("heads_q", ctypes.c_int32),
        ("heads_kv", ctypes.c_int32),
        ("dim_qk", ctypes.c_int32),
        ("dim_v", ctypes.c_int32),
        ("in_dtype", ctypes.c_int),   # flashprefill_dtype
        ("out_dtype", ctypes.c_int),  # flashprefill_dtype
        ("causal", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float),
        ("q_descale", Descale),
        ("k_descale", Descale),
        ("v_descale", Descale),
        ("probabilities", ctypes.c_int),  # flashprefill_probabilities
        ("scores", ctypes.c_int),  # flashprefill_scores
        ("v_layout", ctypes.c_int),  # flashprefill_v_layout
        # From 0.10.0: varlen batches and paged KV caches; cu_seqlens_q NULL (0) keeps the equal-length batch.
        ("cu_seqlens_q", ctypes.c_void_p),  # const int32_t *, batch + 1
        ("cu_seqlens_k", ctypes.c_void_p),  # const int32_t *, batch + 1; NULL with a paged cache
        ("seqused_k", ctypes.c_void_p),  # const int32_t *, batch; required with a paged cache
        ("total_q", ctypes.c_int32),
        ("total_k", ctypes.c_int32),  # 0 with a paged cache
        ("block_table", ctypes.c_void_p),  # const int32_t *, (batch, block_table_stride) page ids
        ("block_table_stride", ctypes.c_int32),
        ("page_size", ctypes.c_int32),
        ("num_pages", ctypes.c_int32),
        ("workspace", ctypes.c_void_p),  # the check kernel's work list, flashprefill_workspace_bytes() of it
        ("workspace_bytes", ctypes.c_int64),
        ("q_dtype", ctypes.c_int),  # flashprefill_dtype; 0: in_dtype
        ("q_rotation_signs", ctypes.c_void_p),  # const float *
    ]


class QuantizeParams(SizedStruct):
    """flashprefill_quantize_params: x (float) -> e4m3 codes and per-block exponents."""
    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("x", ctypes.c_void_p),
        ("codes", ctypes.c_void_p),
        ("exponents", ctypes.c_void_p),
        ("signs", ctypes.c_void_p),
        ("subtract", ctypes.c_void_p),
        *_strides("x"),
        *_strides("codes"),
        ("batch", ctypes.c_int32),
        ("seqlen", ctypes.c_int32),
        ("heads", ctypes.c_int32),
        ("dim", ctypes.c_int32),
        ("block_tokens", ctypes.c_int32),
        ("x_dtype", ctypes.c_int),  # flashprefill_dtype: BF16 or FP32
        ("code_max", ctypes.c_float),  # 0 for 448
        ("codes_layout", ctypes.c_int),  # flashprefill_v_layout: DEFAULT, or PREPARED for v
        ("cu_seqlens", ctypes.c_void_p),  # const int32_t *, varlen: batch + 1 row bounds; NULL: equal lengths
        ("total", ctypes.c_int32),  # varlen: rows of x and codes
        ("max_seqlen", ctypes.c_int32),  # varlen: the largest length
    ]


class QuantizePagedParams(SizedStruct):
    """flashprefill_quantize_paged_params: new token rows (float) into an e4m3 paged cache and its page exponents."""
    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("x", ctypes.c_void_p),
        ("slot_mapping", ctypes.c_void_p),  # const int32_t *
        ("codes", ctypes.c_void_p),
        ("exponents", ctypes.c_void_p),
        ("signs", ctypes.c_void_p),
        *[(f"x_stride_{axis}", ctypes.c_int64) for axis in ("token", "head", "dim")],
        *[(f"codes_stride_{axis}", ctypes.c_int64) for axis in ("page", "row", "head", "dim")],
        ("tokens", ctypes.c_int32),
        ("heads_kv", ctypes.c_int32),
        ("dim", ctypes.c_int32),
        ("num_pages", ctypes.c_int32),
        ("page_size", ctypes.c_int32),
        ("x_dtype", ctypes.c_int),  # flashprefill_dtype: BF16 or FP32
    ]


class PrepareVParams(SizedStruct):
    """flashprefill_prepare_v_params: e4m3 v (batch, seq, heads, dim) -> the PREPARED layout."""
    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("v", ctypes.c_void_p),
        ("prepared", ctypes.c_void_p),
        *_strides("v"),
        ("prepared_stride_batch", ctypes.c_int64),
        ("prepared_stride_head", ctypes.c_int64),
        ("prepared_stride_dim", ctypes.c_int64),
        ("batch", ctypes.c_int32),
        ("seqlen", ctypes.c_int32),
        ("heads", ctypes.c_int32),
        ("dim", ctypes.c_int32),
    ]


class MergeStateParams(SizedStruct):
    """flashprefill_merge_state_params: (out_a, lse_a) and (out_b, lse_b) over disjoint keys -> (out, lse)."""
    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("out_a", ctypes.c_void_p),
        ("out_b", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse_a", ctypes.c_void_p),
        ("lse_b", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        *_strides("out_a"),
        *_strides("out_b"),
        *_strides("out"),
        ("batch", ctypes.c_int32),
        ("seqlen_q", ctypes.c_int32),
        ("heads_q", ctypes.c_int32),
        ("dim_v", ctypes.c_int32),
        ("in_dtype", ctypes.c_int),   # flashprefill_dtype: BF16 or FP32
        ("out_dtype", ctypes.c_int),  # flashprefill_dtype: BF16 or FP32
    ]


class QueryParams(SizedStruct):
    """flashprefill_query_params: the options whose kernel flashprefill_query names."""
    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("in_dtype", ctypes.c_int),  # flashprefill_dtype
        ("dim_qk", ctypes.c_int32),
        ("dim_v", ctypes.c_int32),
        ("probabilities", ctypes.c_int),  # flashprefill_probabilities
        ("scores", ctypes.c_int),  # flashprefill_scores
        ("v_layout", ctypes.c_int),  # flashprefill_v_layout
        ("descale_kind", ctypes.c_int),  # flashprefill_descale_kind, of q, k and v alike
        ("block_tokens", ctypes.c_int32),  # PER_BLOCK only
    ]


class QueryResult(SizedStruct):
    """flashprefill_query_result: the kernel the options select and its policy."""
    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("kernel", ctypes.c_char_p),  # static name
        ("scores", ctypes.c_int),  # flashprefill_scores: FP16 or FP32
        ("v_layouts", ctypes.c_uint32),  # bit (1 << layout) of each flashprefill_v_layout it reads
        ("block_tokens_multiple", ctypes.c_int32),
        ("preferred_block_tokens", ctypes.c_int32),
        ("q_code_max", ctypes.c_float),
        ("prepared_v_block_tokens_multiple", ctypes.c_int32),
    ]
