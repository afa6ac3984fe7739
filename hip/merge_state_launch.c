/* The gfx950 backend's flashprefill_merge_state: params -> fp_gfx950_merge_state_kernarg -> one launch of
 * asm/gfx950/merge_state_<in>_<out>.s, one wave per workgroup of rows of one (batch, head). Validation
 * (src/validate.c) runs first, so a call gets the same INVALID_ARGUMENT messages from both libraries. Assembled and
 * run in the functional emulator only, never on an MI355X.
 */
#include <stdint.h>

#include "backend.h"
#include "device_check.h"
#include "launch_common.h"
#include "loader.h"
#include "merge_state.h"
#include "merge_state_kernarg.h"

enum {
    MERGE_LANES = 64,
    PIECE_ELEMS = 8,          /* a lane's piece: 16 bytes of bf16 */
    PASSES_PER_WORKGROUP = 8, /* rows of a workgroup: 8 passes of the wave, to spread its setup */
};

/* The largest byte offset a lane adds to its workgroup's first row of x fits the kernel's 32-bit offsets. */
static int offsets_fit(int64_t rows, int64_t stride_seq_bytes, int64_t row_bytes)
{
    return (rows - 1) * stride_seq_bytes + row_bytes <= (int64_t)UINT32_MAX;
}

flashprefill_status fp_backend_merge_state(const flashprefill_merge_state_params *p, void *stream)
{
    _Static_assert(FP_GFX950_MERGE_STATE_F32_F32 - FP_GFX950_MERGE_STATE_BF16_BF16 == 3,
                   "one kernel per (in, out) dtype, out fastest");
    flashprefill_status s;
    if ((s = fp_check_merge_state_device(p)))
        return s;
    const int64_t in_elem = fp_dtype_bytes(p->in_dtype), out_elem = fp_dtype_bytes(p->out_dtype);
    const int32_t pieces = p->dim_v / PIECE_ELEMS;
    const int32_t rows_per_pass = pieces <= MERGE_LANES ? MERGE_LANES / pieces : 1;
    const int32_t rows_per_workgroup = rows_per_pass * PASSES_PER_WORKGROUP;
    const int64_t strides[] = {p->out_a_stride_seq * in_elem, p->out_a_stride_head * in_elem,
                               p->out_b_stride_seq * in_elem, p->out_b_stride_head * in_elem,
                               p->out_stride_seq * out_elem, p->out_stride_head * out_elem};
    for (size_t i = 0; i < sizeof strides / sizeof strides[0]; ++i)
        if (strides[i] > (int64_t)UINT32_MAX)
            return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the gfx950 merge_state takes sequence and head "
                           "strides below 4 GiB");
    if (!offsets_fit(rows_per_workgroup, strides[0], p->dim_v * in_elem) ||
        !offsets_fit(rows_per_workgroup, strides[2], p->dim_v * in_elem) ||
        !offsets_fit(rows_per_workgroup, strides[4], p->dim_v * out_elem) || p->seqlen_q >= (1 << 30))
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the gfx950 merge_state addresses a workgroup's %d rows "
                       "and a head's lse with 32-bit byte offsets: strides or seqlen_q too large", rows_per_workgroup);
    if ((s = fp_check_grid_yz("heads_q", p->heads_q, p->batch, "merge_state's")))
        return s;
    const fp_gfx950_kernel kernel = (fp_gfx950_kernel)(FP_GFX950_MERGE_STATE_BF16_BF16 +
                                                       2 * (p->in_dtype == FLASHPREFILL_DTYPE_FP32) +
                                                       (p->out_dtype == FLASHPREFILL_DTYPE_FP32));
    fp_gfx950_merge_state_kernarg a = {
        .out_a = (uint64_t)(uintptr_t)p->out_a, .out_b = (uint64_t)(uintptr_t)p->out_b,
        .out = (uint64_t)(uintptr_t)p->out, .lse_a = (uint64_t)(uintptr_t)p->lse_a,
        .lse_b = (uint64_t)(uintptr_t)p->lse_b, .lse = (uint64_t)(uintptr_t)p->lse,
        .a_stride_batch = (uint64_t)(p->out_a_stride_batch * in_elem),
        .b_stride_batch = (uint64_t)(p->out_b_stride_batch * in_elem),
        .out_stride_batch = (uint64_t)(p->out_stride_batch * out_elem),
        .a_stride_seq = (uint32_t)strides[0], .a_stride_head = (uint32_t)strides[1],
        .b_stride_seq = (uint32_t)strides[2], .b_stride_head = (uint32_t)strides[3],
        .out_stride_seq = (uint32_t)strides[4], .out_stride_head = (uint32_t)strides[5],
        .seqlen_q = p->seqlen_q, .heads_q = p->heads_q, .pieces_per_row = pieces, .rows_per_pass = rows_per_pass,
        .rows_per_workgroup = rows_per_workgroup,
    };
    const unsigned groups = (unsigned)((p->seqlen_q + rows_per_workgroup - 1) / rows_per_workgroup);
    return fp_hip_launch(kernel, groups, (unsigned)p->heads_q, (unsigned)p->batch, MERGE_LANES, stream, &a, sizeof a,
                         "merge_state");
}
