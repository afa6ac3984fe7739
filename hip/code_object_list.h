/* The gfx950 code objects `make amd` builds (asm/gfx950/<name>.s), one kernel each of the same name, listed once for
 * the enum of kernels (hip/loader.h), the embedded images (hip/code_objects.S, .h) and the loader's table
 * (hip/loader.c): X(ENUM_SUFFIX, name). Plain #defines, so that the assembler's preprocessor reads it too.
 */
#ifndef FLASHPREFILL_GFX950_CODE_OBJECT_LIST_H
#define FLASHPREFILL_GFX950_CODE_OBJECT_LIST_H

#define FP_GFX950_CODE_OBJECTS(X) \
    X(FWD_BF16_HD128, fwd_bf16_hd128) \
    X(FWD_BF16_QK192, fwd_bf16_qk192) \
    X(FWD_FP8_HD128, fwd_fp8_hd128) \
    X(FWD_FP8_QK192, fwd_fp8_qk192) \
    X(QUANTIZE_D32, quantize_d32) \
    X(QUANTIZE_D64, quantize_d64) \
    X(QUANTIZE_D96, quantize_d96) \
    X(QUANTIZE_D128, quantize_d128) \
    X(QUANTIZE_D160, quantize_d160) \
    X(QUANTIZE_D192, quantize_d192) \
    X(QUANTIZE_D224, quantize_d224) \
    X(QUANTIZE_D256, quantize_d256) \
    X(MERGE_STATE_BF16_BF16, merge_state_bf16_bf16) \
    X(MERGE_STATE_BF16_F32, merge_state_bf16_f32) \
    X(MERGE_STATE_F32_BF16, merge_state_f32_bf16) \
    X(MERGE_STATE_F32_F32, merge_state_f32_f32) \
    X(VARLEN_CHECK, varlen_check) \
    X(QUANTIZE_PAGED_D32, quantize_paged_d32) \
    X(QUANTIZE_PAGED_D64, quantize_paged_d64) \
    X(QUANTIZE_PAGED_D96, quantize_paged_d96) \
    X(QUANTIZE_PAGED_D128, quantize_paged_d128) \
    X(QUANTIZE_PAGED_D160, quantize_paged_d160) \
    X(QUANTIZE_PAGED_D192, quantize_paged_d192) \
    X(QUANTIZE_PAGED_D224, quantize_paged_d224) \
    X(QUANTIZE_PAGED_D256, quantize_paged_d256)

#endif /* FLASHPREFILL_GFX950_CODE_OBJECT_LIST_H */
