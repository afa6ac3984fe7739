"""Argument validation of the C ABI, through the real build/libflashprefill.so (`make` builds it).

Every check of src/validate.c has a case here that asserts the exact status and the part of
flashprefill_last_error() that names the argument. Pointers are fake (never dereferenced by validation), so
this runs without a GPU.
"""
import ctypes
import math
import pathlib
import threading

import pytest

import markers

from flashprefill import _lib
from flashprefill._params import DescaleKind, DType, Params, PrepareVParams, Probabilities, Scores, Status, VLayout

INVALID = Status.ERROR_INVALID_ARGUMENT
NOT_SUPPORTED = Status.ERROR_NOT_SUPPORTED
ELEMENT_BYTES = {DType.BF16: 2, DType.FP8_E4M3: 1}
FAKE_POINTERS = {"q": 0x7F0000000000, "k": 0x7F1000000000, "v": 0x7F2000000000, "out": 0x7F3000000000}
FAKE_DESCALE = 0x7F4000000000


@pytest.fixture(scope="module")
def lib():
    return _lib.lib()


def set_contiguous_strides(p, tensor, heads, dim, seqlen):
    for axis, stride in (("batch", seqlen * heads * dim), ("seq", heads * dim), ("head", dim), ("dim", 1)):
        setattr(p, f"{tensor}_stride_{axis}", stride)


def valid_params(in_dtype=DType.BF16, batch=2, seqlen_q=200, seqlen_k=256, heads_q=8, heads_kv=2, dim_qk=128,
                 dim_v=128):
    """A call that validation accepts: GQA, seqlen_q < seqlen_k, non-tile-multiple seqlen_q, row-major."""
    p = Params(batch=batch, seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads_q=heads_q, heads_kv=heads_kv,
               dim_qk=dim_qk, dim_v=dim_v, in_dtype=in_dtype, out_dtype=DType.BF16, causal=1,
               softmax_scale=dim_qk**-0.5, **FAKE_POINTERS)
    set_contiguous_strides(p, "q", heads_q, dim_qk, seqlen_q)
    set_contiguous_strides(p, "k", heads_kv, dim_qk, seqlen_k)
    set_contiguous_strides(p, "v", heads_kv, dim_v, seqlen_k)
    set_contiguous_strides(p, "out", heads_q, dim_v, seqlen_q)
    return p


def fp8_params(kind=DescaleKind.PER_TENSOR, **shape):
    p = valid_params(DType.FP8_E4M3, **shape)
    for d in (p.q_descale, p.k_descale, p.v_descale):
        d.kind = kind
        if kind == DescaleKind.PER_BLOCK:
            d.block_tokens, d.exponents = 128, FAKE_DESCALE
        else:
            d.factors = FAKE_DESCALE
    return p


def supports(lib, p):
    status = Status(lib.flashprefill_supports(ctypes.byref(p)))
    return status, lib.flashprefill_last_error().decode()


def assert_valid(lib, p):
    status, message = supports(lib, p)
    assert status in (Status.SUCCESS, NOT_SUPPORTED), f"{status.name}: {message}"


def with_fields(p, **fields):
    """p with the given fields set (a__b names field b of struct field a); returns p."""
    for name, value in fields.items():
        target = p
        *path, last = name.split("__")
        for part in path:
            target = getattr(target, part)
        setattr(target, last, value)
    return p


def setter(**fields):
    return lambda p: with_fields(p, **fields)


SHAPES = ("batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv", "dim_qk", "dim_v")
TENSORS = ("q", "k", "v", "out")

def prepared_v_params(kind=DescaleKind.PER_HEAD, **shape):
    """fp8 with v in V_LAYOUT_PREPARED: rows of 256 positions (seqlen_k 256), (batch, head, dim) row-major."""
    p = fp8_params(kind, **shape)
    positions = -(-p.seqlen_k // 16) * 16
    return with_fields(p, v_layout=VLayout.PREPARED, v_stride_seq=1, v_stride_dim=positions,
                       v_stride_head=p.dim_v * positions, v_stride_batch=p.heads_kv * p.dim_v * positions)


# (id, params factory, mutation, status, substring of the message)
CASES = [
    *[(f"{name}={value}", valid_params, setter(**{name: value}), INVALID, f"{name} must be > 0, got {value}")
      for name in SHAPES for value in (0, -1)],
    ("heads_q%heads_kv", valid_params, setter(heads_q=8, heads_kv=3), INVALID,
     "heads_q = 8 is not a multiple of heads_kv = 3"),
    ("causal=2", valid_params, setter(causal=2), INVALID, "causal must be 0 or 1, got 2"),
    ("causal=-1", valid_params, setter(causal=-1), INVALID, "causal must be 0 or 1, got -1"),
    ("causal seqlen_q>seqlen_k", valid_params, setter(seqlen_q=257), INVALID,
     "seqlen_q = 257 > seqlen_k = 256"),
    *[(f"softmax_scale={value}", valid_params, setter(softmax_scale=value), INVALID,
       "softmax_scale must be finite and > 0") for value in (0.0, -0.125, math.inf, -math.inf, math.nan)],
    ("in_dtype=0", valid_params, setter(in_dtype=0), INVALID, "in_dtype = 0 is not an attention dtype"),
    ("in_dtype=fp32", valid_params, setter(in_dtype=DType.FP32), INVALID, "in_dtype = 3 is not an attention dtype"),
    ("out_dtype=7", valid_params, setter(out_dtype=7), INVALID, "out_dtype = 7 is not an attention dtype"),
    ("out_dtype=fp8", valid_params, setter(out_dtype=DType.FP8_E4M3), NOT_SUPPORTED, "out_dtype fp8 is reserved"),
    *[(f"{t}=NULL", valid_params, setter(**{t: None}), INVALID, f"{t} is NULL") for t in TENSORS],
    *[(f"{t} misaligned", valid_params, setter(**{t: FAKE_POINTERS[t] + 8}), INVALID,
       f"{t} = {FAKE_POINTERS[t] + 8:#x} is not 16-byte aligned") for t in TENSORS],
    *[(f"{t}_stride_dim={value}", valid_params, setter(**{f"{t}_stride_dim": value}), INVALID,
       f"{t}_stride_dim must be 1 (the last dim contiguous), got {value}") for t in TENSORS for value in (0, 2)],
    *[(f"{t}_stride_{axis}<0", valid_params, setter(**{f"{t}_stride_{axis}": -128}), INVALID,
       f"{t}_stride_{axis} must be >= 0, got -128") for t in TENSORS for axis in ("batch", "seq", "head")],
    *[(f"{t}_stride_{axis} not 16 bytes", valid_params, setter(**{f"{t}_stride_{axis}": 1028}), INVALID,
       f"{t}_stride_{axis} = 1028 elements of 2 bytes is not a multiple of 16 bytes")
      for t in TENSORS for axis in ("batch", "seq", "head")],
    ("fp8 stride 8 elements", lambda: fp8_params(), setter(k_stride_head=136), INVALID,
     "k_stride_head = 136 elements of 1 bytes is not a multiple of 16 bytes"),
    *[(f"{t} offset overflow", valid_params, setter(**{f"{t}_stride_seq": 2**62}), INVALID,
       f"{t} is too large: {t}_stride_seq = {2**62} times {seqlen - 1} overflows a 64-bit offset")
      for t, seqlen in (("q", 200), ("k", 256), ("v", 256), ("out", 200))],
    ("q offsets add past int64", valid_params, setter(q_stride_batch=2**62, q_stride_seq=2**55), INVALID,
     "q is too large"),
    ("k past the address space", valid_params, setter(k=2**64 - 4096), INVALID,
     "k is too large: its last byte is past the address space"),
    ("out_stride_head=0", valid_params, setter(out_stride_head=0), INVALID, "out overlaps itself"),
    ("out_stride_seq<heads*dim", valid_params, setter(out_stride_seq=8 * 128 - 8), INVALID,
     "out overlaps itself: out_stride_seq = 1016 is smaller than the 1024 elements"),
    ("out_stride_batch<seq span", valid_params, setter(out_stride_batch=1024 * 199), INVALID,
     "out overlaps itself: out_stride_batch"),
    ("work items one past the limit",
     lambda: with_fields(valid_params(seqlen_q=128, heads_q=2**16, heads_kv=2, batch=2**15 - 1), q=2**60,
                         out=2**61, k=2**62, v=2**62 + 2**40),
     setter(batch=2**15), NOT_SUPPORTED,
     "2147483648 work items (query tiles of 128 rows x heads_q = 65536 x batch = 32768) exceed this kernel's "
     "limit of 2^31 - 65536"),
    ("work items past int32",
     lambda: with_fields(valid_params(heads_q=2**20, heads_kv=2, batch=2**11), q=2**48, out=2**49, k=2**50, v=2**51),
     setter(), NOT_SUPPORTED,
     "4294967296 work items (query tiles of 128 rows x heads_q = 1048576 x batch = 2048) exceed this kernel's "
     "limit of 2^31 - 65536"),
    ("out overlaps q", valid_params, setter(out=FAKE_POINTERS["q"] + 4096), INVALID,
     "out overlaps q: the output must not share memory with an input"),
    ("out is v", valid_params, setter(out=FAKE_POINTERS["v"]), INVALID, "out overlaps v"),
    ("lse inside k", valid_params, setter(lse=FAKE_POINTERS["k"] + 64), INVALID, "lse overlaps k"),
    ("lse inside out", valid_params, setter(lse=FAKE_POINTERS["out"] + 64), INVALID, "lse overlaps out"),
    ("lse misaligned", valid_params, setter(lse=0x7F5000000002), INVALID,
     "lse = 0x7f5000000002 is not 4-byte aligned"),
    *[(f"bf16 {d} {kind.name}", valid_params, setter(**{f"{d}__kind": kind, f"{d}__factors": FAKE_DESCALE}),
       INVALID, f"{d}: bf16 inputs take no descale")
      for d in ("q_descale", "k_descale", "v_descale")
      for kind in (DescaleKind.PER_TENSOR, DescaleKind.PER_HEAD, DescaleKind.PER_BLOCK)],
    *[(f"fp8 {d} {kind.name} factors NULL", lambda kind=kind: fp8_params(kind), setter(**{f"{d}__factors": None}),
       INVALID, f"{d}.factors is NULL")
      for d in ("q_descale", "k_descale", "v_descale") for kind in (DescaleKind.PER_TENSOR, DescaleKind.PER_HEAD)],
    ("fp8 factors misaligned", fp8_params, setter(v_descale__factors=FAKE_DESCALE + 2), INVALID,
     f"v_descale.factors = {FAKE_DESCALE + 2:#x} is not 4-byte aligned"),
    *[(f"fp8 {d} exponents NULL", lambda: fp8_params(DescaleKind.PER_BLOCK), setter(**{f"{d}__exponents": None}),
       INVALID, f"{d}.exponents is NULL") for d in ("q_descale", "k_descale", "v_descale")],
    *[(f"fp8 block_tokens={value}", lambda: fp8_params(DescaleKind.PER_BLOCK),
       setter(k_descale__block_tokens=value), INVALID, f"k_descale.block_tokens must be > 0, got {value}")
      for value in (0, -128)],
    ("fp8 descale kind=7", fp8_params, setter(q_descale__kind=7), INVALID,
     "q_descale.kind = 7 is not a flashprefill_descale_kind"),
    ("probabilities=2", fp8_params, setter(probabilities=2), INVALID,
     "probabilities = 2 is not a flashprefill_probabilities"),
    ("probabilities=-1", fp8_params, setter(probabilities=-1), INVALID,
     "probabilities = -1 is not a flashprefill_probabilities"),
    ("bf16 probabilities FP16", valid_params, setter(probabilities=Probabilities.FP16), INVALID,
     "probabilities FP16 is an fp8 option"),
    ("scores=3", fp8_params, setter(scores=3), INVALID, "scores = 3 is not a flashprefill_scores"),
    ("scores=-1", fp8_params, setter(scores=-1), INVALID, "scores = -1 is not a flashprefill_scores"),
    ("v_layout=2", fp8_params, setter(v_layout=2), INVALID, "v_layout = 2 is not a flashprefill_v_layout"),
    ("bf16 v_layout PREPARED", valid_params, setter(v_layout=VLayout.PREPARED), INVALID,
     "v_layout PREPARED holds e4m3 codes for e4m3 probabilities"),
    ("v_layout PREPARED probabilities FP16", prepared_v_params, setter(probabilities=Probabilities.FP16), INVALID,
     "it needs in_dtype FP8_E4M3 and probabilities DEFAULT"),
    ("v_layout PREPARED v_stride_seq=128", prepared_v_params, setter(v_stride_seq=128), INVALID,
     "v_stride_seq must be 1 (the PREPARED layout: each row of keys contiguous), got 128"),
    ("v_layout PREPARED v_stride_dim not 16 bytes", prepared_v_params, setter(v_stride_dim=264), INVALID,
     "v_stride_dim = 264 elements of 1 bytes is not a multiple of 16 bytes"),
    ("v_layout PREPARED rows past the address space", prepared_v_params, setter(v=2**64 - 4096), INVALID,
     "v is too large: its last byte is past the address space"),
    ("v_layout PREPARED out overlaps a row's padding", lambda: prepared_v_params(seqlen_k=250),
     setter(out=FAKE_POINTERS["v"] + 2 * 2 * 128 * 256 - 16), INVALID, "out overlaps v"),
    ("bf16 scores FP16", valid_params, setter(scores=Scores.FP16), INVALID, "scores FP16 is an fp8 option"),
    *[(f"struct_bytes={value}", valid_params, setter(struct_bytes=value), INVALID,
       f"flashprefill_params struct is {value} bytes (its struct_bytes); this library (version ")
      for value in (0, ctypes.sizeof(Params) - 8, ctypes.sizeof(Params) + 8, 2**32 - 1)],
    *[(f"dims {dim_qk}/{dim_v}", valid_params, setter(dim_qk=dim_qk, dim_v=dim_v), NOT_SUPPORTED,
       f"no kernel of this build takes dim_qk = {dim_qk} with dim_v = {dim_v}: dim_qk/dim_v must be 128/128 or 192/128")
      for dim_qk, dim_v in ((100, 100), (64, 64), (192, 192), (128, 192))],
]


@pytest.mark.parametrize("make_params, mutate, status, substring", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_argument(lib, make_params, mutate, status, substring):
    p = make_params()
    assert_valid(lib, p)
    mutate(p)
    got, message = supports(lib, p)
    assert got == status, f"{got.name}: {message}"
    assert substring in message


def test_struct_bytes_is_read_first(lib):
    """A struct of another size is refused whatever its other fields hold, and the message names both sizes."""
    p = with_fields(valid_params(), struct_bytes=304, heads_kv=3, dim_qk=-5, q=None)  # 304: 0.7.1's struct
    status, message = supports(lib, p)
    assert status == INVALID
    assert message == (f"flashprefill_params struct is 304 bytes (its struct_bytes); this library (version "
                       f"{lib.flashprefill_version().decode()}) takes {ctypes.sizeof(Params)}: rebuild against its "
                       "header and make the struct with flashprefill_params_init()")
    assert lib.flashprefill_forward(ctypes.byref(p), None) == INVALID


def test_descales_are_named_in_not_supported(lib):
    """PER_BLOCK of blocks no kernel takes: the message names each descale and its block size."""
    p = fp8_params(DescaleKind.PER_BLOCK)
    with_fields(p, q_descale__block_tokens=64, k_descale__kind=DescaleKind.NONE, v_descale__kind=DescaleKind.NONE)
    status, message = supports(lib, p)
    assert status == NOT_SUPPORTED, message
    assert "descales q PER_BLOCK of 64 tokens, k NONE, v NONE" in message, message


def test_null_params(lib):
    assert lib.flashprefill_supports(None) == INVALID
    assert lib.flashprefill_last_error() == b"params is NULL"
    assert lib.flashprefill_forward(None, None) == INVALID


VALID_CASES = {
    "bf16 gqa": valid_params,
    "seqlen 1": lambda: valid_params(seqlen_q=1, seqlen_k=1),
    "mla shape 192/128": lambda: valid_params(heads_q=16, heads_kv=16, dim_qk=192, dim_v=128),
    "non-causal seqlen_q>seqlen_k": lambda: with_fields(valid_params(seqlen_q=300), causal=0),
    "k broadcast over heads (stride 0)": lambda: with_fields(valid_params(), k_stride_head=0),
    "extent-1 axis with any stride": lambda: with_fields(valid_params(batch=1), q_stride_batch=3),
    "out head-major (permuted strides)": lambda: with_fields(
        valid_params(), out_stride_head=200 * 128, out_stride_seq=128, out_stride_batch=8 * 200 * 128),
    "lse": lambda: with_fields(valid_params(), lse=0x7F5000000000),
    "work items at the limit": lambda: with_fields(valid_params(seqlen_q=128, heads_q=2**16, heads_kv=2,
                                                                batch=2**15 - 1),
                                                   q=2**60, out=2**61, k=2**62, v=2**62 + 2**40),
    **{f"fp8 {kind.name}": (lambda kind=kind: fp8_params(kind)) for kind in DescaleKind},
    "fp8 v_layout PREPARED": prepared_v_params,
    "fp8 v_layout PREPARED, the row pitch 16 past its positions": lambda: with_fields(
        prepared_v_params(), v_stride_dim=272, v_stride_head=128 * 272, v_stride_batch=2 * 128 * 272),
}


# A prepared v: every kernel with e4m3 probabilities on Hopper (both tile sizes, float16 scores too).
@pytest.mark.parametrize("dims", [(128, 128), (192, 128)], ids=["hd128", "qk192_v128"])
@pytest.mark.parametrize("kind, block_tokens, scores", [
    (DescaleKind.PER_HEAD, 0, Scores.DEFAULT), (DescaleKind.PER_BLOCK, 128, Scores.DEFAULT),
    (DescaleKind.PER_BLOCK, 384, Scores.FP16), (DescaleKind.NONE, 0, Scores.FP16)],
    ids=["per_head", "blocks128", "blocks384 f16 scores", "none f16 scores"])
def test_hopper_prepared_v_kernels(lib, dims, kind, block_tokens, scores):
    p = with_fields(prepared_v_params(kind, dim_qk=dims[0], dim_v=dims[1]), scores=scores)
    for name in ("q_descale", "k_descale", "v_descale"):
        getattr(p, name).block_tokens = block_tokens
    status, message = supports(lib, p)
    assert status == Status.SUCCESS, f"{status.name}: {message}"


def prepare_v_params(**fields):
    """A prepare_v call that validation accepts: v (2, 250, 4, 128) row-major, prepared rows of 256."""
    p = PrepareVParams(v=FAKE_POINTERS["v"], prepared=FAKE_POINTERS["out"], batch=2, seqlen=250, heads=4, dim=128,
                       v_stride_batch=250 * 4 * 128, v_stride_seq=4 * 128, v_stride_head=128, v_stride_dim=1,
                       prepared_stride_batch=4 * 128 * 256, prepared_stride_head=128 * 256, prepared_stride_dim=256)
    return with_fields(p, **fields)


@pytest.mark.parametrize("fields, substring", [
    ({"seqlen": 0}, "seqlen must be > 0, got 0"),
    ({"v": None}, "v is NULL"),
    ({"prepared": FAKE_POINTERS["out"] + 8}, "is not 16-byte aligned"),
    ({"v_stride_dim": 2}, "v_stride_dim must be 1"),
    ({"prepared_stride_dim": 264}, "prepared_stride_dim = 264 elements of 1 bytes is not a multiple of 16 bytes"),
    ({"prepared_stride_dim": 240}, "prepared overlaps itself: prepared_stride_dim = 240 is smaller than the 256"),
    ({"prepared": FAKE_POINTERS["v"] + 4096}, "prepared overlaps v"),
], ids=["seqlen 0", "v NULL", "prepared misaligned", "v_stride_dim 2", "pitch 264", "pitch below 256 positions",
        "overlap"])
def test_prepare_v_invalid_argument(lib, fields, substring):
    # The valid call passes validation and reaches the device checks: no GPU (NO_DEVICE), or v's fake pointer refused.
    status = lib.flashprefill_prepare_v(ctypes.byref(prepare_v_params()), None)
    message = lib.flashprefill_last_error().decode()
    refused_pointer = status == INVALID and message.startswith(f"v = {FAKE_POINTERS['v']:#x}")
    assert status == Status.ERROR_NO_DEVICE or refused_pointer, message
    assert lib.flashprefill_prepare_v(ctypes.byref(prepare_v_params(**fields)), None) == INVALID
    assert substring in lib.flashprefill_last_error().decode()


def test_prepare_v_dim_of_whole_pieces(lib):
    assert lib.flashprefill_prepare_v(ctypes.byref(prepare_v_params(dim=120, v_stride_head=128)), None) == \
        NOT_SUPPORTED
    assert "prepare_v takes dim a multiple of 16, got 120" in lib.flashprefill_last_error().decode()


def test_prepare_v_struct_bytes(lib):
    p = PrepareVParams(struct_bytes=88, v=FAKE_POINTERS["v"], prepared=FAKE_POINTERS["out"])  # 88: 0.7.1's struct
    assert lib.flashprefill_prepare_v(ctypes.byref(p), None) == INVALID
    assert lib.flashprefill_last_error().decode().startswith(
        f"flashprefill_prepare_v_params struct is 88 bytes (its struct_bytes); this library (version "
        f"{lib.flashprefill_version().decode()}) takes {ctypes.sizeof(PrepareVParams)}")


def test_prepare_v_null_params(lib):
    assert lib.flashprefill_prepare_v(None, None) == INVALID
    assert lib.flashprefill_last_error() == b"params is NULL"


@pytest.mark.parametrize("make_params", VALID_CASES.values(), ids=VALID_CASES.keys())
def test_valid_call(lib, make_params):
    status, message = supports(lib, make_params())
    assert status in (Status.SUCCESS, NOT_SUPPORTED), f"{status.name}: {message}"
    assert message == "" if status == Status.SUCCESS else "no kernel of this build handles" in message


# What the Hopper library has a kernel for: (dim_qk, dim_v) x (bf16, fp8 with every descale kind and either
# kind of probabilities).
@pytest.mark.parametrize("dims", [(128, 128), (192, 128)], ids=["hd128", "qk192_v128"])
@pytest.mark.parametrize("make", [lambda **d: valid_params(**d)] +
                         [lambda kind=kind, p=p, **d: with_fields(fp8_params(kind, **d), probabilities=p)
                          for kind in DescaleKind for p in Probabilities],
                         ids=["bf16"] + [f"fp8 {kind.name} P {p.name}" for kind in DescaleKind for p in Probabilities])
def test_hopper_kernels_exist(lib, make, dims):
    status, message = supports(lib, make(**dict(zip(("dim_qk", "dim_v"), dims))))
    assert status == Status.SUCCESS, f"{status.name}: {message}"


# Float16 scores: the kernels with 192-key tiles, and for blocks of a multiple of 128 tokens (not of 384) those with
# 128-key tiles; float16 P has none.
@pytest.mark.parametrize("dims", [(128, 128), (192, 128)], ids=["hd128", "qk192_v128"])
@pytest.mark.parametrize("kind, block_tokens, probabilities, status", [
    (DescaleKind.NONE, 0, Probabilities.DEFAULT, Status.SUCCESS),
    (DescaleKind.PER_TENSOR, 0, Probabilities.DEFAULT, Status.SUCCESS),
    (DescaleKind.PER_HEAD, 0, Probabilities.DEFAULT, Status.SUCCESS),
    (DescaleKind.PER_BLOCK, 384, Probabilities.DEFAULT, Status.SUCCESS),
    (DescaleKind.PER_BLOCK, 128, Probabilities.DEFAULT, Status.SUCCESS),
    (DescaleKind.PER_HEAD, 0, Probabilities.FP16, NOT_SUPPORTED),
], ids=["none", "per_tensor", "per_head", "blocks384", "blocks128", "fp16 P"])
def test_hopper_float16_scores_kernels(lib, dims, kind, block_tokens, probabilities, status):
    p = with_fields(fp8_params(kind, dim_qk=dims[0], dim_v=dims[1]), probabilities=probabilities, scores=Scores.FP16)
    if kind == DescaleKind.PER_BLOCK:
        for name in ("q_descale", "k_descale", "v_descale"):
            getattr(p, name).block_tokens = block_tokens
    got, message = supports(lib, p)
    assert got == status, f"{got.name}: {message}"
    if status == NOT_SUPPORTED:
        assert "scores FP16" in message
    for scores in (Scores.DEFAULT, Scores.FP32):  # float32 scores exist for every row: DEFAULT takes either
        got, message = supports(lib, with_fields(p, scores=scores))
        assert got == Status.SUCCESS, f"{scores.name}: {got.name}: {message}"


@pytest.mark.parametrize("dims", [(128, 128), (192, 128)], ids=["hd128", "qk192_v128"])
@pytest.mark.parametrize("scores", [Scores.DEFAULT, Scores.FP32])
def test_bf16_takes_float32_scores(lib, dims, scores):
    got, message = supports(lib, with_fields(valid_params(dim_qk=dims[0], dim_v=dims[1]), scores=scores))
    assert got == Status.SUCCESS, f"{got.name}: {message}"


def test_last_error_cleared_after_success(lib):
    """"" after a successful call; needs some kernel in the build."""
    candidates = [valid_params(), valid_params(DType.FP8_E4M3), fp8_params(DescaleKind.PER_BLOCK)]
    accepted = [p for p in candidates if supports(lib, p)[0] == Status.SUCCESS]
    if not accepted:
        pytest.skip(markers.NO_KERNEL_BUILT)
    supports(lib, with_fields(valid_params(), batch=0))
    assert lib.flashprefill_last_error() != b""
    assert supports(lib, accepted[0]) == (Status.SUCCESS, "")


def test_last_error_replaced_by_next_failure(lib):
    supports(lib, with_fields(valid_params(), batch=0))
    assert supports(lib, with_fields(valid_params(), causal=5)) == (INVALID, "causal must be 0 or 1, got 5")


def test_last_error_is_thread_local(lib):
    supports(lib, with_fields(valid_params(), batch=0))
    seen = []
    thread = threading.Thread(target=lambda: seen.append(lib.flashprefill_last_error()))
    thread.start()
    thread.join()
    assert seen == [b""]
    assert lib.flashprefill_last_error() == b"batch must be > 0, got 0"


def test_forward_without_gpu_or_kernel_fails_cleanly(lib):
    """On a machine without a Hopper GPU (or with no kernel for the call) forward returns a status, and the
    arguments are checked as supports checks them."""
    p = valid_params()
    status = Status(lib.flashprefill_forward(ctypes.byref(p), None))
    message = lib.flashprefill_last_error().decode()
    if status == NOT_SUPPORTED:
        assert "no kernel of this build handles" in message
    else:
        # A kernel exists: the fake pointers must be refused by the device check, or there is no device.
        assert status in (Status.ERROR_NO_DEVICE, INVALID), f"{status.name}: {message}"
        assert message
    assert lib.flashprefill_forward(ctypes.byref(with_fields(p, heads_kv=3)), None) == INVALID
    assert "heads_q = 8 is not a multiple of heads_kv = 3" in lib.flashprefill_last_error().decode()


def test_status_strings(lib):
    expected = {Status.SUCCESS: b"success", INVALID: b"invalid argument", NOT_SUPPORTED: b"not supported",
                Status.ERROR_NO_DEVICE: b"no usable device", Status.ERROR_DEVICE: b"device error"}
    assert {s: lib.flashprefill_status_string(s) for s in Status} == expected
    assert lib.flashprefill_status_string(99) == b"unknown status"


def test_version_matches_header(lib):
    header = (pathlib.Path(__file__).resolve().parent.parent / "include" / "flashprefill.h").read_text()
    parts = [line.split()[2] for line in header.splitlines()
             if line.startswith("#define FLASHPREFILL_VERSION_")]
    assert lib.flashprefill_version().decode() == ".".join(parts)
