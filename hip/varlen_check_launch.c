/* The gfx950 check of a varlen or paged call's device arrays: one wave of asm/gfx950/varlen_check.s, enqueued before
 * the forward kernel, which then reads the checked copies in the workspace instead of the call's arrays, so that a
 * fault leaves it nothing to read (every sequence empty) while out and lse become NaN and the workspace header holds
 * the verdict that flashprefill_workspace_error reads back. Assembled and run in the functional emulator only, never
 * on an MI355X.
 *
 * The workspace: the 16-byte header, then cu_seqlens_q's copy (batch + 1 int32), cu_seqlens_k's (batch + 1; unused
 * with a paged cache), and the key counts (batch): 16 + 12 batch + 8 bytes, within the 16 + 32 batch of
 * fp_varlen_workspace_bytes (a batch of at least one).
 */
#include <stdint.h>
#include <string.h>

#include "launch_common.h"
#include "loader.h"
#include "varlen_check.h"
#include "varlen_check_kernarg.h"

enum { CHECK_LANES = 64, HEADER_BYTES = 16, DIM_V = 128 };

flashprefill_status fp_gfx950_check_varlen_limits(const flashprefill_params *p)
{
    const int64_t out_elem = fp_dtype_bytes(p->out_dtype);
    /* the kernel's 32-bit quantities: a table row's bytes, a row of out's heads, lse's element count */
    if (p->dim_v != DIM_V || (int64_t)p->block_table_stride * 4 > (int64_t)UINT32_MAX ||
        (int64_t)p->heads_q * p->out_stride_head * out_elem > (int64_t)UINT32_MAX ||
        (p->lse != NULL && (int64_t)p->heads_q * p->total_q > (int64_t)UINT32_MAX))
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the gfx950 check of the varlen arrays takes dim_v 128, "
                       "block_table rows and out's heads below 4 GiB and lse below 2^32 elements");
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_gfx950_varlen_check(const flashprefill_params *p, void *stream,
                                           fp_gfx950_varlen_copies *copies)
{
    const uint64_t workspace = (uint64_t)(uintptr_t)p->workspace;
    const uint64_t offsets_bytes = 4 * ((uint64_t)p->batch + 1);
    const int paged = p->block_table != NULL;
    copies->cu_seqlens_q = workspace + HEADER_BYTES;
    copies->cu_seqlens_k = paged ? 0 : copies->cu_seqlens_q + offsets_bytes;
    copies->seqused_k = copies->cu_seqlens_q + 2 * offsets_bytes;
    const int64_t out_elem = fp_dtype_bytes(p->out_dtype);
    fp_gfx950_varlen_check_kernarg a = {
        .cu_seqlens_q = (uint64_t)(uintptr_t)p->cu_seqlens_q, .cu_seqlens_k = (uint64_t)(uintptr_t)p->cu_seqlens_k,
        .seqused_k = (uint64_t)(uintptr_t)p->seqused_k, .block_table = (uint64_t)(uintptr_t)p->block_table,
        .header = workspace, .copy_q = copies->cu_seqlens_q, .copy_k = copies->cu_seqlens_k,
        .copy_used = copies->seqused_k, .out = (uint64_t)(uintptr_t)p->out, .lse = (uint64_t)(uintptr_t)p->lse,
        .out_stride_seq = (uint32_t)(p->out_stride_seq * out_elem),
        .out_stride_head = (uint32_t)(p->out_stride_head * out_elem),
        .batch = p->batch, .total_q = p->total_q, .total_k = paged ? 0 : p->total_k, .max_seqlen_q = p->seqlen_q,
        .max_seqlen_k = p->seqlen_k, .block_table_stride = paged ? p->block_table_stride : 0,
        .page_size_log2 = paged ? __builtin_ctz((unsigned)p->page_size) : 0, .num_pages = paged ? p->num_pages : 0,
        .heads_q = p->heads_q,
    };
    return fp_hip_launch(FP_GFX950_VARLEN_CHECK, 1, 1, 1, CHECK_LANES, stream, &a, sizeof a, "varlen check");
}

flashprefill_status fp_backend_read_workspace_header(const void *workspace, int32_t header[4])
{
    const fp_hip_api *api;
    hipFunction_t fn;
    flashprefill_status s = fp_hip_load(&api, FP_GFX950_VARLEN_CHECK, &fn);
    if (s)
        return s;
    const hipError_t err = api->Memcpy(header, workspace, HEADER_BYTES, FP_HIP_MEMCPY_DEVICE_TO_HOST);
    if (err != 0)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "hipMemcpy (the workspace header): %s", api->GetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
