/* The gfx950 backend's flashprefill_quantize: params -> fp_gfx950_quantize_kernarg -> two launches of
 * asm/gfx950/quantize_d<dim>.s (phase 0: each block's own exponent; phase 1: the final exponents, then the codes),
 * one wave per block of tokens of one head of one sequence, equal-length or packed (cu_seqlens); and its
 * flashprefill_quantize_paged: params -> fp_gfx950_quantize_paged_kernarg -> one launch of
 * asm/gfx950/quantize_paged_d<dim>.s, one wave per (token, kv head). Assembled and run in the functional emulator
 * only, never on an MI355X.
 */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "launch_common.h"
#include "loader.h"
#include "quantize_kernarg.h"

enum { QUANTIZE_LANES = 64 };
enum { PAGED_TOKENS_MAX = (1 << 30) - 1 }; /* 4 bytes a slot, below 4 GiB: the kernel's scalar load offsets */

static int fits_u32(int64_t bytes) { return bytes >= 0 && bytes <= (int64_t)UINT32_MAX; }

flashprefill_status fp_backend_check_quantize(const flashprefill_quantize_params *p)
{
    if (p->codes_layout != FLASHPREFILL_V_LAYOUT_DEFAULT) /* the gfx950 kernels read V^T from LDS themselves */
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "codes_layout PREPARED is Hopper's (the gfx950 attention "
                       "takes v in its default layout)");
    const int64_t elem = fp_dtype_bytes(p->x_dtype);
    if (!fits_u32(p->x_stride_seq * elem) || !fits_u32(p->x_stride_head * elem) || !fits_u32(p->codes_stride_seq) ||
        !fits_u32(p->codes_stride_head))
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the gfx950 quantizer takes sequence and head strides "
                       "below 4 GiB");
    return fp_check_grid_yz("heads", p->heads, p->batch, "the");
}

flashprefill_status fp_backend_quantize(const flashprefill_quantize_params *p, void *stream)
{
    _Static_assert(FP_GFX950_QUANTIZE_D256 - FP_GFX950_QUANTIZE_D32 + 1 == FP_QUANTIZE_DIM_MAX / FP_QUANTIZE_DIM_STEP,
                   "one quantizer per dim, in order of dims");
    const fp_gfx950_kernel kernel = (fp_gfx950_kernel)(FP_GFX950_QUANTIZE_D32 + fp_quantize_dim_index(p->dim));
    const int64_t elem = fp_dtype_bytes(p->x_dtype);
    int code_max_exponent = 0;
    const float code_max = fp_quantize_code_max(p);
    const float fraction = frexpf(code_max, &code_max_exponent);
    uint32_t fraction_bits;
    memcpy(&fraction_bits, &fraction, sizeof fraction_bits);
    /* packed: blocks of the longest sequence, each sequence's rows from cu_seqlens on the device */
    const int32_t seqlen = p->cu_seqlens != NULL ? p->max_seqlen : p->seqlen;
    const int32_t blocks = (int32_t)(((int64_t)seqlen + p->block_tokens - 1) / p->block_tokens);
    fp_gfx950_quantize_kernarg a = {
        .x = (uint64_t)(uintptr_t)p->x, .codes = (uint64_t)(uintptr_t)p->codes,
        .exponents = (uint64_t)(uintptr_t)p->exponents, .signs = (uint64_t)(uintptr_t)p->signs,
        .subtract = (uint64_t)(uintptr_t)p->subtract,
        .x_stride_batch = (uint64_t)(p->x_stride_batch * elem), .codes_stride_batch = (uint64_t)p->codes_stride_batch,
        .x_stride_seq = (uint32_t)(p->x_stride_seq * elem), .x_stride_head = (uint32_t)(p->x_stride_head * elem),
        .codes_stride_seq = (uint32_t)p->codes_stride_seq, .codes_stride_head = (uint32_t)p->codes_stride_head,
        .seqlen = seqlen, .heads = p->heads, .block_tokens = p->block_tokens, .blocks = blocks,
        .x_fp32 = p->x_dtype == FLASHPREFILL_DTYPE_FP32, .code_max_exponent = code_max_exponent,
        .code_max_mantissa = fraction_bits & 0x7FFFFFu,
        .cu_seqlens = (uint64_t)(uintptr_t)p->cu_seqlens, .total = p->total,
    };
    for (int32_t phase = 0; phase < 2; ++phase) {
        a.phase = phase;
        flashprefill_status s = fp_hip_launch(kernel, (unsigned)blocks, (unsigned)p->heads, (unsigned)p->batch,
                                              QUANTIZE_LANES, stream, &a, sizeof a, phase ? "quantize, codes" :
                                                                                    "quantize, exponents");
        if (s)
            return s;
    }
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_backend_check_quantize_paged(const flashprefill_quantize_paged_params *p)
{
    const int64_t elem = fp_dtype_bytes(p->x_dtype);
    if (!fits_u32(p->x_stride_token * elem) || !fits_u32(p->x_stride_head * elem) || !fits_u32(p->codes_stride_row) ||
        !fits_u32(p->codes_stride_head))
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the gfx950 paged quantizer takes token, row and head "
                       "strides below 4 GiB");
    if (p->tokens > PAGED_TOKENS_MAX)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "tokens = %d exceeds the gfx950 paged quantizer's limit of "
                       "%d (slot_mapping's byte offsets are 32-bit)", (int)p->tokens, PAGED_TOKENS_MAX);
    return fp_check_grid_yz("heads_kv", p->heads_kv, 1, "the paged quantizer's");
}

flashprefill_status fp_backend_quantize_paged(const flashprefill_quantize_paged_params *p, void *stream)
{
    _Static_assert(FP_GFX950_QUANTIZE_PAGED_D256 - FP_GFX950_QUANTIZE_PAGED_D32 + 1 ==
                   FP_QUANTIZE_DIM_MAX / FP_QUANTIZE_DIM_STEP, "one paged quantizer per dim, in order of dims");
    const fp_gfx950_kernel kernel = (fp_gfx950_kernel)(FP_GFX950_QUANTIZE_PAGED_D32 + fp_quantize_dim_index(p->dim));
    const int64_t elem = fp_dtype_bytes(p->x_dtype);
    fp_gfx950_quantize_paged_kernarg a = {
        .x = (uint64_t)(uintptr_t)p->x, .slot_mapping = (uint64_t)(uintptr_t)p->slot_mapping,
        .codes = (uint64_t)(uintptr_t)p->codes, .exponents = (uint64_t)(uintptr_t)p->exponents,
        .signs = (uint64_t)(uintptr_t)p->signs, .codes_stride_page = (uint64_t)p->codes_stride_page,
        .x_stride_token = (uint32_t)(p->x_stride_token * elem), .x_stride_head = (uint32_t)(p->x_stride_head * elem),
        .codes_stride_row = (uint32_t)p->codes_stride_row, .codes_stride_head = (uint32_t)p->codes_stride_head,
        .tokens = p->tokens, .heads_kv = p->heads_kv, .page_size = p->page_size, .num_pages = p->num_pages,
        .x_fp32 = p->x_dtype == FLASHPREFILL_DTYPE_FP32,
    };
    return fp_hip_launch(kernel, (unsigned)p->tokens, (unsigned)p->heads_kv, 1, QUANTIZE_LANES, stream, &a, sizeof a,
                         "quantize_paged");
}

flashprefill_status fp_backend_check_prepare_v(const flashprefill_prepare_v_params *p)
{
    (void)p;
    return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "flashprefill_prepare_v: the gfx950 kernels read v in the "
                   "DEFAULT layout only (they read V^T from LDS with transposing reads), so this backend has no "
                   "prepared layout");
}

/* Never reached: fp_backend_check_prepare_v refuses every call first. */
flashprefill_status fp_backend_prepare_v(const flashprefill_prepare_v_params *p, void *stream)
{
    (void)stream;
    return fp_backend_check_prepare_v(p);
}
