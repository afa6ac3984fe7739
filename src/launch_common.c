/* What every backend's launchers share (src/launch_common.h). */
#include "launch_common.h"

int fp_dtype_bytes(flashprefill_dtype dtype)
{
    switch (dtype) {
    case FLASHPREFILL_DTYPE_BF16: return 2;
    case FLASHPREFILL_DTYPE_FP8_E4M3: return 1;
    case FLASHPREFILL_DTYPE_FP32: return 4;
    }
    return 0;
}

float fp_quantize_code_max(const flashprefill_quantize_params *p)
{
    return p->code_max == 0.0f ? FP_E4M3_MAX : p->code_max;
}

int fp_quantize_dim_index(int32_t dim)
{
    return dim / FP_QUANTIZE_DIM_STEP - 1;
}

flashprefill_status fp_check_grid_yz(const char *heads_name, int32_t heads, int32_t batch, const char *whose)
{
    if (heads > FP_MAX_GRID_YZ || batch > FP_MAX_GRID_YZ)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "%s = %d or batch = %d exceeds %s grid limit of %d",
                       heads_name, (int)heads, (int)batch, whose, FP_MAX_GRID_YZ);
    return FLASHPREFILL_SUCCESS;
}

fp_descale_layout fp_descale_layout_of(const flashprefill_descale *d, int32_t heads_kv, int32_t heads,
                                       int32_t seqlen)
{
    fp_descale_layout l = {0};
    switch (d->kind) {
    case FLASHPREFILL_DESCALE_PER_HEAD:
        l.stride_batch = heads_kv;
        l.stride_head = 1;
        /* fall through */
    case FLASHPREFILL_DESCALE_PER_TENSOR:
        l.factors = d->factors;
        break;
    case FLASHPREFILL_DESCALE_PER_BLOCK:
        l.exponents = d->exponents;
        l.block_tokens = d->block_tokens;
        l.blocks_per_head = (int32_t)(((int64_t)seqlen + d->block_tokens - 1) / d->block_tokens);
        l.stride_batch = (int64_t)heads * l.blocks_per_head;
        l.stride_head = l.blocks_per_head;
        break;
    case FLASHPREFILL_DESCALE_NONE:
        break;
    }
    return l;
}

int64_t fp_varlen_tiles_max(const flashprefill_params *p)
{
    const int64_t per_sequence = ((int64_t)p->seqlen_q + FP_VARLEN_TILE_ROWS - 1) / FP_VARLEN_TILE_ROWS;
    const int64_t by_rows = (int64_t)p->total_q / FP_VARLEN_TILE_ROWS + p->batch;
    const int64_t by_lengths = per_sequence * p->batch;
    return by_rows < by_lengths ? by_rows : by_lengths;
}

int64_t fp_varlen_workspace_bytes(const flashprefill_params *p)
{
    return fp_is_varlen(p) ? 16 + 32 * (fp_varlen_tiles_max(p) * p->heads_kv + p->batch) : 0;
}
