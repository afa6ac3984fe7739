/* Kernel arguments of the gfx950 quantizers (asm/gfx950/quantize.inc, quantize_paged.inc), defined once here.
 *
 * The assembly names each field's byte offset with a `.set karg_<field>, N` line; tests/test_gfx950_static.py
 * compiles this header and checks every offset and the total size against those lines, and against
 * tests/kernargs.py, which reads this struct into the tests' ctypes mirror (keep one field list a line).
 * Addresses and strides are in bytes; the host has validated every argument (src/validate.c).
 */
#ifndef FLASHPREFILL_GFX950_QUANTIZE_KERNARG_H
#define FLASHPREFILL_GFX950_QUANTIZE_KERNARG_H

#include <stdint.h>

typedef struct fp_gfx950_quantize_kernarg {
    uint64_t x, codes;       /* device addresses: (batch, seq, heads, dim) */
    uint64_t exponents;      /* int8 (batch, heads, blocks) contiguous */
    uint64_t signs;          /* 0, or dim floats */
    uint64_t subtract;       /* 0, or (batch, heads, dim) floats */
    uint64_t x_stride_batch, codes_stride_batch;
    uint32_t x_stride_seq, x_stride_head;
    uint32_t codes_stride_seq, codes_stride_head;
    int32_t seqlen, heads, block_tokens, blocks;
    int32_t x_fp32;             /* 1: float32 x, 0: bf16 */
    int32_t code_max_exponent;  /* code_max = g 2^code_max_exponent, g in [0.5, 1) */
    uint32_t code_max_mantissa; /* g's float32 mantissa bits */
    int32_t phase;              /* 0: each block's own exponent; 1: the final exponents, then the codes */
    uint64_t cu_seqlens;        /* 0, or the packed form's batch + 1 row bounds (seqlen max_seqlen, batch strides 0) */
    int32_t total;              /* the packed form: rows of x and codes */
} fp_gfx950_quantize_kernarg;   /* the head dim is the kernel's own (quantize_d<dim>) */

/* The paged KV-cache writer's (quantize_paged_d<dim>): x (tokens, heads_kv, dim) into the cache's codes (num_pages,
   page_size, heads_kv, dim) and exponents (num_pages, heads_kv) at slot_mapping's slots. */
typedef struct fp_gfx950_quantize_paged_kernarg {
    uint64_t x, slot_mapping, codes, exponents;
    uint64_t signs;             /* 0, or dim floats */
    uint64_t codes_stride_page;
    uint32_t x_stride_token, x_stride_head;
    uint32_t codes_stride_row, codes_stride_head;
    int32_t tokens, heads_kv, page_size, num_pages;
    int32_t x_fp32;             /* 1: float32 x, 0: bf16 */
} fp_gfx950_quantize_paged_kernarg;

#endif /* FLASHPREFILL_GFX950_QUANTIZE_KERNARG_H */
