"""AMD's hardware-proven gfx950 kernels (the `amd-aiter` wheel's code objects) run in our emulator
(tools/gfx950_emu), against float64 references: where they disagree, the emulator is wrong, since the kernels
are right on an MI355X. They pin the semantics the emulator had only from our reading of the ISA and that our
own kernels rely on: the transposing LDS reads (ds_read_b64_tr_b16 / tr_b8), the MFMA operand and result layouts
(v_mfma_f32_32x32x16_bf16, v_mfma_f32_32x32x64_f8f6f4, v_mfma_f32_16x16x128_f8f6f4), v_permlane16/32_swap,
v_cvt_pk_fp8_f32, DPP row_newbcast, buffer loads into LDS. AMD's files are read from the installed wheel at
test time; the fp8 fmha forward, which the wheel lacks, from the folder FLASHPREFILL_AITER_FP8 names (markers.py).

Arguments are packed by tools/gfx950_emu/aiter_args.py from AMD's C++ structs; launch grids as AMD's launchers
(fmha: aiter_meta/hsa/gfx950/fmha_v3_fwd/codegen.py; mla and the GEMM: aiter_meta/csrc/py_itfs_cu/asm_*.cu)
compute them.
Bound: relative L2 error at most 1.5x that of a numpy model of the kernel's precision (P rounded to bf16 / fp8,
output rounded to bf16), every output element written (outputs poisoned with NaN), LSE to 1e-5."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import markers

from flashprefill import reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from gfx950_emu import GlobalMemory, load_code_object, run_kernel  # noqa: E402
from gfx950_emu.aiter_args import (F8_BLOCK_SCALE_GEMM_FIELDS, FMHA_FWD_V3_FIELDS, MLA_FIELDS,  # noqa: E402
                                   fmha_fwd_v3_fp8_launch, fmha_fwd_v3_launch, mangled, pack_slots)

pytestmark = [markers.needs_objdump22, markers.needs_aiter]
RNG = np.random.default_rng()
BF16, FP8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
BOUND_OVER_MODEL = 1.5
LSE_TOLERANCE = 1e-5


def aiter_object(relative: str):
    """The loaded code object aiter_meta/hsa/gfx950/<relative> (skip if this amd-aiter version lacks it)."""
    path = markers.AITER_GFX950 / relative
    if not path.exists():
        pytest.skip(markers.no_aiter_object(relative))
    return load_code_object(path)


def run_aiter(path, name, grid, workitems, kernarg, mem):
    """run_kernel on AMD's kernel `name` of `path`; skip if this amd-aiter's kernel declares another argument size
    (a newer wheel whose structs changed: our packing follows 0.1.7.post2.dev18's).

    AMD's kernels rely on latency where the ISA's memory model asks for a wait (hd192 and mla read LDS loads after a
    stretch of MFMAs with no lgkmcnt wait; the fmha kernels refill LDS with buffer_load ... lds after a barrier over
    transposing reads their waves have not waited for; the GEMMs' loads to LDS and ds_writes share bytes with no
    vmcnt wait between), so they run with enforce_waits=False: in lockstep, loads landing at their first use, LDS
    outside the race model. What they check is the emulator's arithmetic and data movement."""
    co = aiter_object(path)
    declared = co.kernel(name).descriptor.kernarg_bytes
    if declared != len(kernarg):
        pytest.skip(markers.aiter_arguments_differ(name, declared, len(kernarg)))
    return run_kernel(co, name, grid, workitems, kernarg, mem, enforce_waits=False)


def rounded(x, dtype):
    return np.asarray(x).astype(np.float32).astype(dtype).astype(np.float64)


def check(out, ref, model, what):
    """out against the float64 ref, bounded by 1.5x the error of the precision model."""
    assert not np.isnan(out).any(), f"{what}: {int(np.isnan(out).sum())} elements not written"
    err, model_err = reference.relative_l2(out, ref), reference.relative_l2(model, ref)
    assert err <= BOUND_OVER_MODEL * model_err, \
        f"{what}: {reference.error_report(out, ref)}; precision model {model_err:.4g}"
    return err


# ---- fmha_v3 forward, bf16, causal and not -----------------------------------------------------------------------
def fmha_model(q, k, v, scale, causal, p_dtype=BF16):
    """Attention with P = exp(s - rowmax) rounded to p_dtype for the P.V product, output rounded to bf16."""
    b, s, h, _ = q.shape
    group = h // k.shape[2]
    out = np.empty(q.shape[:3] + (v.shape[-1],))
    mask = np.tril(np.ones((s, s), bool)) | (not causal)
    for bi in range(b):
        for hi in range(h):
            scores = np.where(mask, scale * (q[bi, :, hi] @ k[bi, :, hi // group].T), -np.inf)
            p = np.exp(scores - scores.max(1, keepdims=True))
            out[bi, :, hi] = rounded(p, p_dtype) @ v[bi, :, hi // group] / p.sum(1, keepdims=True)
    return rounded(out, BF16)


@pytest.mark.parametrize("head_dim_q, seqlen, heads_q, heads_kv, causal", [
    (128, 256, 1, 1, True), (128, 300, 2, 1, True), (128, 130, 2, 2, True), (192, 200, 1, 1, True),
    (192, 320, 2, 1, True), (128, 300, 1, 1, False), (192, 200, 1, 1, False)])
def test_fmha_v3_fwd_bf16(head_dim_q, seqlen, heads_q, heads_kv, causal):
    head_dim_v, batch = 128, 1
    q = RNG.standard_normal((batch, seqlen, heads_q, head_dim_q)).astype(BF16)
    k = RNG.standard_normal((batch, seqlen, heads_kv, head_dim_q)).astype(BF16)
    v = RNG.standard_normal((batch, seqlen, heads_kv, head_dim_v)).astype(BF16)
    mem = GlobalMemory()
    out = np.full((batch, seqlen, heads_q, head_dim_v), np.nan, BF16)
    lse = np.full((batch, heads_q, seqlen), np.nan, np.float32)
    ptrs = [mem.alloc_array(x) for x in (out, q, k, v, lse)]
    scale = head_dim_q ** -0.5
    strides = {n: [x.strides[i] // x.itemsize for i in (1, 2, 0)] for n, x in zip("oqkv", (out, q, k, v))}
    launch = fmha_fwd_v3_launch(dict(zip(("o", "q", "k", "v", "lse"), ptrs)), q.shape, k.shape, strides, causal,
                                scale)
    name = launch.symbol
    stats = run_aiter(launch.code_object, name, launch.grid, launch.workitems, launch.kernarg, mem)

    got = mem.read(ptrs[0], BF16, out.shape).astype(np.float64)
    got_lse = mem.read(ptrs[4], np.float32, lse.shape).astype(np.float64)
    qf, kf, vf = (x.astype(np.float64) for x in (q, k, v))
    ref, ref_lse = reference.attention_reference(qf, kf, vf, causal=causal, softmax_scale=scale, return_lse=True)
    check(got, ref, fmha_model(qf, kf, vf, scale, causal), name)
    assert np.abs(got_lse - ref_lse).max() <= LSE_TOLERANCE * np.abs(ref_lse).max()
    for used in ("ds_read_b64_tr_b16", "v_mfma_f32_32x32x16_bf16", "v_permlane16_swap_b32",
                 "v_permlane32_swap_b32", "buffer_load_dwordx4"):
        assert stats.instructions[used], f"{name} did not run {used}"


# ---- fmha_v3 forward, fp8 q, k, v (bf16 out), causal and not: AMD's repository's objects, not the wheel's ----------
@markers.needs_aiter_fp8
@pytest.mark.parametrize("seqlen, heads_q, heads_kv, batch, causal", [
    (256, 1, 1, 1, True), (700, 2, 1, 1, True), (520, 2, 2, 2, True), (300, 2, 1, 1, False), (520, 2, 2, 1, False)])
def test_fmha_v3_fwd_fp8(seqlen, heads_q, heads_kv, batch, causal):
    q = (2 * RNG.standard_normal((batch, seqlen, heads_q, 128))).astype(FP8)
    k, v = ((2 * RNG.standard_normal((batch, seqlen, heads_kv, 128))).astype(FP8) for _ in range(2))
    descale = RNG.uniform(0.2, 1, 3).astype(np.float32)     # per tensor: the kernels read no descale strides
    mem = GlobalMemory()
    out = np.full((batch, seqlen, heads_q, 128), np.nan, BF16)
    lse = np.full((batch, heads_q, seqlen), np.nan, np.float32)
    ptrs = dict(zip(("o", "q", "k", "v", "lse"), (mem.alloc_array(x) for x in (out, q, k, v, lse))))
    ptrs.update({f"{n}_descale": mem.alloc_array(descale[i:i + 1]) for i, n in enumerate("qkv")})
    strides = {n: [x.strides[i] // x.itemsize for i in (1, 2, 0)] for n, x in zip("oqkv", (out, q, k, v))}
    scale = 128 ** -0.5
    launch = fmha_fwd_v3_fp8_launch(ptrs, q.shape, k.shape, strides, causal, scale)
    co = load_code_object(markers.AITER_FP8 / launch.code_object)
    assert co.kernel(launch.symbol).descriptor.kernarg_bytes == len(launch.kernarg)
    stats = run_kernel(co, launch.symbol, launch.grid, launch.workitems, launch.kernarg, mem, enforce_waits=False)

    got = mem.read(ptrs["o"], BF16, out.shape).astype(np.float64)
    got_lse = mem.read(ptrs["lse"], np.float32, lse.shape).astype(np.float64)
    qf, kf, vf = (x.astype(np.float64) * d for x, d in zip((q, k, v), descale))
    ref, ref_lse = reference.attention_reference(qf, kf, vf, causal=causal, softmax_scale=scale, return_lse=True)
    check(got, ref, fmha_model(qf, kf, vf, scale, causal, FP8), launch.symbol)
    assert np.abs(got_lse - ref_lse).max() <= LSE_TOLERANCE * np.abs(ref_lse).max()
    for used in ("ds_read_b64_tr_b8", "v_mfma_f32_32x32x64_f8f6f4", "v_cvt_pk_fp8_f32", "v_mul_i32_i24_dpp",
                 "v_mov_b64"):
        assert stats.instructions[used], f"{launch.symbol} did not run {used}"


# ---- mla decode, fp8 Q and KV (a8w8), 4 query tokens x 16 heads, causal ----------------------------------
MLA_NAME, MLA_PATH = "mla_a8w8_qh16_qseqlen4_gqaratio16", "mla/mla_a8w8_qh16_qseqlen4_gqaratio16.co"
MLA_QUERIES, MLA_HEADS, MLA_DIM_QK, MLA_DIM_V = 4, 16, 576, 512
MLA_KERNARG_BYTES = 320


def mla_model(q, keys, scale, causal_offset):
    """Attention of q [rows, 576] over keys [n, 576] (V = keys' first 512 dims), row r seeing keys up to
    r // 16 + causal_offset; P rounded to fp8 for P.V (the kernel converts it with v_cvt_pk_fp8_f32)."""
    scores = scale * (q @ keys.T)
    visible = np.arange(keys.shape[0])[None, :] <= (np.arange(q.shape[0]) // MLA_HEADS + causal_offset)[:, None]
    scores = np.where(visible, scores, -np.inf)
    p = np.exp(scores - scores.max(1, keepdims=True))
    return rounded(p, FP8) @ keys[:, :MLA_DIM_V] / p.sum(1, keepdims=True)


@pytest.mark.parametrize("kv_lens", [(128,), (200, 77)])
def test_mla_a8w8_qseqlen4(kv_lens):
    batch, page_tokens, kv_splits = len(kv_lens), 1, 1
    q = (2 * RNG.standard_normal((batch * MLA_QUERIES, MLA_HEADS, MLA_DIM_QK))).astype(FP8)
    pages = int(sum(kv_lens))
    kv = (2 * RNG.standard_normal((pages, page_tokens, 1, MLA_DIM_QK))).astype(FP8)
    q_scale, kv_scale = np.float32(RNG.uniform(0.1, 1)), np.float32(RNG.uniform(0.1, 1))
    kv_indptr = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    page_of_token = RNG.permutation(pages).astype(np.int32)
    # one kv split: the kernel writes the bf16 output itself (asm_mla.cu: out_16_nosplit = kv_split)
    out = np.full((batch * MLA_QUERIES, kv_splits, MLA_HEADS, MLA_DIM_V), np.nan, BF16)
    mem = GlobalMemory()
    out_ptr = mem.alloc_array(out)
    lse_ptr = mem.alloc_array(np.zeros((batch * MLA_QUERIES, kv_splits, MLA_HEADS), np.float32))
    scale = MLA_DIM_QK ** -0.5
    args = dict(
        ptr_R=out_ptr, ptr_LSE=lse_ptr, ptr_Q=mem.alloc_array(q), ptr_KV=mem.alloc_array(kv),
        ptr_LTP=mem.alloc_array(kv_indptr), ptr_LTD=mem.alloc_array(page_of_token),
        ptr_LTL=mem.alloc_array(np.full(batch, page_tokens, np.int32)), scalar=scale,
        s_MQA=MLA_HEADS * MLA_QUERIES, s_kv_split=kv_splits, s_Q_Bs=q.strides[0] * MLA_QUERIES,
        s_Bs=kv.strides[0], s_log2_plen=0,
        ptr_QTP=mem.alloc_array((np.arange(batch + 1) * MLA_QUERIES).astype(np.int32)),
        ptr_STP=mem.alloc_array((np.arange(batch + 1) * kv_splits).astype(np.int32)), ptr_RP=0,
        ptr_QSCALE=mem.alloc_array(np.array([q_scale])), ptr_KVSCALE=mem.alloc_array(np.array([kv_scale])),
        out_16_nosplit=kv_splits)
    # latency instead of waits: LDS reads after MFMAs, and a VALU write over an unused prefetch's register
    stats = run_aiter(MLA_PATH, mangled(MLA_NAME), (1, batch, kv_splits), 256,
                      pack_slots(MLA_FIELDS, args, MLA_KERNARG_BYTES), mem)

    got = mem.read(out_ptr, BF16, out.shape)[:, 0].astype(np.float64)
    refs, models = [], []
    for b, n in enumerate(kv_lens):
        keys = kv[page_of_token[kv_indptr[b]:kv_indptr[b + 1]], 0, 0].astype(np.float64) * kv_scale
        qb = q[b * MLA_QUERIES:(b + 1) * MLA_QUERIES].astype(np.float64) * q_scale
        refs.append(reference.attention_reference(qb[None], keys[None, :, None], keys[None, :, None, :MLA_DIM_V],
                                                  causal=True, softmax_scale=scale)[0])
        model = mla_model(qb.reshape(-1, MLA_DIM_QK), keys, scale, n - MLA_QUERIES)
        models.append(model.reshape(MLA_QUERIES, MLA_HEADS, MLA_DIM_V))
    check(got, np.concatenate(refs), rounded(np.concatenate(models), BF16), MLA_NAME)
    for used in ("ds_read_b64_tr_b8", "v_mfma_f32_32x32x64_f8f6f4", "v_mfma_f32_16x16x128_f8f6f4",
                 "v_cvt_pk_fp8_f32", "v_permlane16_swap_b32", "v_permlane32_swap_b32"):
        assert stats.instructions[used], f"{MLA_NAME} did not run {used}"


# ---- fp8 block-scale GEMM: C[m, n] = sum over 128-wide k blocks b of xs[b, m] ws[n / 128, b] X_b W_b^T, bf16 C ---
GEMM_BLOCK = 128


def preshuffled(w):
    """aiter's shuffle_weight(layout=(16, 16)) of W [n, k] fp8: 16-row x 32-byte blocks, 16-byte pieces innermost."""
    n, k = w.shape
    return np.ascontiguousarray(w.reshape(n // 16, 16, k // 32, 2, 16).transpose(0, 2, 3, 1, 4).reshape(n, k))


@pytest.mark.parametrize("m, n, k", [(20, 512, 640), (100, 256, 512)])
def test_f8_block_scale_gemm(m, n, k):
    name = "f8_block_scale_mi350_x32" if m <= 32 else "f8_block_scale_mi350_x128"
    tile_m, tile_n = (32 if m <= 32 else 128), 2 * GEMM_BLOCK
    x = RNG.standard_normal((m, k)).astype(FP8)
    w = RNG.standard_normal((n, k)).astype(FP8)
    x_scale = RNG.uniform(0.5, 2, (k // GEMM_BLOCK, m)).astype(np.float32)            # [k block, m]
    # [n block, k block]: the launcher's comment says [K/128, N/128], but only this order matches the kernel
    w_scale = RNG.uniform(0.5, 2, (n // GEMM_BLOCK, k // GEMM_BLOCK)).astype(np.float32)
    mem = GlobalMemory()
    c_ptr = mem.alloc_array(np.full((m, n), np.nan, BF16))
    args = {field: 0 for field, _ in F8_BLOCK_SCALE_GEMM_FIELDS}
    args.update(ptr_C=c_ptr, ptr_X=mem.alloc_array(x), ptr_W=mem.alloc_array(preshuffled(w)),
                ptr_XQ=mem.alloc_array(x_scale), ptr_WQ=mem.alloc_array(w_scale), K=k, N=n, M=m, eprt_cnt=1,
                Xs=k, Ws=k, Cs=2 * n)
    stats = run_aiter(f"{name}.co", name, ((n + tile_n - 1) // tile_n, (m + tile_m - 1) // tile_m, 1), 256,
                      pack_slots(F8_BLOCK_SCALE_GEMM_FIELDS, args), mem)
    got = mem.read(c_ptr, BF16, (m, n)).astype(np.float64)
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    ref = sum((xf[:, blk] @ wf[:, blk].T) * x_scale[b][:, None] * np.repeat(w_scale[:, b], GEMM_BLOCK)[None, :]
              for b, blk in enumerate(slice(GEMM_BLOCK * i, GEMM_BLOCK * (i + 1)) for i in range(k // GEMM_BLOCK)))
    check(got, ref, rounded(ref, BF16), name)
    for used in ("v_mfma_f32_16x16x128_f8f6f4", "v_mul_f32_dpp", "buffer_load_dwordx4"):
        assert stats.instructions[used], f"{name} did not run {used}"


def test_kernarg_size_from_the_metadata_note():
    """AMD's descriptors leave KERNARG_SIZE 0; the loader takes the metadata note's, which matches AMD's structs."""
    co = aiter_object("fmha_v3_fwd/fwd_hd128_bf16_causal.co")
    assert co.kernel(mangled("fmha_fwd_hd128_bf16_causal")).descriptor.kernarg_bytes == 16 * len(FMHA_FWD_V3_FIELDS)
    assert aiter_object(MLA_PATH).kernel(mangled(MLA_NAME)).descriptor.kernarg_bytes == MLA_KERNARG_BYTES
