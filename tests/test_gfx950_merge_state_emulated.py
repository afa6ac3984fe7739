"""The gfx950 merge_state kernels (asm/gfx950/merge_state.inc, one code object per (in, out) dtype) run instruction by
instruction in the functional emulator (tools/gfx950_emu), launched as the library launches them: each call goes
through flashprefill_merge_state of the gfx950 library in a child process whose libamdhip64.so is tests/hip_stub.c,
which records the grid and the kernel arguments hip/merge_state_launch.c packed; those run in the emulator on memory
holding the call's tensors at the addresses the call named. Outputs are poisoned (NaN, or a finite sentinel where NaN
is an expected result) and checked against the float64 merge_state_reference with the bounds every backend meets
(tools/merge_state_bounds.py); the padding beside strided rows must keep its poison. What this does not show:
timing, and anything of the hardware the emulator does not model (its v_exp_f32 and v_log_f32 are correctly rounded,
the chip's are within 1 ulp: the float32 bound leaves 2^-21 for that)."""
import ctypes
import json
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import kernargs
import hip_stub
import markers
from flashprefill._params import DType, Status

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from merge_state_bounds import DTYPE_PAIR_IDS, DTYPE_PAIRS, check_merge, check_nonfinite, nonfinite_parts  # noqa: E402

LIBRARY = ROOT / "build" / "libflashprefill_gfx950.so"
PYTHON = ROOT / "python"  # the child's flashprefill (tools/gfx950_mutate.py moves ROOT to a mutant's tree)
pytestmark = [pytest.mark.emulator, markers.needs_llvm22, markers.needs_cc]
RNG = np.random.default_rng()  # each test's input (and schedule) seed drawn from it, named in its failures
DTYPES = {"bfloat16": DType.BF16, "float32": DType.FP32}
SHORT = {"bfloat16": "bf16", "float32": "f32"}
SENTINEL = 1000.0  # a finite poison, exact in bf16

# The call, in the child: params from JSON, the library's status, last error, and the stub's record of the launch.
_CALL_SCRIPT = r"""
import ctypes, json, sys
from flashprefill._params import MergeStateParams
hip = ctypes.CDLL("libamdhip64.so")
lib = ctypes.CDLL(sys.argv[1])
lib.flashprefill_last_error.restype = ctypes.c_char_p
p = MergeStateParams()
for name, value in json.loads(sys.argv[2]).items():
    setattr(p, name, value)
status = lib.flashprefill_merge_state(ctypes.byref(p), None)
kernarg = ctypes.create_string_buffer(1024)
size = hip.stub_last_kernarg(kernarg) if status == 0 else 0
print(json.dumps([status, lib.flashprefill_last_error().decode(), [hip.stub_last_grid(i) for i in range(3)],
                  kernarg.raw[:size].hex()]))
"""


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    if not LIBRARY.exists():
        pytest.fail(f"{LIBRARY} is missing: run `make amd`")
    return hip_stub.build(tmp_path_factory.mktemp("merge_state_stub"))


def _call(stub, params):
    """flashprefill_merge_state(params) through the gfx950 library and the stub: (status, error, grid, kernarg)."""
    out = hip_stub.run(stub, [sys.executable, "-c", _CALL_SCRIPT, LIBRARY, json.dumps(params)], PYTHONPATH=str(PYTHON))
    status, error, grid, kernarg = json.loads(out)
    return Status(status), error, tuple(grid), bytes.fromhex(kernarg)


class Tensor:
    """A (batch, seq, heads, dim) array in the emulator's memory, rows padded by `pad` elements: the call sees the
    view; `whole()` reads back the buffer with its padding."""

    def __init__(self, memory, host, dtype, pad):
        self.memory, self.dtype, self.shape, self.pad = memory, dtype, host.shape, pad
        self.narrow = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32)
        whole = np.full((*host.shape[:-1], host.shape[-1] + pad), np.nan, self.narrow)
        whole[..., :host.shape[-1]] = host.astype(np.float32).astype(self.narrow)
        self.address = memory.alloc_array(whole)
        batch, seq, heads, dim = host.shape
        self.strides = {"batch": seq * heads * (dim + pad), "seq": heads * (dim + pad), "head": dim + pad, "dim": 1}

    def whole(self):
        return self.memory.read(self.address, self.narrow, (*self.shape[:-1], self.shape[-1] + self.pad)).astype(
            np.float64)

    def values(self):
        """The view's values, as float64."""
        return self.whole()[..., :self.shape[-1]]


def _merge(stub, out_a, lse_a, out_b, lse_b, out, lse, seed):
    """One call through the library; its launch in the emulator. Returns the grid."""
    from gfx950_emu import load_code_object, run_kernel
    batch, seqlen, heads, dim = out_a.shape
    params = {"out_a": out_a.address, "out_b": out_b.address, "out": out.address, "lse_a": lse_a, "lse_b": lse_b,
              "lse": lse, "batch": batch, "seqlen_q": seqlen, "heads_q": heads, "dim_v": dim,
              "in_dtype": int(DTYPES[out_a.dtype]), "out_dtype": int(DTYPES[out.dtype])}
    for name, tensor in (("out_a", out_a), ("out_b", out_b), ("out", out)):
        params.update({f"{name}_stride_{axis}": stride for axis, stride in tensor.strides.items()})
    status, error, grid, kernarg = _call(stub, params)
    assert status == Status.SUCCESS, error
    assert len(kernarg) == ctypes.sizeof(kernargs.MergeStateKernarg)
    name = f"merge_state_{SHORT[out_a.dtype]}_{SHORT[out.dtype]}"
    co = load_code_object(str(ROOT / "build" / "gfx950" / f"{name}.co"))
    run_kernel(co, name, grid=grid, workgroup_size=64, kernarg=kernarg, memory=out.memory, seed=seed)
    return grid


def _parts(memory, rng, shape, in_dtype, pads):
    """Two parts: out N(0, 1), lse ~ N(5, 4) as float32 (batch, heads, seqlen)."""
    batch, seqlen, heads, _ = shape
    parts = []
    for pad in pads:
        out = Tensor(memory, rng.standard_normal(shape), in_dtype, pad)
        lse = rng.normal(5.0, 4.0, (batch, heads, seqlen)).astype(np.float32)
        parts.append((out, lse, memory.alloc_array(lse)))
    return parts


def _memory():
    from gfx950_emu import GlobalMemory
    return GlobalMemory()


# (batch, seqlen_q, heads_q, dim_v): a lane's piece is 8 elements, 64 lanes a wave
SHAPES = {
    "dim 128, rows not a multiple of a workgroup's": (2, 37, 2, 128),
    "dim 8: 64 rows a pass": (1, 600, 1, 8),
    "dim 136: 17 pieces, 3 rows a pass, 13 lanes idle": (1, 26, 2, 136),
    "dim 520: 65 pieces, a lane takes two": (1, 3, 2, 520),
    "seqlen 1": (1, 1, 1, 64),
}


@pytest.mark.parametrize("padded", [False, True], ids=["contiguous", "padded rows"])
@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=DTYPE_PAIR_IDS)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_matches_the_reference(stub, shape, dtypes, padded):
    in_dtype, out_dtype = dtypes
    seed = int(RNG.integers(1 << 31))
    rng, memory = np.random.default_rng(seed), _memory()
    pad = 8 if padded else 0
    (out_a, lse_a, lse_a_at), (out_b, lse_b, lse_b_at) = _parts(memory, rng, shape, in_dtype, (pad, 2 * pad))
    out = Tensor(memory, np.full(shape, np.nan), out_dtype, pad)
    lse_at = memory.alloc_array(np.full(lse_a.shape, np.nan, np.float32))
    _merge(stub, out_a, lse_a_at, out_b, lse_b_at, out, lse_at, seed)
    lse = memory.read(lse_at, np.float32, lse_a.shape).astype(np.float64)
    host = [out_a.values(), lse_a.astype(np.float64), out_b.values(), lse_b.astype(np.float64)]
    check_merge(out.values(), lse, host, out_dtype)
    if padded:
        assert np.isnan(out.whole()[..., shape[-1]:]).all(), f"merge_state wrote past the rows (seed {seed})"


@pytest.mark.parametrize("into", ["a", "b"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_in_place(stub, dtype, into):
    seed = int(RNG.integers(1 << 31))
    rng, memory = np.random.default_rng(seed), _memory()
    shape = (2, 40, 3, 128)
    (out_a, lse_a, lse_a_at), (out_b, lse_b, lse_b_at) = _parts(memory, rng, shape, dtype, (0, 0))
    host = [out_a.values(), lse_a.astype(np.float64), out_b.values(), lse_b.astype(np.float64)]
    out, lse_at = (out_a, lse_a_at) if into == "a" else (out_b, lse_b_at)
    _merge(stub, out_a, lse_a_at, out_b, lse_b_at, out, lse_at, seed)
    check_merge(out.values(), memory.read(lse_at, np.float32, lse_a.shape).astype(np.float64), host, dtype)


def test_lse_optional(stub):
    """lse NULL: out alone written (the kernel skips the lse store), the same out as with lse."""
    seed = int(RNG.integers(1 << 31))
    rng, memory = np.random.default_rng(seed), _memory()
    shape = (1, 30, 2, 64)
    (out_a, lse_a, lse_a_at), (out_b, lse_b, lse_b_at) = _parts(memory, rng, shape, "bfloat16", (0, 0))
    outs = []
    for with_lse in (True, False):
        out = Tensor(memory, np.full(shape, np.nan), "bfloat16", 0)
        lse_at = memory.alloc_array(np.full(lse_a.shape, np.nan, np.float32)) if with_lse else 0
        _merge(stub, out_a, lse_a_at, out_b, lse_b_at, out, lse_at, seed)
        outs.append(out.values())
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.isfinite(outs[1]).all()


@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids=DTYPE_PAIR_IDS)
def test_rows_that_are_not_finite(stub, dtypes):
    """The rows of merge_state_bounds.nonfinite_parts. Outputs poisoned with a finite value, so that an expected NaN
    proves the element written."""
    in_dtype, out_dtype = dtypes
    seed = int(RNG.integers(1 << 31))
    rng, memory = np.random.default_rng(seed), _memory()
    shape = (2, 12, 3, 64)
    host = nonfinite_parts(rng, shape, in_dtype)
    out_a, out_b = (Tensor(memory, host[f"out_{part}"], in_dtype, 0) for part in ("a", "b"))
    lse_a_at, lse_b_at = (memory.alloc_array(host[f"lse_{part}"].astype(np.float32)) for part in ("a", "b"))
    out = Tensor(memory, np.full(shape, SENTINEL), out_dtype, 0)
    lse_at = memory.alloc_array(np.full((2, 3, 12), SENTINEL, np.float32))
    _merge(stub, out_a, lse_a_at, out_b, lse_b_at, out, lse_at, seed)
    check_nonfinite(out.values(), memory.read(lse_at, np.float32, (2, 3, 12)).astype(np.float64), host, out_dtype)


def test_launch_shape(stub):
    """The grid: one workgroup per 8 passes of the wave over one (batch, head)'s rows; the kernel arguments name the
    tensors' bytes."""
    memory = _memory()
    shape = (3, 100, 5, 128)  # 16 pieces a row: 4 rows a pass, 32 a workgroup
    parts = [Tensor(memory, np.zeros(shape), "bfloat16", 8) for _ in range(3)]
    params = {"out_a": parts[0].address, "out_b": parts[1].address, "out": parts[2].address, "lse_a": 1 << 40,
              "lse_b": 2 << 40, "lse": 0, "batch": 3, "seqlen_q": 100, "heads_q": 5, "dim_v": 128,
              "in_dtype": int(DType.BF16), "out_dtype": int(DType.BF16)}
    for name, tensor in zip(("out_a", "out_b", "out"), parts):
        params.update({f"{name}_stride_{axis}": stride for axis, stride in tensor.strides.items()})
    status, error, grid, kernarg = _call(stub, params)
    assert status == Status.SUCCESS, error
    a = kernargs.MergeStateKernarg.from_buffer_copy(kernarg)
    assert grid == (4, 5, 3)
    assert (a.pieces_per_row, a.rows_per_pass, a.rows_per_workgroup) == (16, 4, 32)
    assert (a.a_stride_seq, a.a_stride_head, a.a_stride_batch) == (5 * 136 * 2, 136 * 2, 100 * 5 * 136 * 2)
    assert (a.lse_a, a.lse_b, a.lse) == (1 << 40, 2 << 40, 0)
