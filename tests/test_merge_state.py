"""flashprefill_merge_state without a GPU: its validation through the C ABI of both libraries (fake pointers, never
dereferenced); the float64 reference's properties: merging attention over keys [0, s) and [s, n) is attention over
[0, n), with the causal mask aligned bottom-right, and the rule for rows that are not finite; fp.merge_state's own
checks and the params it passes; the Hopper kernel's 16-byte accesses in its machine code."""
import ctypes
import pathlib
import re
import subprocess

import numpy as np
import pytest

import markers

from flashprefill import _lib
from flashprefill._params import DType, MergeStateParams, Status
from flashprefill.reference import attention_reference, merge_state_reference, relative_l2

INVALID = Status.ERROR_INVALID_ARGUMENT
NOT_SUPPORTED = Status.ERROR_NOT_SUPPORTED
ELEMENT_BYTES = {DType.BF16: 2, DType.FP32: 4}
FAKE = {"out_a": 0x7F0000000000, "out_b": 0x7F1000000000, "out": 0x7F2000000000, "lse_a": 0x7F3000000000,
        "lse_b": 0x7F4000000000, "lse": 0x7F5000000000}
SHAPE = {"batch": 2, "seqlen_q": 100, "heads_q": 8, "dim_v": 128}


@pytest.fixture(scope="module", params=["cuda", "hip"])
def lib(request):
    return _lib.lib(request.param)


def valid_params(in_dtype=DType.BF16, out_dtype=DType.BF16, **shape):
    """A call validation accepts: row-major tensors of SHAPE."""
    shape = {**SHAPE, **shape}
    p = MergeStateParams(in_dtype=in_dtype, out_dtype=out_dtype, **shape, **FAKE)
    heads, dim = shape["heads_q"], shape["dim_v"]
    for tensor in ("out_a", "out_b", "out"):
        for axis, stride in (("batch", shape["seqlen_q"] * heads * dim), ("seq", heads * dim), ("head", dim),
                             ("dim", 1)):
            setattr(p, f"{tensor}_stride_{axis}", stride)
    return p


def merge(lib, p):
    status = Status(lib.flashprefill_merge_state(None if p is None else ctypes.byref(p), None))
    return status, lib.flashprefill_last_error().decode()


def passes_validation(lib, p):
    """Validation accepted p: the backend then asks the device (NO_DEVICE here; on a GPU, the fake pointers are not
    device memory)."""
    status, message = merge(lib, p)
    return status == Status.ERROR_NO_DEVICE or (status == INVALID and "is not device memory" in message)


def with_fields(**fields):
    def mutate(p):
        for name, value in fields.items():
            setattr(p, name, value)
        return p
    return mutate


TENSORS = ("out_a", "out_b", "out")
BATCH_SPAN_BYTES = 100 * 8 * 128 * 2
CASES = [
    *[(f"{name}={value}", with_fields(**{name: value}), INVALID, f"{name} must be > 0, got {value}")
      for name in SHAPE for value in (0, -1)],
    *[(f"{field}={value}", with_fields(**{field: value}), INVALID,
       f"{field} must be FLASHPREFILL_DTYPE_BF16 or _FP32, got {value}")
      for field in ("in_dtype", "out_dtype") for value in (0, int(DType.FP8_E4M3), 9)],
    *[(f"{t}=NULL", with_fields(**{t: None}), INVALID, f"{t} is NULL") for t in (*TENSORS, "lse_a", "lse_b")],
    *[(f"{t} misaligned", with_fields(**{t: FAKE[t] + 8}), INVALID, f"{t} = {FAKE[t] + 8:#x} is not 16-byte aligned")
      for t in TENSORS],
    *[(f"{t} misaligned", with_fields(**{t: FAKE[t] + 2}), INVALID, f"{t} = {FAKE[t] + 2:#x} is not 4-byte aligned")
      for t in ("lse_a", "lse_b", "lse")],
    *[(f"{t}_stride_dim={value}", with_fields(**{f"{t}_stride_dim": value}), INVALID,
       f"{t}_stride_dim must be 1 (the last dim contiguous), got {value}") for t in TENSORS for value in (0, 2)],
    *[(f"{t}_stride_{axis}<0", with_fields(**{f"{t}_stride_{axis}": -128}), INVALID,
       f"{t}_stride_{axis} must be >= 0, got -128") for t in TENSORS for axis in ("batch", "seq", "head")],
    *[(f"{t}_stride_{axis} not 16 bytes", with_fields(**{f"{t}_stride_{axis}": 1028}), INVALID,
       f"{t}_stride_{axis} = 1028 elements of 2 bytes is not a multiple of 16 bytes")
      for t in TENSORS for axis in ("batch", "seq", "head")],
    ("out_stride_seq<heads*dim", with_fields(out_stride_seq=8 * 128 - 8), INVALID,
     "out overlaps itself: out_stride_seq = 1016 is smaller than the 1024 elements"),
    ("out_a past the address space", with_fields(out_a=2**64 - 4096), INVALID,
     "out_a is too large: its last byte is past the address space"),
    ("out inside out_a", with_fields(out=FAKE["out_a"] + 4096), INVALID,
     "out overlaps out_a: in place needs out to be out_a itself (the same pointer, strides and dtype)"),
    ("out is out_b, other strides", with_fields(out=FAKE["out_b"], out_stride_head=256, out_stride_seq=2048,
                                                out_stride_batch=2048 * 100), INVALID, "out overlaps out_b"),
    ("out is out_a, float32", with_fields(out=FAKE["out_a"], out_dtype=DType.FP32), INVALID, "out overlaps out_a"),
    ("out over lse_a", with_fields(lse_a=FAKE["out"] + BATCH_SPAN_BYTES), INVALID, "out overlaps lse_a"),
    ("out over lse_b", with_fields(out=FAKE["lse_b"] - 64), INVALID, "out overlaps lse_b"),
    ("lse inside lse_a", with_fields(lse=FAKE["lse_a"] + 4), INVALID,
     "lse overlaps lse_a: in place needs lse to be lse_a itself"),
    ("lse inside lse_b", with_fields(lse=FAKE["lse_b"] - 4), INVALID, "lse overlaps lse_b"),
    ("lse inside out_a", with_fields(lse=FAKE["out_a"] + 64), INVALID, "lse overlaps out_a"),
    ("lse inside out", with_fields(lse=FAKE["out"] + 64), INVALID, "lse overlaps out"),
    *[(f"dim_v={dim}", with_fields(dim_v=dim, out_a_stride_head=16, out_b_stride_head=16, out_stride_head=16),
       NOT_SUPPORTED, f"merge_state takes dim_v a multiple of 8 (whole 16-byte pieces of bf16), got {dim}")
      for dim in (4, 12)],
    *[(f"struct_bytes={value}", with_fields(struct_bytes=value), INVALID,
       f"flashprefill_merge_state_params struct is {value} bytes (its struct_bytes); this library (version ")
      for value in (0, ctypes.sizeof(MergeStateParams) - 8, ctypes.sizeof(MergeStateParams) + 16)],
]


@pytest.mark.parametrize("mutate, status, substring", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_argument(lib, mutate, status, substring):
    assert passes_validation(lib, valid_params())
    got, message = merge(lib, mutate(valid_params()))
    assert got == status and substring in message, message


def test_null_params(lib):
    assert merge(lib, None) == (INVALID, "params is NULL")


def test_struct_bytes_is_read_first(lib):
    p = with_fields(struct_bytes=4, batch=0, out_a=None)(valid_params())
    status, message = merge(lib, p)
    assert status == INVALID and message.startswith("flashprefill_merge_state_params struct is 4 bytes"), message


VALID = {
    "bf16": valid_params(),
    "float32": valid_params(DType.FP32, DType.FP32),
    "bf16 to float32": valid_params(DType.BF16, DType.FP32),
    "float32 to bf16": valid_params(DType.FP32, DType.BF16),
    "in place a": with_fields(out=FAKE["out_a"], lse=FAKE["lse_a"])(valid_params()),
    "in place b, float32": with_fields(out=FAKE["out_b"], lse=FAKE["lse_b"])(valid_params(DType.FP32, DType.FP32)),
    "out_a is out_b": with_fields(out_b=FAKE["out_a"], lse_b=FAKE["lse_a"])(valid_params()),
    "no lse": with_fields(lse=None)(valid_params()),
    "seqlen 1, dim 8": valid_params(seqlen_q=1, dim_v=8, batch=1, heads_q=1),
    # views of a (batch, seq, 3 parts, heads, dim) buffer: strides of padded rows; one head: its stride unused
    "strided views": with_fields(out_a_stride_seq=3 * 8 * 128, out_a_stride_batch=100 * 3 * 8 * 128)(valid_params()),
    "one head, odd head stride": with_fields(out_stride_head=3)(valid_params(heads_q=1)),
}


@pytest.mark.parametrize("p", VALID.values(), ids=VALID.keys())
def test_valid_calls_pass_validation(lib, p):
    assert passes_validation(lib, p), merge(lib, p)


# ---------------------------------------------------------------------------------------------------------------
# The reference

def _inputs(rng, batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim=32):
    return (rng.standard_normal((batch, seqlen_q, heads_q, dim)), rng.standard_normal((batch, seqlen_k, heads_kv, dim)),
            rng.standard_normal((batch, seqlen_k, heads_kv, dim)))


def _assert_merges_to(parts, whole):
    (out_a, lse_a), (out_b, lse_b) = parts
    out, lse = merge_state_reference(out_a, lse_a, out_b, lse_b)
    assert relative_l2(out, whole[0]) < 1e-13
    # a log's rounding error is absolute (a few ulp of the row max), so an lse near 0 needs atol, not rtol alone
    np.testing.assert_allclose(lse, whole[1], rtol=1e-13, atol=1e-13)


# (seqlen_k = n, prefix s): the queries are the last seqlen_q <= n - s tokens
@pytest.mark.parametrize("n, s, seqlen_q", [(64, 40, 24), (64, 40, 10), (50, 1, 49), (50, 49, 1), (7, 3, 2)])
def test_cascade_prefix_then_causal_suffix(rng, n, s, seqlen_q):
    """Keys [0, s) seen whole (non-causal), keys [s, n) causally: with the mask aligned bottom-right, query i (token
    n - seqlen_q + i) sees suffix key j - s <= i + (n - s - seqlen_q), i.e. key j <= i + n - seqlen_q: the causal mask
    of attention over [0, n)."""
    q, k, v = _inputs(rng, 2, seqlen_q, n, 4, 2)
    prefix = attention_reference(q, k[:, :s], v[:, :s], causal=False, return_lse=True)
    suffix = attention_reference(q, k[:, s:], v[:, s:], causal=True, return_lse=True)
    _assert_merges_to((prefix, suffix), attention_reference(q, k, v, causal=True, return_lse=True))


@pytest.mark.parametrize("n, s", [(64, 32), (65, 1), (65, 64)])
def test_context_parallel_halves(rng, n, s):
    q, k, v = _inputs(rng, 1, 33, n, 4, 4)
    parts = [attention_reference(q, k[:, keys], v[:, keys], causal=False, return_lse=True)
             for keys in (slice(0, s), slice(s, n))]
    _assert_merges_to(parts, attention_reference(q, k, v, causal=False, return_lse=True))


def _masked_attention(q, k, v, visible):
    """float64 attention of q (batch, seqlen_q, heads, dim) over k, v of the same heads where visible[i, j]; rows that
    see no key: out 0, lse -inf (as attention_reference)."""
    scores = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(visible, scores, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.logaddexp.reduce(scores, axis=-1)
        p = np.where(np.isfinite(lse)[..., None], np.exp(scores - lse[..., None]), 0.0)
    return np.einsum("bhij,bjhd->bihd", p, v), lse


@pytest.mark.parametrize("s", [1, 20, 47])
def test_causal_split_with_rows_that_see_no_key(rng, s):
    """All n tokens as queries, keys split at s: query i < s sees no key of [s, n) (that part's row is out 0, lse
    -inf), and the merge takes the other part exactly."""
    n = 48
    q, k, v = _inputs(rng, 2, n, n, 3, 3)
    causal = np.arange(n)[None, :] <= np.arange(n)[:, None]
    keys = np.arange(n)[None, :]
    first, second = (_masked_attention(q, k, v, causal & part) for part in (keys < s, keys >= s))
    assert np.all(second[1][:, :, :s] == -np.inf) and np.all(second[0][:, :s] == 0)
    out, lse = merge_state_reference(first[0], first[1], second[0], second[1])
    assert np.array_equal(out[:, :s], first[0][:, :s]) and np.array_equal(lse[..., :s], first[1][..., :s])
    _assert_merges_to((first, second), attention_reference(q, k, v, causal=True, return_lse=True))


def _random_state(rng, batch=2, seqlen_q=5, heads_q=3, dim_v=8):
    out = rng.standard_normal((batch, seqlen_q, heads_q, dim_v))
    lse = rng.normal(4.0, 3.0, (batch, heads_q, seqlen_q))
    return out, lse


def test_symmetric_and_associative(rng):
    (a, la), (b, lb), (c, lc) = (_random_state(rng) for _ in range(3))
    ab = merge_state_reference(a, la, b, lb)
    ba = merge_state_reference(b, lb, a, la)
    assert np.array_equal(ab[0], ba[0]) and np.array_equal(ab[1], ba[1])
    left = merge_state_reference(*ab, c, lc)
    right = merge_state_reference(a, la, *merge_state_reference(b, lb, c, lc))
    assert relative_l2(left[0], right[0]) < 1e-14
    np.testing.assert_allclose(left[1], right[1], rtol=1e-14)


def test_rows_that_are_not_finite(rng):
    (a, la), (b, lb) = _random_state(rng), _random_state(rng)
    # row (0, 0, h): a saw no key; (0, 1, h): neither did; (1, 2, h): lse_a NaN; (1, 3, h): lse_b +inf
    la[0, :, 0] = lb[0, :, 1] = la[0, :, 1] = -np.inf
    a[0, 0] = a[0, 1] = b[0, 1] = 0.0
    la[1, :, 2], lb[1, :, 3] = np.nan, np.inf
    a[1, 4, 1, 5] = np.nan  # one element
    out, lse = merge_state_reference(a, la, b, lb)
    assert np.array_equal(out[0, 0], b[0, 0]) and np.array_equal(lse[0, :, 0], lb[0, :, 0])
    assert np.all(out[0, 1] == 0) and np.all(lse[0, :, 1] == -np.inf)
    assert np.isnan(out[1, 2:4]).all() and np.isnan(lse[1, :, 2:4]).all()
    assert np.isnan(out[1, 4, 1, 5]) and np.isfinite(np.delete(out[1, 4, 1], 5)).all()
    assert np.isfinite(lse[1, :, 4]).all()
    finite_rows = np.ones((2, 5), bool)
    finite_rows[0, :2] = finite_rows[1, 2:5] = False
    assert np.isfinite(out[finite_rows]).all() and np.isfinite(lse.transpose(0, 2, 1)[finite_rows]).all()


def test_nan_in_a_part_without_keys_still_reaches(rng):
    """IEEE arithmetic: weight 0 times NaN is NaN, so a part with lse -inf must hold finite values (attention's 0)."""
    (a, la), (b, lb) = _random_state(rng), _random_state(rng)
    la[0, 1, 2] = -np.inf
    a[0, 2, 1, 3] = np.nan
    out, _ = merge_state_reference(a, la, b, lb)
    assert np.isnan(out[0, 2, 1, 3]) and np.isfinite(np.delete(out[0, 2, 1], 3)).all()


# ---------------------------------------------------------------------------------------------------------------
# fp.merge_state's own checks and what it passes to the library: DeviceArray stand-ins at fake addresses, the device
# check before the call bypassed, so the library's validation answers (then NO_DEVICE here, or on a GPU machine
# INVALID_ARGUMENT for memory that is not the device's).

@pytest.fixture
def no_device_check(monkeypatch):
    from flashprefill import _arrays, _devices
    monkeypatch.setattr(_devices, "require", lambda like, name, backend: None)
    monkeypatch.setattr(_arrays, "resolve_stream", lambda stream, like, device: 0)


def _fake(name, shape, dtype="bfloat16", strides=None):
    from flashprefill import DeviceArray
    return DeviceArray(FAKE[name], shape, dtype, strides=strides)


def _fake_call(shape=(2, 100, 8, 128), dtype="bfloat16", **override):
    batch, seqlen, heads, _ = shape
    args = {"out_a": _fake("out_a", shape, dtype), "lse_a": _fake("lse_a", (batch, heads, seqlen), "float32"),
            "out_b": _fake("out_b", shape, dtype), "lse_b": _fake("lse_b", (batch, heads, seqlen), "float32"),
            "out": _fake("out", shape, dtype), "lse_out": _fake("lse", (batch, heads, seqlen), "float32")}
    return {**args, **override}


def _library_answer(call):
    import flashprefill as fp
    with pytest.raises(fp.Error) as info:
        fp.merge_state(**call)
    return info.value


def test_python_passes_a_valid_call(no_device_check):
    for call in (_fake_call(), _fake_call(dtype="float32"), _fake_call(out=_fake("out_a", (2, 100, 8, 128)))):
        error = _library_answer(call)
        assert error.status == Status.ERROR_NO_DEVICE or "is not device memory" in error.message, error


def test_python_passes_strides(no_device_check):
    out = _fake("out", (2, 100, 8, 128), strides=(100 * 8 * 128, 8 * 128, 64, 1))
    error = _library_answer(_fake_call(out=out))
    assert error.status == INVALID and "out overlaps itself: out_stride_head = 64" in error.message, error
    out_a = _fake("out_a", (2, 100, 8, 128), strides=(100 * 8 * 136, 8 * 136, 136, 1))
    error = _library_answer(_fake_call(out=_fake("out_a", (2, 100, 8, 128)), out_a=out_a))
    assert error.status == INVALID and "out overlaps out_a: in place needs out to be out_a itself" in error.message


@pytest.mark.parametrize("override, exception, match", [
    ({"out_b": ("out_b", (2, 100, 8, 64))}, ValueError, r"out_b must be bfloat16 or float32 of shape"),
    ({"out_b": ("out_b", (2, 100, 8, 128), "float32")}, TypeError, "out_a and out_b must have one dtype"),
    ({"out": ("out", (2, 100, 8, 128), "int8")}, ValueError, "out must be bfloat16 or float32"),
    ({"lse_a": ("lse_a", (2, 100, 8), "float32")}, ValueError, r"lse_a must be contiguous float32 of shape"),
    ({"lse_out": ("lse", (2, 8, 100), "bfloat16")}, ValueError, "lse_out must be contiguous float32"),
    ({"lse_b": ("lse_b", (2, 8, 100), "float32", (1600, 1, 8))}, ValueError, "lse_b must be contiguous"),
])
def test_python_checks(no_device_check, override, exception, match):
    import flashprefill as fp
    call = _fake_call(**{key: _fake(*value) for key, value in override.items()})
    with pytest.raises(exception, match=match):
        fp.merge_state(**call)


# ---------------------------------------------------------------------------------------------------------------
# The Hopper kernel's machine code: 16-byte global loads and stores of out_a, out_b and out, the only narrower ones
# the three lse, nothing in local memory.

MERGE_OBJECT = pathlib.Path(__file__).resolve().parents[1] / "build" / "merge_state.cu.o"


@pytest.fixture(scope="module")
def merge_sass():
    from test_sass import _cuobjdump
    if not MERGE_OBJECT.exists():
        pytest.fail(f"{MERGE_OBJECT} is missing: run `make` first")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip(markers.NO_CUOBJDUMP)
    text = subprocess.run([tool, "--dump-sass", str(MERGE_OBJECT)], capture_output=True, text=True, check=True).stdout
    return {name.strip(): body for name, _, body in (chunk.partition("\n") for chunk in text.split("Function : ")[1:])}


def test_merge_kernel_moves_16_bytes_an_access(merge_sass):
    kernels = {name: body for name, body in merge_sass.items() if "merge_state_kernel" in name}
    assert len(kernels) == 4, list(merge_sass)  # bf16 / float32 in, bf16 / float32 out
    for name, body in kernels.items():
        wide_loads, narrow_loads = re.findall(r"\bLDG\.E\.128\b", body), re.findall(r"\bLDG\.E\b(?!\.)", body)
        wide_stores, narrow_stores = re.findall(r"\bSTG\.E\.128\b", body), re.findall(r"\bSTG\.E\b(?!\.)", body)
        assert wide_loads and wide_stores, f"{name}: no 16-byte global loads or stores"
        assert (len(narrow_loads), len(narrow_stores)) == (2, 1), \
            f"{name}: {len(narrow_loads)} 4-byte loads and {len(narrow_stores)} 4-byte stores (lse_a, lse_b; lse)"
        assert not re.findall(r"\b(LDL|STL|LDG\.E\.(?:U?8|U?16|64)|STG\.E\.(?:U?8|U?16|64))\b", body), name
