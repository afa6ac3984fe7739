"""NaN and inf in the kernels' inputs, against the rule of flashprefill.reference.attention_reference (IEEE
arithmetic): a non-finite element turns what reads it non-finite and nothing reading it comes out finite and wrong.
q's row i: out row i and lse i; k's row j: every row that sees key j (the causal mask decides), out and lse, where
±inf reaches a row through its score (+inf or NaN: the row is NaN; -inf: the key's probability is 0); v[j, d]:
column d of those rows, out only, and possibly column d of rows of the same 128-row query tile that do not see key j
but whose last KV tile holds it (their probability 0 times inf or NaN). Every element that does not read it is the
kernel's output on the same inputs with that element zeroed, bit for bit; a row that reads it and stays finite
matches the float64 reference (nonfinite_rule.py holds the check).

Every kernel family: bf16; fp8 with the default scores (float16: q's codes within their bound, as quantize_qkv gives
them), with scores="fp32", and with probabilities="fp16"; dims 128 and 192/128; causal or not. bf16 takes NaN, inf
and -inf; e4m3fn has no infinity, so fp8 inputs take the NaN code, and an inf in a float input is the quantizer's to
saturate (flashprefill_quantize: its block takes exponent 0, the code ±448), after which the kernels see only finite
codes. Outputs are poisoned first. CuPy arrays (gpu_arrays.py).
"""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
import nonfinite_rule
import shapes
from flashprefill import fp8, policy, prepare, reference

cp = pytest.importorskip("cupy", reason=markers.NO_CUPY)
pytestmark = pytest.mark.gpu

SHAPE = (1, 200, 200, 4, 2)  # (batch, seqlen_q, seqlen_k, heads_q, heads_kv): two query tiles, the last partial
# attention's options of each family ("fp8" takes q's codes within float16 scores' bound: _q_code_max).
FAMILIES = {
    "bf16": {},
    "fp8": {},
    "fp8-scores-fp32": {"scores": "fp32"},
    "fp8-probabilities-fp16": {"probabilities": "fp16"},
}
E4M3_NAN = fp8.E4M3_NAN_CODE
CASES = [(family, value) for family in FAMILIES for value in
         (["nan", "inf", "-inf"] if family == "bf16" else ["nan"])]


def _q_code_max(family, dim_qk):
    return policy.query("cuda", dim_qk, 128, scores="fp16").q_code_max if family == "fp8" else fp8.E4M3_MAX


def _inputs(family, dims, rng):
    """{q, k, v: device arrays, plus q_descale, k_descale, v_descale for fp8}: N(0, 1) inputs; fp8 codes with
    FlashAttention-3-style factors from the library's own quantizer model (prepare.quantize_qkv, no rotation)."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv = SHAPE
    dim_qk, dim_v = dims
    shapes = {"q": (batch, seqlen_q, heads_q, dim_qk), "k": (batch, seqlen_k, heads_kv, dim_qk),
              "v": (batch, seqlen_k, heads_kv, dim_v)}
    floats = {name: cp.asarray(rng.standard_normal(shape), dtype=cp.float32) for name, shape in shapes.items()}
    if family == "bf16":
        return {name: ga.to_bf16(x) for name, x in floats.items()}
    prepared = prepare.quantize_qkv(floats["q"], floats["k"], floats["v"], rotate=False,
                                    q_code_max=_q_code_max(family, dim_qk))
    return {name: prepared[name].view(ga.E4M3) if name in ("q", "k", "v") else prepared[name]
            for name in ("q", "k", "v", "q_descale", "k_descale", "v_descale")}


def _planted(inputs, tensor, where, value):
    """A copy of inputs with inputs[tensor][where] set to value ("nan", "inf", "-inf", or 0.0 for the clean run)."""
    out = dict(inputs)
    x = ga.copy(inputs[tensor])
    if x.dtype == ga.E4M3:
        ga.bits(x)[where] = E4M3_NAN if value == "nan" else int(fp8.e4m3_encode(np.array([value], np.float32))[0])
    else:
        ga.bits(x)[where] = int(ga.bits(ga.to_bf16(np.array([float(value)], np.float32)))[0])
    out[tensor] = x
    return out


def _run(inputs, causal, options):
    """attention into a poisoned out, with lse; both on the host (out as float32)."""
    batch, seqlen_q, _, heads_q, _ = SHAPE
    out = ga.poisoned_bf16((batch, seqlen_q, heads_q, inputs["v"].shape[3]))
    _, lse = fp.attention(**inputs, causal=causal, out=out, return_lse=True, **options)
    ga.synchronize()
    return ga.to_float(ga.to_host(out)), cp.asnumpy(lse)


def _reference(inputs, causal):
    """The float64 reference of the (dequantized) inputs: (out, lse); NaN marks the rule's reach."""
    values = {}
    for name in "qkv":
        x = ga.to_f64(ga.to_host(inputs[name]))
        descale = inputs.get(f"{name}_descale")
        if descale is not None:  # (batch, heads_kv) factors; q's heads share their group's
            factors = cp.asnumpy(descale).astype(np.float64)
            x = x * np.repeat(factors, x.shape[2] // factors.shape[1], axis=1)[:, None, :, None]
        values[name] = x
    return reference.attention_reference(values["q"], values["k"], values["v"], causal=causal, return_lse=True)


KV_TILE_KEYS_MAX = 192  # the kernels' largest KV tile


def _tile_loads(where, causal):
    """Rows whose 128-row query tile loads key where[1] without every row seeing it (the tile's KV range ends at a
    KV tile's end): v's column may turn NaN there."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv = SHAPE
    rows = np.zeros((batch, seqlen_q, heads_q), dtype=bool)
    if not causal:
        return rows
    b, j, h = where[:3]
    tile_last = np.minimum((np.arange(seqlen_q) // 128) * 128 + 127, seqlen_q - 1)
    group = heads_q // heads_kv
    loaded = j < tile_last + seqlen_k - seqlen_q + KV_TILE_KEYS_MAX
    rows[b][np.ix_(loaded, np.arange(h * group, (h + 1) * group))] = True
    return rows


@shapes.over_attention_dims
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("tensor", ["q", "k", "v"])
@pytest.mark.parametrize("family, value", CASES, ids=[f"{f}-{v}" for f, v in CASES])
def test_non_finite_input_reaches_what_reads_it(rng_seed, family, value, tensor, causal, dims):
    rng, seed = rng_seed
    options = FAMILIES[family]
    inputs = _inputs(family, dims, rng)
    shape = inputs[tensor].shape
    where = (0, int(rng.integers(shape[1])), int(rng.integers(shape[2])), int(rng.integers(shape[3])))
    print(f"{value} planted in {tensor}{list(where)}")
    bad, clean = _planted(inputs, tensor, where, value), _planted(inputs, tensor, where, 0.0)
    out, lse = _run(bad, causal, options)
    clean_out, clean_lse = _run(clean, causal, options)
    ref_out, ref_lse = _reference(bad, causal)
    reads = nonfinite_rule.reading_rows(SHAPE, tensor, where, causal)
    v_tile_rows = _tile_loads(where, causal) if tensor == "v" else None
    nonfinite_rule.check(seed, family, tensor, where, reads, v_tile_rows, (out, lse), (clean_out, clean_lse),
                         (ref_out, ref_lse))


FP8_FAMILIES = [family for family in FAMILIES if family != "bf16"]


@shapes.over_attention_dims
@pytest.mark.parametrize("sign", [1, -1], ids=["inf", "-inf"])
@pytest.mark.parametrize("tensor", ["q", "k", "v"])
@pytest.mark.parametrize("family", FP8_FAMILIES)
def test_fp8_inf_saturates_in_the_quantizer(rng_seed, family, tensor, sign, dims):
    """inf in a float input of flashprefill_quantize (384-token blocks, no rotation, q's code_max as its family
    needs): its block takes exponent 0 and the inf the code ±448, and attention on the result is finite
    everywhere, out and lse (the kernels never see an infinity)."""
    rng, seed = rng_seed
    batch, seqlen_q, seqlen_k, heads_q, heads_kv = SHAPE
    dim_qk, dim_v = dims
    shapes = {"q": (batch, seqlen_q, heads_q, dim_qk), "k": (batch, seqlen_k, heads_kv, dim_qk),
              "v": (batch, seqlen_k, heads_kv, dim_v)}
    floats = {name: cp.asarray(rng.standard_normal(shape), dtype=cp.float32) for name, shape in shapes.items()}
    shape = shapes[tensor]
    where = (0, int(rng.integers(shape[1])), int(rng.integers(shape[2])), int(rng.integers(shape[3])))
    floats[tensor][where] = sign * np.inf
    inputs = {}
    for name, x in floats.items():
        code_max = _q_code_max(family, dim_qk) if name == "q" else fp8.E4M3_MAX
        inputs[name], inputs[f"{name}_descale"] = fp.quantize_fp8(x, 384, code_max=code_max)
    codes, scales = inputs[tensor], inputs[f"{tensor}_descale"]
    ga.synchronize()
    assert int(ga.to_host(scales.exponents)[0, where[2], where[1] // 384]) == 0, f"seed {seed}: the block's exponent"
    assert int(ga.bits(ga.to_host(codes))[where]) == (fp8.E4M3_MAX_CODE | (0x80 if sign < 0 else 0)), \
        f"seed {seed}: the inf's code"
    out, lse = _run(inputs, True, FAMILIES[family])
    assert np.isfinite(out).all() and np.isfinite(lse).all(), \
        f"seed {seed}: " + nonfinite_rule.where_report("non-finite outputs", ~np.isfinite(out))
