"""The gfx950 quantizer's packed (varlen) form (asm/gfx950/quantize.inc with cu_seqlens) runs instruction by
instruction in the functional emulator (tools/gfx950_emu) against its numpy model bit for bit:
fp8.quantize_blocks_varlen(prepare.transform_varlen(x, cu_seqlens, signs, subtract), ...), as the Hopper quantizer is
checked on the GPU (tests/test_quantize_varlen_gpu.py). Sequences of 0, 1 and non-multiple-of-block lengths among rows
outside every sequence; codes and exponents poisoned first, so the rows and exponent slots the call must leave keep
their poison. Each run takes a fresh seed as the emulator's schedule seed."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import kernargs
import markers

from flashprefill import fp8, prepare
from test_gfx950_quantize_emulated import run_phases

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
RNG = np.random.default_rng()
POISON_CODE, POISON_EXPONENT = 0x7F, 90  # a NaN code; an exponent no block of these inputs takes
Kernarg = kernargs.QuantizeKernarg


def quantize_packed(x, cu_seqlens, max_seqlen, block_tokens, signs=None, subtract=None, seed=0):
    """Both phases of quantize_d<dim> on x ((total, heads, dim) bf16 or float32, or such a view of an array whose
    base goes to the device) with cu_seqlens; returns (codes uint8 (total, heads, dim), exponents int8 (batch, heads,
    slots)) read back from poisoned outputs."""
    from gfx950_emu import GlobalMemory
    assert kernargs.offsets(Kernarg) == kernargs.assembly_offsets(kernargs.QUANTIZE_CONTRACT)
    total, heads, dim = x.shape
    batch, blocks = len(cu_seqlens) - 1, -(-max_seqlen // block_tokens)
    mem = GlobalMemory()
    base = x if x.base is None else x.base
    x_addr = mem.alloc_array(base) + (x.__array_interface__["data"][0] - base.__array_interface__["data"][0])
    codes = mem.alloc_array(np.full((total, heads, dim), POISON_CODE, np.uint8))
    exponents = mem.alloc_array(np.full((batch, heads, blocks), POISON_EXPONENT, np.int8))
    fraction, exponent = np.frexp(np.float32(fp8.E4M3_MAX))
    a = Kernarg(x=x_addr, codes=codes, exponents=exponents,
                signs=0 if signs is None else mem.alloc_array(np.asarray(signs, np.float32)),
                subtract=0 if subtract is None else mem.alloc_array(np.ascontiguousarray(subtract, np.float32)),
                x_stride_seq=x.strides[0], x_stride_head=x.strides[1], codes_stride_seq=heads * dim,
                codes_stride_head=dim, seqlen=max_seqlen, heads=heads, block_tokens=block_tokens, blocks=blocks,
                x_fp32=int(x.dtype == np.float32), code_max_exponent=int(exponent),
                code_max_mantissa=int(np.float32(fp8.E4M3_MAX).view(np.uint32) & 0x7FFFFF),
                cu_seqlens=mem.alloc_array(np.asarray(cu_seqlens, np.int32)), total=total)
    run_phases(a, dim, (blocks, heads, batch), mem, seed, root=ROOT)
    return mem.read(codes, np.uint8, (total, heads, dim)), mem.read(exponents, np.int8, (batch, heads, blocks))


def _check(x, cu_seqlens, max_seqlen, block_tokens, signs=None, subtract=None):
    seed = int(RNG.integers(1 << 31))
    codes, exponents = quantize_packed(x, cu_seqlens, max_seqlen, block_tokens, signs, subtract, seed)
    total, heads, dim = x.shape
    model_codes, model_exponents = fp8.quantize_blocks_varlen(
        prepare.transform_varlen(np.asarray(x, np.float32), cu_seqlens, signs, subtract), cu_seqlens, max_seqlen,
        block_tokens, codes=np.full((total, heads, dim), POISON_CODE, np.uint8),
        exponents=np.full(exponents.shape, POISON_EXPONENT, np.int8))
    np.testing.assert_array_equal(exponents, model_exponents, err_msg=f"schedule seed {seed}")
    mismatch = codes != model_codes
    assert not mismatch.any(), (f"schedule seed {seed}: {mismatch.sum()} of {codes.size} codes differ, first at "
                                f"{np.argwhere(mismatch)[0].tolist()}")


def _packed_x(rng, total, heads, dim, dtype):
    """(total, heads, dim) N(0,1) times 2^-6..2^6 per 8 rows and head, one channel 30x larger, as a view of a
    buffer of heads + 1 heads (x's head stride is not dim's multiple of heads)."""
    buffer = rng.standard_normal((total, heads + 1, dim))
    buffer *= np.exp2(rng.integers(-6, 7, ((total + 7) // 8, heads + 1)))[np.arange(total) // 8, :, None]
    buffer[..., 3] *= 30
    return buffer.astype(dtype)[:, 1:]


# Sequences of 0, 1, 37 (three blocks of 16, the last partial), 16 and 5 rows from row 3; rows 0-2 and 62-63 outside
# every sequence; max_seqlen 40 (slots past each sequence's blocks keep their poison).
CU_SEQLENS, TOTAL, MAX_SEQLEN = [3, 3, 4, 41, 57, 62], 64, 40


@pytest.mark.parametrize("dim, dtype, mode, block_tokens", [
    (64, "bfloat16", "rotate_smooth", 16), (160, "float32", "rotate", 16), (32, "float32", "plain", 8),
    (256, "bfloat16", "rotate", 16), (224, "float32", "rotate_smooth", 32)])
def test_bit_identical_to_the_model(dim, dtype, mode, block_tokens):
    rng = np.random.default_rng(int(RNG.integers(1 << 31)))
    heads = 2
    x = _packed_x(rng, TOTAL, heads, dim, ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if mode != "plain" else None
    subtract = None
    if mode == "rotate_smooth":  # one mean per sequence and head, as prepare.key_mean of each
        subtract = np.stack([prepare.key_mean(np.asarray(x[None, b:e], np.float64))[0] if e > b
                             else rng.standard_normal((heads, dim)).astype(np.float32)
                             for b, e in zip(CU_SEQLENS[:-1], CU_SEQLENS[1:])])
    _check(x, CU_SEQLENS, MAX_SEQLEN, block_tokens, signs, subtract)


def test_special_blocks():
    """Per sequence: a zero block among normal ones (it takes its sequence's largest exponent, not the packed
    batch's), a sequence of zeros only (0 in every slot), one 2^-100 below the others (its own span floor, not
    raised by theirs), inf and NaN."""
    rng = np.random.default_rng(int(RNG.integers(1 << 31)))
    cu_seqlens, total, max_seqlen = [0, 24, 32, 48, 56], 56, 24
    x = rng.standard_normal((total, 2, 96)).astype(np.float32)
    x[8:16] = 0                  # sequence 0: its second block
    x[24:32] = 0                 # sequence 1: zeros only
    x[32:48] *= 2.0**-100        # sequence 2: far below the others
    x[40:48, 0] *= 2.0**-80      # ... and its second block far below its first
    x[50, 1, 4], x[53, 0, 9] = np.inf, np.nan  # sequence 3
    _check(x, cu_seqlens, max_seqlen, 8)


def test_invalid_sequences_keep_their_rows():
    """Sequences whose bounds are not valid (begin < 0; longer than max_seqlen; end past total) are not quantized:
    their rows keep their poison and every slot of theirs is -128; the valid ones between them as alone."""
    rng = np.random.default_rng(int(RNG.integers(1 << 31)))
    cu_seqlens, total, max_seqlen = [-1, 4, 9, 30, 31, 40], 32, 12
    x = _packed_x(rng, total, 2, 64, np.float32)
    _check(x, cu_seqlens, max_seqlen, 4, prepare.rotation_signs(64, 5))
