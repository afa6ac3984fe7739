/* The gfx950 backend's kernel table (src/backend.h) and launcher: params -> fp_gfx950_fwd_kernarg -> one
 * hipModuleLaunchKernel of fwd_{bf16,fp8}_{hd128,qk192}, for a batch of equal lengths or a varlen one (a workgroup per
 * 256 queries of the longest sequence, head and sequence: those past their sequence's queries end at once). Pointers
 * are not checked against the device here (the HIP pointer-attribute API has no stable C layout to dlopen against);
 * the runtime reports bad addresses at the launch or sync.
 */
#include <limits.h>
#include <math.h>

#include "backend.h"
#include "fwd_kernarg.h"
#include "launch_common.h"
#include "loader.h"
#include "varlen_check.h"

/* fwd_*.s: 8 waves of 32 queries per workgroup; the fp8 kernels take keys 64 at a time, so a per-block scale's
   block must hold whole tiles. */
enum { QUERIES_PER_WORKGROUP = 256, LANES_PER_WORKGROUP = 512, KV_TILE_KEYS_FP8 = 64 };

static int fits_u32(int64_t bytes) { return bytes >= 0 && bytes <= (int64_t)UINT32_MAX; }

static int is_power_of_two(int32_t n) { return n > 0 && (n & (n - 1)) == 0; }

/* Bytes of one element of q: bf16 where an fp8 kernel rounds a bf16 q itself (q_dtype), else in_dtype's. */
static int64_t q_elem_bytes(const flashprefill_params *p)
{
    return fp_dtype_bytes(p->q_dtype ? p->q_dtype : p->in_dtype);
}

/* A paged cache as the kernels read it: pages of a power of two rows (shift and mask), page strides and the table's
   entries before the last sequence's row in 32 bits; per-block descales of k and v one per page (block_tokens
   page_size, exponents (num_pages, heads_kv)). */
static flashprefill_status check_paged(const flashprefill_params *p)
{
    if (p->seqused_k == NULL)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the gfx950 kernels take a paged cache's lengths from "
                                                         "seqused_k, which is NULL");
    if (!is_power_of_two(p->page_size))
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "the gfx950 kernels take pages of a power of two tokens (16, 64, 256, ...), got page_size %d",
                       (int)p->page_size);
    const int64_t elem = fp_dtype_bytes(p->in_dtype);
    if (!fits_u32(p->k_stride_batch * elem) || !fits_u32(p->v_stride_batch * elem) ||
        !fits_u32((int64_t)p->batch * p->block_table_stride))
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "the gfx950 kernels take page strides below 4 GiB and block_table below 2^32 entries");
    const flashprefill_descale *kv[2] = {&p->k_descale, &p->v_descale};
    for (int i = 0; i < 2; ++i)
        if (kv[i]->kind == FLASHPREFILL_DESCALE_PER_BLOCK && kv[i]->block_tokens != p->page_size)
            return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                           "the gfx950 kernels take a paged cache's PER_BLOCK descales one per page: block_tokens %d "
                           "is not page_size %d", (int)kv[i]->block_tokens, (int)p->page_size);
    return FLASHPREFILL_SUCCESS;
}

/* What the kernels read of a varlen batch: cu_seqlens_q, then cu_seqlens_k or a paged cache (block_table), seqused_k
   where given; their values are checked on the device (hip/varlen_check_launch.c). The fields' own validity is the
   shared validation's (src/validate.c). */
static flashprefill_status check_varlen(const flashprefill_params *p)
{
    if (p->cu_seqlens_q == NULL)
        return FLASHPREFILL_SUCCESS;
    flashprefill_status s = fp_gfx950_check_varlen_limits(p);
    if (s)
        return s;
    if (p->block_table != NULL)
        return check_paged(p);
    if (p->cu_seqlens_k == NULL)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "the gfx950 kernels take varlen k and v by cu_seqlens_k, which is NULL");
    return FLASHPREFILL_SUCCESS;
}

/* The kernels keep sequence and head strides in 32 bits, lse's element index in 32 bits (unsigned), and the grid's y
   and z (heads_q, batch) in 16. */
static flashprefill_status check_limits(const flashprefill_params *p)
{
    flashprefill_status s = check_varlen(p);
    if (s)
        return s;
    const int64_t elem = fp_dtype_bytes(p->in_dtype), out_elem = fp_dtype_bytes(p->out_dtype), q_elem = q_elem_bytes(p);
    const int64_t strides[8] = {p->q_stride_seq * q_elem, p->q_stride_head * q_elem, p->k_stride_seq * elem,
                                p->k_stride_head * elem, p->v_stride_seq * elem, p->v_stride_head * elem,
                                p->out_stride_seq * out_elem, p->out_stride_head * out_elem};
    for (int i = 0; i < 8; ++i)
        if (!fits_u32(strides[i]))
            return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                           "the gfx950 kernels take sequence and head strides below 4 GiB");
    const int64_t lse_elements = (int64_t)p->heads_q * (p->cu_seqlens_q ? p->total_q : (int64_t)p->batch * p->seqlen_q);
    if (p->lse != NULL && lse_elements > (int64_t)UINT32_MAX + 1)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "the gfx950 kernels index lse in 32 bits: %lld elements are more than 2^32",
                       (long long)lse_elements);
    return fp_check_grid_yz("heads_q", p->heads_q, p->batch, "the");
}

/* The runtime and this device's modules load (fp_hip_load loads every kernel at once); the pointers are the
   runtime's to refuse at the launch (see above). */
flashprefill_status fp_backend_check_device(const fp_named_pointer *pointers, int count)
{
    const fp_hip_api *api;
    hipFunction_t fn;
    (void)pointers;
    (void)count;
    return fp_hip_load(&api, FP_GFX950_FWD_BF16_HD128, &fn);
}

static flashprefill_status launch_fwd(const flashprefill_params *p, void *stream, fp_gfx950_kernel kernel)
{
    const int64_t elem = fp_dtype_bytes(p->in_dtype), out_elem = fp_dtype_bytes(p->out_dtype), q_elem = q_elem_bytes(p);
    /* varlen: the batch strides unused (the kernel adds cu_seqlens' rows, or a paged cache's pages) */
    const int varlen = p->cu_seqlens_q != NULL, paged = varlen && p->block_table != NULL;
    fp_gfx950_fwd_kernarg a = {
        .q = (uint64_t)(uintptr_t)p->q, .k = (uint64_t)(uintptr_t)p->k, .v = (uint64_t)(uintptr_t)p->v,
        .out = (uint64_t)(uintptr_t)p->out, .lse = (uint64_t)(uintptr_t)p->lse,
        .q_stride_seq = (uint32_t)(p->q_stride_seq * q_elem), .q_stride_head = (uint32_t)(p->q_stride_head * q_elem),
        .q_stride_batch = varlen ? 0 : (uint64_t)(p->q_stride_batch * q_elem),
        .k_stride_seq = (uint32_t)(p->k_stride_seq * elem), .k_stride_head = (uint32_t)(p->k_stride_head * elem),
        .k_stride_batch = varlen ? 0 : (uint64_t)(p->k_stride_batch * elem),
        .v_stride_seq = (uint32_t)(p->v_stride_seq * elem), .v_stride_head = (uint32_t)(p->v_stride_head * elem),
        .v_stride_batch = varlen ? 0 : (uint64_t)(p->v_stride_batch * elem),
        .out_stride_seq = (uint32_t)(p->out_stride_seq * out_elem),
        .out_stride_head = (uint32_t)(p->out_stride_head * out_elem),
        .out_stride_batch = varlen ? 0 : (uint64_t)(p->out_stride_batch * out_elem),
        .seqlen_q = p->seqlen_q, .seqlen_k = p->seqlen_k, .heads_q = p->heads_q,
        .heads_per_kv = p->heads_q / p->heads_kv, .causal = p->causal, .causal_offset = p->seqlen_k - p->seqlen_q,
        .softmax_scale_log2 = p->softmax_scale * (float)M_LOG2E,
        .lse_rows = (uint32_t)(varlen ? p->total_q : p->seqlen_q),
        .cu_seqlens_q = (uint64_t)(uintptr_t)p->cu_seqlens_q, .cu_seqlens_k = (uint64_t)(uintptr_t)p->cu_seqlens_k,
        .seqused_k = varlen ? (uint64_t)(uintptr_t)p->seqused_k : 0,
        .q_rotation_signs = (uint64_t)(uintptr_t)p->q_rotation_signs, .q_bf16 = q_elem == 2 && elem == 1,
    };
    if (paged) {
        a.block_table = (uint64_t)(uintptr_t)p->block_table, a.block_table_stride = p->block_table_stride;
        a.page_size_log2 = __builtin_ctz((unsigned)p->page_size);
        a.k_page_stride = (uint32_t)(p->k_stride_batch * elem), a.v_page_stride = (uint32_t)(p->v_stride_batch * elem);
        a.cu_seqlens_k = 0;
    }
    const fp_descale_layout dq = fp_descale_layout_of(&p->q_descale, p->heads_kv, p->heads_q, p->seqlen_q);
    const fp_descale_layout dk = fp_descale_layout_of(&p->k_descale, p->heads_kv, p->heads_kv, p->seqlen_k);
    const fp_descale_layout dv = fp_descale_layout_of(&p->v_descale, p->heads_kv, p->heads_kv, p->seqlen_k);
    /* factors by their strides; exponents by blocks_per_head (the kernels derive their strides from it); varlen:
       seqlen_q and seqlen_k are the longest sequences', the per-block descales' rows (flashprefill.h) */
    a.q_descale = (uint64_t)(uintptr_t)dq.factors, a.q_exponents = (uint64_t)(uintptr_t)dq.exponents;
    a.k_descale = (uint64_t)(uintptr_t)dk.factors, a.k_exponents = (uint64_t)(uintptr_t)dk.exponents;
    a.v_descale = (uint64_t)(uintptr_t)dv.factors, a.v_exponents = (uint64_t)(uintptr_t)dv.exponents;
    if (dq.factors)
        a.q_descale_stride_batch = (int32_t)dq.stride_batch, a.q_descale_stride_head = (int32_t)dq.stride_head;
    if (dk.factors)
        a.k_descale_stride_batch = (int32_t)dk.stride_batch, a.k_descale_stride_head = (int32_t)dk.stride_head;
    if (dv.factors)
        a.v_descale_stride_batch = (int32_t)dv.stride_batch, a.v_descale_stride_head = (int32_t)dv.stride_head;
    a.q_block_tokens = dq.block_tokens, a.q_blocks_per_head = dq.blocks_per_head;
    a.k_block_tokens = dk.block_tokens, a.k_blocks_per_head = dk.blocks_per_head;
    a.v_block_tokens = dv.block_tokens, a.v_blocks_per_head = dv.blocks_per_head;
    if (paged) /* k's and v's exponents (num_pages, heads_kv): the kernels take the page as the row, one block */
        a.k_blocks_per_head = dk.exponents ? 1 : 0, a.v_blocks_per_head = dv.exponents ? 1 : 0;
    if (varlen) { /* the arrays checked first; the kernel reads their checked copies */
        fp_gfx950_varlen_copies copies;
        flashprefill_status s = fp_gfx950_varlen_check(p, stream, &copies);
        if (s)
            return s;
        a.cu_seqlens_q = copies.cu_seqlens_q, a.cu_seqlens_k = copies.cu_seqlens_k, a.seqused_k = copies.seqused_k;
    }
    const unsigned blocks = (unsigned)((p->seqlen_q + QUERIES_PER_WORKGROUP - 1) / QUERIES_PER_WORKGROUP);
    return fp_hip_launch(kernel, blocks, (unsigned)p->heads_q, (unsigned)p->batch, LANES_PER_WORKGROUP, stream, &a,
                         sizeof a, "forward");
}

static flashprefill_status launch_fwd_bf16_hd128(const flashprefill_params *p, void *stream)
{
    return launch_fwd(p, stream, FP_GFX950_FWD_BF16_HD128);
}

static flashprefill_status launch_fwd_bf16_qk192(const flashprefill_params *p, void *stream)
{
    return launch_fwd(p, stream, FP_GFX950_FWD_BF16_QK192);
}

static flashprefill_status launch_fwd_fp8_hd128(const flashprefill_params *p, void *stream)
{
    return launch_fwd(p, stream, FP_GFX950_FWD_FP8_HD128);
}

static flashprefill_status launch_fwd_fp8_qk192(const flashprefill_params *p, void *stream)
{
    return launch_fwd(p, stream, FP_GFX950_FWD_FP8_QK192);
}

/* Float32 scores only: q's codes up to 448. */
float fp_backend_q_code_max(const fp_kernel_entry *e)
{
    (void)e;
    return FP_E4M3_MAX;
}

/* v as every tensor only: the kernels read V^T from LDS with transposing reads, so a prepared v has
   nothing to save here, and flashprefill_prepare_v is not part of this backend (quantize_launch.c). */
#define V_LAYOUT_DEFAULT (1u << FLASHPREFILL_V_LAYOUT_DEFAULT)
/* q in in_dtype; fwd_fp8_hd128 also rounds a bf16 q itself (varlen forms only: src/validate.c), as the Hopper fp8
   kernels do at dim_qk 128. */
#define Q_AS_IN_DTYPE(dtype) (1u << (dtype))
#define Q_BF16 (1u << FLASHPREFILL_DTYPE_BF16)
/* Every kernel takes equal-length batches, varlen batches and paged caches (the launcher's own limits aside). */
#define ALL_FORMS (FP_FORM_BIT(FP_FORM_DENSE) | FP_FORM_BIT(FP_FORM_VARLEN) | FP_FORM_BIT(FP_FORM_PAGED))

const fp_kernel_entry fp_backend_kernels[] = {
    {"gfx950_fwd_bf16_hd128", FLASHPREFILL_DTYPE_BF16, FLASHPREFILL_DTYPE_BF16, 128, 128,
     FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE), 0, FLASHPREFILL_PROBABILITIES_DEFAULT, FLASHPREFILL_SCORES_FP32,
     V_LAYOUT_DEFAULT, ALL_FORMS, Q_AS_IN_DTYPE(FLASHPREFILL_DTYPE_BF16), check_limits, launch_fwd_bf16_hd128},
    {"gfx950_fwd_bf16_qk192", FLASHPREFILL_DTYPE_BF16, FLASHPREFILL_DTYPE_BF16, 192, 128,
     FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE), 0, FLASHPREFILL_PROBABILITIES_DEFAULT, FLASHPREFILL_SCORES_FP32,
     V_LAYOUT_DEFAULT, ALL_FORMS, Q_AS_IN_DTYPE(FLASHPREFILL_DTYPE_BF16), check_limits, launch_fwd_bf16_qk192},
    {"gfx950_fwd_fp8_hd128", FLASHPREFILL_DTYPE_FP8_E4M3, FLASHPREFILL_DTYPE_BF16, 128, 128,
     FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE) | FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_TENSOR) |
         FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_HEAD) | FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_BLOCK),
     KV_TILE_KEYS_FP8, FLASHPREFILL_PROBABILITIES_DEFAULT, FLASHPREFILL_SCORES_FP32, V_LAYOUT_DEFAULT, ALL_FORMS,
     Q_AS_IN_DTYPE(FLASHPREFILL_DTYPE_FP8_E4M3) | Q_BF16, check_limits,
     launch_fwd_fp8_hd128},
    {"gfx950_fwd_fp8_qk192", FLASHPREFILL_DTYPE_FP8_E4M3, FLASHPREFILL_DTYPE_BF16, 192, 128,
     FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE) | FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_TENSOR) |
         FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_HEAD) | FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_BLOCK),
     KV_TILE_KEYS_FP8, FLASHPREFILL_PROBABILITIES_DEFAULT, FLASHPREFILL_SCORES_FP32, V_LAYOUT_DEFAULT, ALL_FORMS,
     Q_AS_IN_DTYPE(FLASHPREFILL_DTYPE_FP8_E4M3), check_limits,
     launch_fwd_fp8_qk192},
};
const int fp_backend_kernel_count = sizeof fp_backend_kernels / sizeof fp_backend_kernels[0];
