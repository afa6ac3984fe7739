"""The gfx950 quantizer (asm/gfx950/quantize.inc, one code object per head dim: quantize_d32, _d64, .. _d256) runs instruction by instruction in the functional emulator
(tools/gfx950_emu) on small problems, against its numpy model bit for bit: fp8.quantize_blocks(prepare.transform(x,
signs, subtract), block_tokens, code_max), as the Hopper quantizer is checked on the GPU (tests/test_quantize_gpu.py).
Outputs are poisoned first. What this does not show: timing, and anything of the hardware the emulator does not
model. Each run takes its input seed as the emulator's schedule seed (registers and LDS undefined at launch, loads
landing at the latest point their s_waitcnt allows: tools/gfx950_emu/run.py)."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import kernargs
import markers
import shapes

from flashprefill import fp8, prepare

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
RNG = np.random.default_rng()
POISON_CODE, POISON_EXPONENT = 0x7F, -128


Kernarg = kernargs.QuantizeKernarg


def quantize(x, block_tokens, signs=None, subtract=None, code_max=448.0, x_view=None, seed=0):
    """Runs both phases of the kernel on x (bf16 or float32 numpy, (batch, seq, heads, dim)) under the emulator's
    schedule `seed`; x_view: a strided view of a larger array to read x from instead (its base goes to the device).
    Returns (codes uint8, exponents int8) read back from poisoned outputs."""
    from gfx950_emu import GlobalMemory
    assert kernargs.offsets(Kernarg) == kernargs.assembly_offsets(kernargs.QUANTIZE_CONTRACT)
    src = x if x_view is None else x_view
    batch, seq, heads, dim = src.shape
    blocks = -(-seq // block_tokens)
    mem = GlobalMemory()
    base = src if x_view is None else x_view.base
    x_addr = mem.alloc_array(np.ascontiguousarray(base))
    codes = mem.alloc_array(np.full((batch, seq, heads, dim), POISON_CODE, np.uint8))
    exponents = mem.alloc_array(np.full((batch, heads, blocks), POISON_EXPONENT, np.int8))
    fraction, exponent = np.frexp(np.float32(code_max))
    a = Kernarg(x=x_addr + (0 if x_view is None else x_view.__array_interface__["data"][0]
                            - base.__array_interface__["data"][0]),
                codes=codes, exponents=exponents,
                signs=0 if signs is None else mem.alloc_array(np.asarray(signs, np.float32)),
                subtract=0 if subtract is None else mem.alloc_array(np.ascontiguousarray(subtract, np.float32)),
                seqlen=seq, heads=heads, block_tokens=block_tokens, blocks=blocks,
                x_fp32=int(src.dtype == np.float32), code_max_exponent=int(exponent),
                code_max_mantissa=int(np.float32(code_max).view(np.uint32) & 0x7FFFFF))
    a.x_stride_batch, a.x_stride_seq, a.x_stride_head = src.strides[0], src.strides[1], src.strides[2]
    a.codes_stride_batch, a.codes_stride_seq, a.codes_stride_head = seq * heads * dim, heads * dim, dim
    run_phases(a, dim, (blocks, heads, batch), mem, seed)
    return mem.read(codes, np.uint8, (batch, seq, heads, dim)), mem.read(exponents, np.int8, (batch, heads, blocks))


def run_phases(a, dim, grid, memory, seed, root=None):
    """Both launches of quantize_d<dim> (from the tree `root`, which tools/gfx950_mutate.py points at a mutant's) with
    kernel arguments `a`, as hip/quantize_launch.c makes them: phase 0, then 1, each under its own schedule seed.
    root None: this module's ROOT."""
    from gfx950_emu import load_code_object, run_kernel
    name = f"quantize_d{dim}"
    co = load_code_object(str(pathlib.Path(root or ROOT) / "build" / "gfx950" / f"{name}.co"))
    for phase in (0, 1):
        a.phase = phase
        run_kernel(co, name, grid=grid, workgroup_size=64, kernarg=bytes(a), memory=memory, seed=seed + phase)


def _uneven(rng, shape):
    """N(0,1) times 2^-6..2^6 per 16 tokens and head, one channel 30x larger (as tests/test_quantize_gpu.py)."""
    batch, seq, heads, dim = shape
    x = rng.standard_normal(shape)
    x *= np.exp2(rng.integers(-6, 7, (batch, (seq + 15) // 16, heads)))[:, np.arange(seq) // 16, :, None]
    x[..., 3] *= 30
    return x


def _check(x, block_tokens, signs=None, subtract=None, code_max=448.0, x_view=None):
    seed = int(RNG.integers(1 << 31))
    codes, exponents = quantize(x, block_tokens, signs, subtract, code_max, x_view, seed)
    src = x if x_view is None else x_view
    model_codes, model_exponents = fp8.quantize_blocks(
        prepare.transform(np.asarray(src, np.float32), signs, subtract), block_tokens, code_max)
    np.testing.assert_array_equal(exponents, model_exponents, err_msg=f"schedule seed {seed}")
    mismatch = codes != model_codes
    assert not mismatch.any(), (f"schedule seed {seed}: {mismatch.sum()} of {codes.size} codes differ, first at "
                                f"{np.argwhere(mismatch)[0].tolist()}")


@pytest.mark.parametrize("mode", ["plain", "rotate", "rotate_smooth"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@shapes.over_quantize_dims
def test_bit_identical_to_the_model(dim, dtype, mode):
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    x = _uneven(rng, (2, 40, 2, dim)).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if mode != "plain" else None
    subtract = prepare.key_mean(np.asarray(x, np.float64)) if mode == "rotate_smooth" else None
    _check(x, 16, signs, subtract)


@pytest.mark.parametrize("code_max", [1.125, 0.75, 2.0**-6])
@pytest.mark.parametrize("dim", [64, 192, 224])
def test_code_max(dim, code_max):
    """Smaller codes (q's for float16 scores): exponents for the bound, codes within it."""
    rng = np.random.default_rng(int(RNG.integers(1 << 31)))
    x = _uneven(rng, (1, 40, 2, dim)).astype(np.float32)
    _check(x, 16, prepare.rotation_signs(dim, 3), code_max=code_max)
    codes, _ = quantize(x, 16, prepare.rotation_signs(dim, 3), code_max=code_max, seed=int(RNG.integers(1 << 31)))
    assert np.abs(fp8.e4m3_decode(codes)).max() <= code_max


@pytest.mark.parametrize("dim", [160, 256])
def test_special_blocks(dim):
    """All-zero blocks and heads, inf and NaN (counted as exponent 0 in their head's largest), float32 subnormals
    (exponents clamped at -127), a block 100 binades below its head (the span floor), a head above 2^64, and
    values that round to e4m3 subnormals and to 448."""
    x = np.random.default_rng(7).standard_normal((1, 48, 5, dim)).astype(np.float32)
    x[0, 0:8, 0] = 0                  # head 0: a zero block among normal ones
    x[0, 8:16, 1, 5] = np.inf         # head 1: inf and NaN in one block each
    x[0, 16:24, 1, 9] = np.nan
    x[0, 24:32, 1] = 0
    x[0, 24:32, 2] *= 2.0**-100       # head 2: one block far below the others
    x[0, 40:48, 2] *= 2.0**-20        # ... and codes down in e4m3's subnormals beside 448s
    x[0, :, 3] = 1e-41 * (x[0, :, 3] > 0)  # head 3: float32 subnormals or zeros only
    x[0, :, 4] *= 2.0**90             # head 4: exponents above 64, an inf block raised to the floor
    x[0, 0:8, 4, 2] = -np.inf
    _check(x, 8)


def test_strided_input():
    """k as a view into a packed (batch, seq, heads_q + 2 heads_kv, dim) qkv buffer, bf16."""
    qkv = np.random.default_rng(int(RNG.integers(1 << 31))).standard_normal((2, 33, 8 + 2 * 2, 128))
    qkv = qkv.astype(ml_dtypes.bfloat16)
    _check(None, 16, x_view=qkv[:, :, 8:10])


@shapes.over_quantize_dims
def test_small_integers_rotated(dim):
    """Small integer inputs: the butterflies' sums are exact and, for parts of 64 and 256, so is the 1/sqrt(n) scale
    (1/8, 1/16), so many transformed values lie exactly on e4m3 rounding ties: a transform off by one float32 step
    anywhere changes codes."""
    rng = np.random.default_rng(int(RNG.integers(1 << 31)))
    x = rng.integers(-3, 4, (1, 32, 2, dim)).astype(np.float32)
    _check(x, 16, prepare.rotation_signs(dim, int(rng.integers(1 << 31))))
