/* Kernel arguments of the gfx950 varlen check kernel (asm/gfx950/varlen_check.s), defined once here.
 *
 * The assembly names each field's byte offset with a `.set karg_<field>, N` line; tests/test_gfx950_static.py
 * compiles this header and checks every offset and the total size against those lines, and against
 * tests/kernargs.py, which reads this struct into the tests' ctypes mirror (keep one field list a line).
 * Addresses and strides are in bytes; the arrays' values are what the kernel checks.
 */
#ifndef FLASHPREFILL_GFX950_VARLEN_CHECK_KERNARG_H
#define FLASHPREFILL_GFX950_VARLEN_CHECK_KERNARG_H

#include <stdint.h>

typedef struct fp_gfx950_varlen_check_kernarg {
    uint64_t cu_seqlens_q, cu_seqlens_k; /* the call's; cu_seqlens_k 0 with a paged cache */
    uint64_t seqused_k, block_table;     /* the call's, or 0 */
    uint64_t header;                     /* the workspace: int32 {error, sequence, value, 0} (flashprefill.h) */
    uint64_t copy_q, copy_k, copy_used;  /* in the workspace: what the forward kernel reads instead of the call's
                                            arrays (copy_k 0 with a paged cache); all lengths 0 after a fault */
    uint64_t out, lse;                   /* bf16 (total_q, heads_q, 128); float (heads_q, total_q) or 0 */
    uint32_t out_stride_seq, out_stride_head;
    int32_t batch, total_q, total_k, max_seqlen_q, max_seqlen_k;
    int32_t block_table_stride, page_size_log2, num_pages, heads_q;
} fp_gfx950_varlen_check_kernarg;

#endif /* FLASHPREFILL_GFX950_VARLEN_CHECK_KERNARG_H */
