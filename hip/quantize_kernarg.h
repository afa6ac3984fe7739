/* Kernel arguments of the gfx950 quantizer (asm/gfx950/quantize.inc), defined once here.
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
} fp_gfx950_quantize_kernarg;   /* the head dim is the kernel's own (quantize_d<dim>) */

#endif /* FLASHPREFILL_GFX950_QUANTIZE_KERNARG_H */
