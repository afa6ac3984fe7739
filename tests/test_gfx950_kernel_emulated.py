"""The gfx950 kernels run instruction by instruction in the functional emulator (tools/gfx950_emu) on small
problems, against the float64 reference: the code object `make amd` built, not a copy of it.

Bounds: tools/gfx950_bounds.py (the relative L2 error at most 1.5x that of a numpy emulation of the same precision:
P rounded to bf16, fp32 accumulation, output rounded to bf16), shared with tools/mi355x_check.py, which applies them
on an MI355X. Outputs are poisoned with NaN first.
Each run takes its input seed as the emulator's schedule seed too (tools/gfx950_emu/run.py: the waves interleave in a
seeded random order, loads land at the latest point their s_waitcnt allows, LDS accesses of different waves must be
ordered by a wait and a barrier), so every run tries a fresh interleaving and a failure names the seed that replays
it; test_schedules runs each kernel under several fixed seeds. What this does not show: hazards of wait states the
emulator does not model (tools/gfx950_lint.py checks those), and v_exp_f32 / v_rcp_f32 / v_log_f32 accuracy (the
emulator computes them exactly in float32)."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import kernargs
import markers
import probability_codes
import shapes
from flashprefill import fp8, reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from gfx950_bounds import bf16_floor, bf16_verdict, fp8_verdicts, lse_verdict  # noqa: E402
pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
RNG = np.random.default_rng()
BF16_NAN = np.uint16(0x7FC0)
QUERIES_PER_WORKGROUP, LANES_PER_WORKGROUP = 256, 512  # 8 waves of 32 queries (asm/gfx950/fwd_contract.inc)


Kernarg = kernargs.FwdKernarg


@shapes.over_dims_qk
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(shapes.EMULATED_SHAPES)
def test_fwd_bf16(shape, causal, dim_qk):
    """fwd_bf16_hd128, and fwd_bf16_qk192 (dim_qk 192, dim_v 128: DeepSeek-V2's prefill shape)."""
    from gfx950_emu import GlobalMemory, load_code_object, run_kernel
    assert kernargs.offsets(Kernarg) == kernargs.assembly_offsets(kernargs.FWD_CONTRACT)
    batch, sq, sk, hq, hkv = shape
    name = "fwd_bf16_hd128" if dim_qk == 128 else f"fwd_bf16_qk{dim_qk}"
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((batch, s, h, d)).astype(ml_dtypes.bfloat16)
               for s, h, d in ((sq, hq, dim_qk), (sk, hkv, dim_qk), (sk, hkv, 128)))
    mem = GlobalMemory()
    addr = {n: mem.alloc_array(np.ascontiguousarray(x)) for n, x in (("q", q), ("k", k), ("v", v))}
    addr["out"] = mem.alloc_array(np.full((batch, sq, hq, 128), BF16_NAN, np.uint16))
    addr["lse"] = mem.alloc_array(np.full((batch, hq, sq), np.nan, np.float32))
    a = Kernarg(q=addr["q"], k=addr["k"], v=addr["v"], out=addr["out"], lse=addr["lse"],
                seqlen_q=sq, seqlen_k=sk, heads_q=hq, heads_per_kv=hq // hkv, causal=int(causal),
                causal_offset=sk - sq, softmax_scale_log2=np.log2(np.e) / np.sqrt(dim_qk), lse_rows=sq)
    for n, s, h, d in (("q", sq, hq, dim_qk), ("k", sk, hkv, dim_qk), ("v", sk, hkv, 128), ("out", sq, hq, 128)):
        setattr(a, f"{n}_stride_seq", h * d * 2)
        setattr(a, f"{n}_stride_head", d * 2)
        setattr(a, f"{n}_stride_batch", s * h * d * 2)
    co = load_code_object(str(ROOT / "build" / "gfx950" / f"{name}.co"))
    run_kernel(co, name, grid=(-(-sq // QUERIES_PER_WORKGROUP), hq, batch),
               workgroup_size=LANES_PER_WORKGROUP, kernarg=bytes(a), memory=mem, seed=seed)
    out = mem.read(addr["out"], np.uint16, (batch, sq, hq, 128)).view(ml_dtypes.bfloat16).astype(np.float64)
    lse = mem.read(addr["lse"], np.float32, (batch, hq, sq))
    ref, ref_lse = reference.attention_reference(q, k, v, causal=causal, return_lse=True)
    assert np.isfinite(out).all(), f"seed {seed}: unwritten or non-finite outputs"
    verdict = bf16_verdict(out, ref, bf16_floor(q, k, v, causal))
    assert verdict.ok, f"seed {seed}: {verdict.detail}"
    assert lse_verdict(lse, ref_lse).ok, f"seed {seed}: {lse_verdict(lse, ref_lse).detail}"


def _run(name, q, k, v, causal, descales=None, blocks=None, stats=None, seed=0, code_object=None):
    """Runs asm kernel `name` on q, k, v (numpy, (batch, seq, heads, dim), 1 or 2 bytes per element) with
    optional fp8 descales ((q, k, v) float32 arrays of shape () or (batch, heads_kv)) or per-block exponents
    ((q, k, v) int8 (batch, heads, blocks) arrays, block_tokens) under the emulator's schedule `seed`; returns out,
    lse. stats: a list that receives the run's RunStats. code_object: a path to run instead of `make amd`'s."""
    from gfx950_emu import GlobalMemory, load_code_object, run_kernel
    assert kernargs.offsets(Kernarg) == kernargs.assembly_offsets(kernargs.FWD_CONTRACT)
    batch, sq, hq, dim_qk = q.shape
    sk, hkv, dim_v = k.shape[1], k.shape[2], v.shape[3]
    mem = GlobalMemory()
    addr = {n: mem.alloc_array(np.ascontiguousarray(x)) for n, x in (("q", q), ("k", k), ("v", v))}
    addr["out"] = mem.alloc_array(np.full((batch, sq, hq, dim_v), BF16_NAN, np.uint16))
    addr["lse"] = mem.alloc_array(np.full((batch, hq, sq), np.nan, np.float32))
    a = Kernarg(q=addr["q"], k=addr["k"], v=addr["v"], out=addr["out"], lse=addr["lse"], seqlen_q=sq, seqlen_k=sk,
                heads_q=hq, heads_per_kv=hq // hkv, causal=int(causal), causal_offset=sk - sq,
                softmax_scale_log2=np.log2(np.e) / np.sqrt(dim_qk), lse_rows=sq)
    for n, x, out_bytes in (("q", q, None), ("k", k, None), ("v", v, None), ("out", None, 2)):
        shape = q.shape[:3] + (dim_v,) if x is None else x.shape
        item, dim = out_bytes or x.dtype.itemsize, shape[3]
        setattr(a, f"{n}_stride_seq", shape[2] * dim * item)
        setattr(a, f"{n}_stride_head", dim * item)
        setattr(a, f"{n}_stride_batch", shape[1] * shape[2] * dim * item)
    if blocks is not None:
        exponents, block_tokens = blocks
        for n, e in zip("qkv", exponents):
            setattr(a, f"{n}_exponents", mem.alloc_array(np.ascontiguousarray(e, np.int8)))
            setattr(a, f"{n}_block_tokens", block_tokens)
            setattr(a, f"{n}_blocks_per_head", e.shape[2])
    for n, d in zip("qkv", descales or ()):
        setattr(a, f"{n}_descale", mem.alloc_array(np.ascontiguousarray(d, np.float32).reshape(-1)))
        setattr(a, f"{n}_descale_stride_batch", hkv if d.ndim == 2 else 0)
        setattr(a, f"{n}_descale_stride_head", 1 if d.ndim == 2 else 0)
    co = load_code_object(str(code_object or ROOT / "build" / "gfx950" / f"{name}.co"))
    run = run_kernel(co, name, grid=(-(-sq // QUERIES_PER_WORKGROUP), hq, batch), workgroup_size=LANES_PER_WORKGROUP,
                     kernarg=bytes(a), memory=mem, seed=seed)
    if stats is not None:
        stats.append(run)
    out = mem.read(addr["out"], np.uint16, (batch, sq, hq, dim_v)).view(ml_dtypes.bfloat16).astype(np.float64)
    return out, mem.read(addr["lse"], np.float32, (batch, hq, sq))


def _quantize(x, per_head, heads_kv):
    """e4m3 codes and FA3-style descales (per tensor, or per (batch, KV head) shared by a q head group)."""
    batch, seq, heads, dim = x.shape
    groups = np.abs(x).reshape(batch, seq, heads_kv, -1)
    amax = groups.max(axis=(1, 3)) if per_head else np.abs(x).max()
    descale = np.asarray(np.maximum(amax, 1e-12) / 448.0, np.float32)
    scale = np.repeat(descale, heads // heads_kv, axis=1)[:, None, :, None] if per_head else descale
    codes = (x / scale).astype(ml_dtypes.float8_e4m3fn)
    return codes, descale, codes.astype(np.float64) * scale


def _fp8_kernel(dim_qk):
    return "fwd_fp8_hd128" if dim_qk == 128 else f"fwd_fp8_qk{dim_qk}"


@shapes.over_dims_qk
@pytest.mark.parametrize("per_head", [False, True], ids=["per_tensor", "per_head"])
@pytest.mark.parametrize("causal", [True, False])
@shapes.over_shapes(shapes.EMULATED_SHAPES[:-1] + [(2, 70, 130, 2, 1)])  # batch 2 with seqlen_q < seqlen_k
def test_fwd_fp8(shape, causal, per_head, dim_qk):
    """fwd_fp8_hd128 and fwd_fp8_qk192 (dim_v 128) against the numpy model of the same pipeline (exp-free codes
    at the running max of each 64-key tile): only the bf16 rounding of the output (and float32 accumulation) may
    separate them; and against float64 attention of the dequantized inputs within 1.5x the error of the model
    itself."""
    batch, sq, sk, hq, hkv = shape
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = (_quantize(rng.standard_normal((batch, s, h, d)), per_head, hkv)
                                                for s, h, d in ((sq, hq, dim_qk), (sk, hkv, dim_qk), (sk, hkv, 128)))
    out, lse = _run(_fp8_kernel(dim_qk), q8, k8, v8, causal, (qd, kd, vd), seed=seed)
    assert np.isfinite(out).all(), f"seed {seed}: unwritten or non-finite outputs"
    q_model_descale = np.repeat(qd, hq // hkv, axis=1) if per_head else qd
    model, model_lse = fp8.attention_fp8_model(q8.view(np.uint8), k8.view(np.uint8), v8.view(np.uint8),
                                               q_model_descale, kd, vd, causal=causal, kv_tile=64, return_lse=True)
    ref = reference.attention_reference(qx, kx, vx, causal=causal)
    for verdict in (*fp8_verdicts(out, model, ref), lse_verdict(lse, model_lse)):
        assert verdict.ok, f"seed {seed}: {verdict.detail}"


@shapes.over_dims_qk
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("block_tokens", [64, 128])
@shapes.over_shapes([(1, 64, 64, 2, 1), (1, 100, 300, 2, 2)])
def test_fwd_fp8_block_scales(shape, block_tokens, causal, dim_qk):
    """Per-block power-of-two scales (fp8.quantize_blocks): q's exponent per 32-query wave, k's folded into
    each tile's score scale, v's through the MFMA's E8M0 block scale; against the numpy model with the
    same per-token scales, and float64 attention of the dequantized inputs."""
    batch, sq, sk, hq, hkv = shape
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    # uneven magnitudes across blocks, so that wrong exponents cannot go unnoticed
    raw = [rng.standard_normal((batch, s, h, d)) * np.exp(rng.normal(0, 2, (1, s, 1, 1)))
           for s, h, d in ((sq, hq, dim_qk), (sk, hkv, dim_qk), (sk, hkv, 128))]
    quantized = [fp8.quantize_blocks(x, block_tokens) for x in raw]
    codes = [c.view(ml_dtypes.float8_e4m3fn) for c, _ in quantized]
    exponents = [e for _, e in quantized]
    out, lse = _run(_fp8_kernel(dim_qk), *codes, causal, blocks=(exponents, block_tokens), seed=seed)
    assert np.isfinite(out).all(), f"seed {seed}: unwritten or non-finite outputs"
    scales = [fp8.block_scales(e, x.shape[1], block_tokens) for e, x in zip(exponents, raw)]
    model, model_lse = fp8.attention_fp8_model(*(c.view(np.uint8) for c in codes), *scales, causal=causal,
                                               kv_tile=64, return_lse=True)
    dequantized = [fp8.dequantize_blocks(c, e, block_tokens) for (c, e) in quantized]
    ref = reference.attention_reference(*dequantized, causal=causal)
    for verdict in (*fp8_verdicts(out, model, ref), lse_verdict(lse, model_lse)):
        assert verdict.ok, f"seed {seed}: {verdict.detail}"


@pytest.mark.parametrize("causal", [False, True])
@shapes.over_dims_qk
def test_fwd_fp8_probability_codes_bit_exact(causal, dim_qk):
    """The kernel's e4m3 probability codes equal fp8.expfree_codes' bit for bit (as tests/test_kernel_gpu.py pins
    Hopper's), on one KV tile (64 keys) of the problem in probability_codes.py."""
    seed = int(RNG.integers(1 << 31))
    seq, heads = 64, 2
    q_codes, k_codes, v_codes = probability_codes.inputs(np.random.default_rng(seed), seq, heads, dim_qk)
    out, _ = _run(_fp8_kernel(dim_qk), *(c.view(ml_dtypes.float8_e4m3fn) for c in (q_codes, k_codes, v_codes)),
                  causal, seed=seed)
    assert np.isfinite(out).all(), f"seed {seed}: unwritten or non-finite outputs"
    scale_log2 = float(np.float32(np.log2(np.e) / np.sqrt(dim_qk)))  # as the kernel argument holds it
    probability_codes.check(out, q_codes, k_codes, causal, scale_log2, seed)


@pytest.mark.parametrize("name", ["fwd_bf16_hd128", "fwd_bf16_qk192", "fwd_fp8_hd128", "fwd_fp8_qk192"])
def test_lds_accesses_free_of_bank_conflicts(name):
    """Every LDS access of the kernel (the K and V tile fills, the K operand reads, the transposing V^T reads) takes one
    cycle a phase in the emulator's model of the MI355X's 64 LDS banks (tools/gfx950_emu/lds_banks.py), over a causal
    run with masked and unmasked tiles: the LDS map of fwd_lds_layout (padded rows; fp8's V keys swapped in rows) and
    fp8's fill rows r and r + 8 in one phase. With unpadded rows the K reads took 28 (fp8) / 60 (bf16) extra cycles
    each and the V^T reads 6."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    dim_qk = 192 if name.endswith("qk192") else 128
    dtype = ml_dtypes.float8_e4m3fn if "fp8" in name else ml_dtypes.bfloat16
    q, k, v = (rng.standard_normal((1, 130, 2, d)).astype(dtype) for d in (dim_qk, dim_qk, 128))
    descales = tuple(np.asarray(1.0, np.float32) for _ in range(3)) if "fp8" in name else None
    stats = []
    _run(name, q, k, v, True, descales, stats=stats, seed=seed)
    lds = stats[0].lds
    kinds = {text.split()[0] for _, text in lds.executions}
    assert {"ds_write_b128", "ds_read_b128"} <= kinds and any(k.startswith("ds_read_b64_tr") for k in kinds), kinds
    conflicted = {f"{text} at 0x{addr:x}": cycles for (addr, text), cycles in lds.conflicted(64).items()}
    assert not conflicted, f"{name}: extra cycles per instruction {conflicted}"


SCHEDULE_SEEDS = 3  # interleavings per kernel in test_schedules (each run ~2-4 s on CI's cores)


@pytest.mark.parametrize("name", ["fwd_bf16_hd128", "fwd_bf16_qk192", "fwd_fp8_hd128", "fwd_fp8_qk192"])
def test_schedules(name):
    """One causal GQA problem of several KV tiles under SCHEDULE_SEEDS wave interleavings: no emulator error (a race
    or a register used before its wait) and outputs bit-identical across them, every element written."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    dim_qk = 192 if name.endswith("qk192") else 128
    dtype = ml_dtypes.float8_e4m3fn if "fp8" in name else ml_dtypes.bfloat16
    q, k, v = (rng.standard_normal(shape).astype(dtype)
               for shape in ((1, 100, 2, dim_qk), (1, 300, 1, dim_qk), (1, 300, 1, 128)))
    descales = tuple(np.asarray(0.5, np.float32) for _ in range(3)) if "fp8" in name else None
    first, first_lse = _run(name, q, k, v, True, descales, seed=seed)
    assert np.isfinite(first).all() and np.isfinite(first_lse).all(), f"seed {seed}: unwritten or non-finite outputs"
    for s in range(seed + 1, seed + SCHEDULE_SEEDS):
        out, lse = _run(name, q, k, v, True, descales, seed=s)
        assert np.array_equal(out, first) and np.array_equal(lse, first_lse), \
            f"input seed {seed}: schedule seed {s} changes the output (against schedule seed {seed})"
