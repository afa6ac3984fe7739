/* Kernel arguments of the gfx950 forward kernels (asm/gfx950/fwd_*.s), defined once here.
 *
 * The assembly names each field's byte offset with a `.set karg_<field>, N` line; tests/test_gfx950_static.py
 * compiles this header and checks every offset and the total size against those lines, and against
 * tests/kernargs.py, which reads this struct into the tests' ctypes mirror (keep one field list a line).
 * Addresses and strides are in bytes; the host has validated every argument (src/validate.c) but the varlen
 * arrays' values, which only the device sees.
 */
#ifndef FLASHPREFILL_GFX950_FWD_KERNARG_H
#define FLASHPREFILL_GFX950_FWD_KERNARG_H

#include <stdint.h>

typedef struct fp_gfx950_fwd_kernarg {
    uint64_t q, k, v, out;    /* device addresses: (batch, seq, heads, dim) tensors */
    uint64_t lse;             /* 0, or float (batch, heads_q, seqlen_q), varlen (heads_q, total_q) */
    uint32_t q_stride_seq, q_stride_head;
    uint64_t q_stride_batch;
    uint32_t k_stride_seq, k_stride_head;
    uint64_t k_stride_batch;
    uint32_t v_stride_seq, v_stride_head;
    uint64_t v_stride_batch;
    uint32_t out_stride_seq, out_stride_head;
    uint64_t out_stride_batch;
    int32_t seqlen_q, seqlen_k;
    int32_t heads_q, heads_per_kv;  /* heads_q / heads_kv */
    int32_t causal;                 /* 0 or 1 */
    int32_t causal_offset;          /* seqlen_k - seqlen_q: query i sees keys <= i + causal_offset */
    float softmax_scale_log2;       /* softmax_scale * log2(e) */
    uint32_t lse_rows;              /* lse's stride between heads, in floats: seqlen_q, varlen total_q */
    /* fp8 only: value = code * factors[batch * stride_batch + head_kv * stride_head]; address 0: factor 1.
       Per tensor: strides 0, 0; per (batch, kv head): heads_kv, 1 (in floats). */
    uint64_t q_descale, k_descale, v_descale;
    int32_t q_descale_stride_batch, q_descale_stride_head;
    int32_t k_descale_stride_batch, k_descale_stride_head;
    int32_t v_descale_stride_batch, v_descale_stride_head;
    /* fp8 only, instead of the factors: per-block power-of-two descales, value = code * 2^exponent, int8
       exponents (batch, heads, blocks_per_head) with heads = heads_q for q and heads_kv for k, v; 0: none.
       block_tokens is a multiple of 64 (one KV tile of fwd_fp8_hd128). */
    uint64_t q_exponents, k_exponents, v_exponents;
    int32_t q_block_tokens, k_block_tokens, v_block_tokens;
    int32_t q_blocks_per_head, k_blocks_per_head, v_blocks_per_head;
    /* Varlen (flashprefill.h): int32 device arrays, read by the kernel for its sequence (workgroup id z); the
       batch strides are then 0, seqlen_q and seqlen_k the largest lengths. cu_seqlens_q 0: a batch of equal
       lengths. seqused_k 0: key lengths from cu_seqlens_k. */
    uint64_t cu_seqlens_q, cu_seqlens_k, seqused_k;
    /* Paged k and v (cu_seqlens_k 0, seqused_k given): key j of sequence b at row j % 2^page_size_log2 of page
       block_table[b * block_table_stride + (j >> page_size_log2)], whose rows start page * k_page_stride (bytes)
       past k (v likewise). block_table 0: not paged. */
    uint64_t block_table;
    int32_t block_table_stride, page_size_log2;
    uint32_t k_page_stride, v_page_stride;
    /* A bf16 q (q_bf16 1; fwd_fp8_hd128, varlen and paged calls): q's strides in bytes of its bf16 rows, q_descale 0;
       the kernel rounds each wave's 32 rows to e4m3 itself, first rotated by the dim_qk float signs (+1 / -1) at
       q_rotation_signs where not 0 (asm/gfx950/fwd_q_from_bf16.inc). */
    uint64_t q_rotation_signs;
    int32_t q_bf16;
} fp_gfx950_fwd_kernarg;

#endif /* FLASHPREFILL_GFX950_FWD_KERNARG_H */
