/* What every backend's launchers share (src/launch_common.c): element sizes, the quantizer's defaults and dims,
 * the grid's limits, and the descale layout as kernels index it. One definition, so that cuda/ and hip/ agree.
 */
#ifndef FLASHPREFILL_LAUNCH_COMMON_H
#define FLASHPREFILL_LAUNCH_COMMON_H

#include "error.h"
#include "flashprefill.h"

#ifdef __cplusplus
extern "C" {
#endif

/* e4m3's largest finite magnitude: flashprefill_quantize_params.code_max 0 stands for it. */
#define FP_E4M3_MAX 448.0f

/* A grid's y and z extents (heads, batch) are at most this on both vendors' GPUs. */
#define FP_MAX_GRID_YZ 65535

/* A prepared v (FLASHPREFILL_V_LAYOUT_PREPARED) holds its keys in groups of this many positions, each row rounded up
   to whole groups; the quantizer writes that layout for blocks of whole groups. */
#define FP_PREPARED_GROUP_KEYS 16

/* Positions of a prepared row of `seqlen` keys: seqlen rounded up to whole groups. */
static inline int64_t fp_prepared_positions(int64_t seqlen)
{
    return (seqlen + FP_PREPARED_GROUP_KEYS - 1) / FP_PREPARED_GROUP_KEYS * FP_PREPARED_GROUP_KEYS;
}

/* The quantizer's kernels: one per dim, a multiple of this up to FP_QUANTIZE_DIM_MAX. */
#define FP_QUANTIZE_DIM_STEP 32
#define FP_QUANTIZE_DIM_MAX 256

/* Bytes of one element of `dtype` (bf16 2, fp8 1, fp32 4); 0 for a value no enum names. */
int fp_dtype_bytes(flashprefill_dtype dtype);

/* The quantizer's code_max with 0 read as FP_E4M3_MAX. */
float fp_quantize_code_max(const flashprefill_quantize_params *p);

/* The index of a dim among the quantizer's and the paged writer's kernels (dim / FP_QUANTIZE_DIM_STEP - 1), one per
   dim their validation admits. */
int fp_quantize_dim_index(int32_t dim);

/* NOT_SUPPORTED with the last error set where heads or batch pass FP_MAX_GRID_YZ, else SUCCESS. `heads_name`
   names the field ("heads_q", "heads"), `whose` the grid ("the", "the quantizer's", "prepare_v's"). */
flashprefill_status fp_check_grid_yz(const char *heads_name, int32_t heads, int32_t batch, const char *whose);

/* A descale as the kernels read it: per-tensor or per-head factors[b * stride_batch + h_kv * stride_head], or per-block
   exponents[b * stride_batch + h * stride_head + token / block_tokens]; NONE: both pointers NULL. */
typedef struct fp_descale_layout {
    const float *factors;
    const int8_t *exponents;
    int64_t stride_batch, stride_head; /* elements */
    int32_t block_tokens;              /* PER_BLOCK's; 0 otherwise */
    int32_t blocks_per_head;           /* PER_BLOCK: ceil(seqlen / block_tokens); 0 otherwise */
} fp_descale_layout;

/* The layout of d for a tensor of `heads` heads and `seqlen` tokens (heads_q and seqlen_q for q); factors are per
   KV head (heads_kv), q's too, as FlashAttention-3's. */
fp_descale_layout fp_descale_layout_of(const flashprefill_descale *d, int32_t heads_kv, int32_t heads,
                                       int32_t seqlen);

/* Varlen and paged calls (flashprefill_params.cu_seqlens_q set). */
static inline int fp_is_varlen(const flashprefill_params *p)
{
    return p->cu_seqlens_q != NULL;
}

/* The varlen plan kernel's verdict on a call's device arrays, the workspace's error (flashprefill_workspace_error):
   0, or the kind of the first fault it found. */
typedef enum fp_varlen_error {
    FP_VARLEN_OK = 0,
    FP_VARLEN_CU_SEQLENS_Q = 1, /* cu_seqlens_q decreasing, negative or past total_q */
    FP_VARLEN_SEQLEN_Q = 2,     /* a query length above seqlen_q */
    FP_VARLEN_CU_SEQLENS_K = 3, /* cu_seqlens_k decreasing, negative or past total_k */
    FP_VARLEN_SEQLEN_K = 4,     /* a key length above seqlen_k */
    FP_VARLEN_SEQUSED_K = 5,    /* seqused_k negative or past its sequence's rows (or its pages) */
    FP_VARLEN_BLOCK_TABLE = 6,  /* a page id outside [0, num_pages) */
    FP_VARLEN_ERRORS = 7        /* how many kinds, the verdict included */
} fp_varlen_error;

/* Query rows per work item of the varlen plan: every forward kernel's tile (both backends count in it). */
#define FP_VARLEN_TILE_ROWS 128

/* The most (sequence, query tile) entries a varlen call can have: each sequence's tiles are its rows over
   FP_VARLEN_TILE_ROWS rounded up, and no sequence is longer than seqlen_q. */
int64_t fp_varlen_tiles_max(const flashprefill_params *p);

/* The workspace a varlen call needs: a 16-byte header, 32 bytes per entry of the list (one per query tile and kv
   head: cuda/fwd/varlen.cuh) and 32 per sequence (the plan's record of it: cuda/varlen_plan.cu). */
int64_t fp_varlen_workspace_bytes(const flashprefill_params *p);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_LAUNCH_COMMON_H */
