"""NaN and inf in the gfx950 forward kernels' inputs, run in the functional emulator (tools/gfx950_emu), against the
rule of flashprefill.reference.attention_reference (docs/numerics.md, "NaN and infinity"), as
tests/test_nonfinite_gpu.py holds the Hopper kernels to it: a non-finite element turns what reads it non-finite and
nothing reading it comes out finite and wrong; every output that does not read it is the kernel's output on the same
inputs with that element zeroed, bit for bit.

q's row i: out row i and lse i; k's row j: every row that sees key j (the causal mask decides) of every query head
of its group, out and lse, ±inf reaching a row through its score (+inf or NaN: the row is NaN; -inf: the key's
probability is 0); v[j, d]: column d of those rows, out only, and possibly column d of rows of the same 256-query
workgroup that do not see key j but whose KV range (whole tiles: 32 keys bf16, 64 fp8; fwd_frame.inc) holds it
(probability 0 times inf or NaN). bf16 takes NaN, inf and -inf; e4m3 has no infinity, so fp8 takes the NaN codes
0x7f and 0xff. Each (kernel, tensor, causal) runs once per session with the value and position drawn from a fresh,
printed seed.

What is assumed: the emulator's reading of the ISA's NaN semantics (tools/gfx950_emu/isa_vector.py, mfma.py):
v_max_f32 / v_max3_f32 in IEEE mode return the other operand for a NaN (numpy fmax); v_cvt_pk_f16_f32 with clamp in
DX10 clamp mode turns NaN into 0; v_exp_f32, v_rcp_f32, v_log_f32 and the MFMAs follow IEEE (0 x NaN and 0 x inf
are NaN, an e4m3 NaN code decodes to NaN). The hardware has not been asked.
"""
import ml_dtypes
import numpy as np
import pytest

import markers
import nonfinite_rule
from flashprefill import reference
from test_gfx950_kernel_emulated import QUERIES_PER_WORKGROUP, _run

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
KERNELS = ["fwd_bf16_hd128", "fwd_bf16_qk192", "fwd_fp8_hd128", "fwd_fp8_qk192"]
SHAPE = (1, 200, 200, 2, 1)  # (batch, seqlen_q, seqlen_k, heads_q, heads_kv): one workgroup, a partial last KV tile
VALUES = {"bf16": ["nan", "inf", "-inf"], "fp8": [0x7F, 0xFF]}  # fp8: the e4m3 NaN codes, positive and negative
FP8_DESCALE = 0.5  # per tensor, for q, k and v


def _family(name):
    return "fp8" if "fp8" in name else "bf16"


def _inputs(name, rng):
    """q, k, v of N(0, 1) values as the kernel takes them (bf16, or e4m3 codes of the values / FP8_DESCALE)."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv = SHAPE
    dim_qk = 192 if name.endswith("qk192") else 128
    scale, dtype = (FP8_DESCALE, ml_dtypes.float8_e4m3fn) if _family(name) == "fp8" else (1.0, ml_dtypes.bfloat16)
    return {tensor: (rng.standard_normal(shape) / scale).astype(dtype) for tensor, shape in
            (("q", (batch, seqlen_q, heads_q, dim_qk)), ("k", (batch, seqlen_k, heads_kv, dim_qk)),
             ("v", (batch, seqlen_k, heads_kv, 128)))}


def _planted(inputs, tensor, where, value):
    """A copy of inputs with inputs[tensor][where] set to value: "nan", "inf", "-inf" or 0.0 (bf16), a code (fp8)."""
    out = dict(inputs)
    x = inputs[tensor].copy()
    x[where] = np.array(value, np.uint8).view(x.dtype) if isinstance(value, int) else float(value)
    out[tensor] = x
    return out


def _run_kernel(name, inputs, causal, seed):
    descales = tuple(np.asarray(FP8_DESCALE, np.float32) for _ in "qkv") if _family(name) == "fp8" else None
    return _run(name, inputs["q"], inputs["k"], inputs["v"], causal, descales, seed=seed)


def _reference(name, inputs, causal):
    scale = FP8_DESCALE if _family(name) == "fp8" else 1.0
    return reference.attention_reference(*(inputs[t].astype(np.float64) * scale for t in "qkv"), causal=causal,
                                         return_lse=True)


def _workgroup_loads(name, where, causal):
    """Rows whose workgroup's KV range (whole tiles, up to the workgroup's last query's limit: fwd_frame.inc) holds
    key where[1]: v's column may turn non-finite there."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv = SHAPE
    tile_keys = 64 if _family(name) == "fp8" else 32
    first = (np.arange(seqlen_q) // QUERIES_PER_WORKGROUP) * QUERIES_PER_WORKGROUP
    keys_end = -(-(first + QUERIES_PER_WORKGROUP + seqlen_k - seqlen_q) // tile_keys) * tile_keys if causal \
        else np.full(seqlen_q, seqlen_k)
    rows = np.zeros((batch, seqlen_q, heads_q), dtype=bool)
    b, j, h = where[:3]
    group = heads_q // heads_kv
    rows[b][np.ix_(j < keys_end, np.arange(h * group, (h + 1) * group))] = True
    return rows


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("tensor", ["q", "k", "v"])
@pytest.mark.parametrize("name", KERNELS)
def test_non_finite_input_reaches_what_reads_it(rng_seed, name, tensor, causal):
    rng, seed = rng_seed
    family = _family(name)
    inputs = _inputs(name, rng)
    shape = inputs[tensor].shape
    where = (0, int(rng.integers(shape[1])), int(rng.integers(shape[2])), int(rng.integers(shape[3])))
    value = VALUES[family][int(rng.integers(len(VALUES[family])))]
    print(f"{value if isinstance(value, str) else hex(value)} planted in {tensor}{list(where)}")
    bad, clean = _planted(inputs, tensor, where, value), _planted(inputs, tensor, where, 0.0)
    out, lse = _run_kernel(name, bad, causal, seed)
    clean_out, clean_lse = _run_kernel(name, clean, causal, seed)
    ref_out, ref_lse = _reference(name, bad, causal)
    reads = nonfinite_rule.reading_rows(SHAPE, tensor, where, causal)
    v_tile_rows = _workgroup_loads(name, where, causal) if tensor == "v" else None
    nonfinite_rule.check(seed, family, tensor, where, reads, v_tile_rows, (out, lse), (clean_out, clean_lse),
                         (ref_out, ref_lse))
