/* Kernel arguments of the gfx950 merge_state kernels (asm/gfx950/merge_state.inc), defined once here.
 *
 * The assembly names each field's byte offset with a `.set karg_<field>, N` line; tests/test_gfx950_static.py
 * compiles this header and checks every offset and the total size against those lines, and against
 * tests/kernargs.py, which reads this struct into the tests' ctypes mirror (keep one field list a line).
 * Addresses and strides are in bytes; the host has validated every argument (src/validate.c).
 */
#ifndef FLASHPREFILL_GFX950_MERGE_STATE_KERNARG_H
#define FLASHPREFILL_GFX950_MERGE_STATE_KERNARG_H

#include <stdint.h>

typedef struct fp_gfx950_merge_state_kernarg {
    uint64_t out_a, out_b, out;  /* device addresses: (batch, seqlen_q, heads_q, dim_v) */
    uint64_t lse_a, lse_b, lse;  /* float (batch, heads_q, seqlen_q) contiguous; lse 0: not written */
    uint64_t a_stride_batch, b_stride_batch, out_stride_batch;
    uint32_t a_stride_seq, a_stride_head;
    uint32_t b_stride_seq, b_stride_head;
    uint32_t out_stride_seq, out_stride_head;
    int32_t seqlen_q, heads_q;
    int32_t pieces_per_row;      /* dim_v / 8: a lane's piece is 8 elements */
    int32_t rows_per_pass;       /* rows the wave's 64 lanes cover at once: max(1, 64 / pieces_per_row) */
    int32_t rows_per_workgroup;  /* a multiple of rows_per_pass */
} fp_gfx950_merge_state_kernarg; /* in and out dtypes are the kernel's own (merge_state_<in>_<out>) */

#endif /* FLASHPREFILL_GFX950_MERGE_STATE_KERNARG_H */
