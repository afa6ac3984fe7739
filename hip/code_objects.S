/* The gfx950 code objects (`make amd`), embedded as read-only data of the host library.
   Paths are relative to the repository root, where make runs the assembler. */
    .section .rodata
    .balign 64
    .globl fp_gfx950_fwd_bf16_hd128_co
fp_gfx950_fwd_bf16_hd128_co:
    .incbin "build/gfx950/fwd_bf16_hd128.co"
.Lfwd_bf16_hd128_co_end:
    .balign 8
    .globl fp_gfx950_fwd_bf16_hd128_co_size
fp_gfx950_fwd_bf16_hd128_co_size:
    .quad .Lfwd_bf16_hd128_co_end - fp_gfx950_fwd_bf16_hd128_co
    .balign 64
    .globl fp_gfx950_fwd_bf16_qk192_co
fp_gfx950_fwd_bf16_qk192_co:
    .incbin "build/gfx950/fwd_bf16_qk192.co"
.Lfwd_bf16_qk192_co_end:
    .balign 8
    .globl fp_gfx950_fwd_bf16_qk192_co_size
fp_gfx950_fwd_bf16_qk192_co_size:
    .quad .Lfwd_bf16_qk192_co_end - fp_gfx950_fwd_bf16_qk192_co
    .balign 64
    .globl fp_gfx950_fwd_fp8_hd128_co
fp_gfx950_fwd_fp8_hd128_co:
    .incbin "build/gfx950/fwd_fp8_hd128.co"
.Lfwd_fp8_hd128_co_end:
    .balign 8
    .globl fp_gfx950_fwd_fp8_hd128_co_size
fp_gfx950_fwd_fp8_hd128_co_size:
    .quad .Lfwd_fp8_hd128_co_end - fp_gfx950_fwd_fp8_hd128_co
    .balign 64
    .globl fp_gfx950_fwd_fp8_qk192_co
fp_gfx950_fwd_fp8_qk192_co:
    .incbin "build/gfx950/fwd_fp8_qk192.co"
.Lfwd_fp8_qk192_co_end:
    .balign 8
    .globl fp_gfx950_fwd_fp8_qk192_co_size
fp_gfx950_fwd_fp8_qk192_co_size:
    .quad .Lfwd_fp8_qk192_co_end - fp_gfx950_fwd_fp8_qk192_co
    .balign 64
    .globl fp_gfx950_quantize_d32_co
fp_gfx950_quantize_d32_co:
    .incbin "build/gfx950/quantize_d32.co"
.Lquantize_d32_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d32_co_size
fp_gfx950_quantize_d32_co_size:
    .quad .Lquantize_d32_co_end - fp_gfx950_quantize_d32_co
    .balign 64
    .globl fp_gfx950_quantize_d64_co
fp_gfx950_quantize_d64_co:
    .incbin "build/gfx950/quantize_d64.co"
.Lquantize_d64_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d64_co_size
fp_gfx950_quantize_d64_co_size:
    .quad .Lquantize_d64_co_end - fp_gfx950_quantize_d64_co
    .balign 64
    .globl fp_gfx950_quantize_d96_co
fp_gfx950_quantize_d96_co:
    .incbin "build/gfx950/quantize_d96.co"
.Lquantize_d96_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d96_co_size
fp_gfx950_quantize_d96_co_size:
    .quad .Lquantize_d96_co_end - fp_gfx950_quantize_d96_co
    .balign 64
    .globl fp_gfx950_quantize_d128_co
fp_gfx950_quantize_d128_co:
    .incbin "build/gfx950/quantize_d128.co"
.Lquantize_d128_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d128_co_size
fp_gfx950_quantize_d128_co_size:
    .quad .Lquantize_d128_co_end - fp_gfx950_quantize_d128_co
    .balign 64
    .globl fp_gfx950_quantize_d160_co
fp_gfx950_quantize_d160_co:
    .incbin "build/gfx950/quantize_d160.co"
.Lquantize_d160_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d160_co_size
fp_gfx950_quantize_d160_co_size:
    .quad .Lquantize_d160_co_end - fp_gfx950_quantize_d160_co
    .balign 64
    .globl fp_gfx950_quantize_d192_co
fp_gfx950_quantize_d192_co:
    .incbin "build/gfx950/quantize_d192.co"
.Lquantize_d192_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d192_co_size
fp_gfx950_quantize_d192_co_size:
    .quad .Lquantize_d192_co_end - fp_gfx950_quantize_d192_co
    .balign 64
    .globl fp_gfx950_quantize_d224_co
fp_gfx950_quantize_d224_co:
    .incbin "build/gfx950/quantize_d224.co"
.Lquantize_d224_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d224_co_size
fp_gfx950_quantize_d224_co_size:
    .quad .Lquantize_d224_co_end - fp_gfx950_quantize_d224_co
    .balign 64
    .globl fp_gfx950_quantize_d256_co
fp_gfx950_quantize_d256_co:
    .incbin "build/gfx950/quantize_d256.co"
.Lquantize_d256_co_end:
    .balign 8
    .globl fp_gfx950_quantize_d256_co_size
fp_gfx950_quantize_d256_co_size:
    .quad .Lquantize_d256_co_end - fp_gfx950_quantize_d256_co
    .balign 64
    .globl fp_gfx950_merge_state_bf16_bf16_co
fp_gfx950_merge_state_bf16_bf16_co:
    .incbin "build/gfx950/merge_state_bf16_bf16.co"
.Lmerge_state_bf16_bf16_co_end:
    .balign 8
    .globl fp_gfx950_merge_state_bf16_bf16_co_size
fp_gfx950_merge_state_bf16_bf16_co_size:
    .quad .Lmerge_state_bf16_bf16_co_end - fp_gfx950_merge_state_bf16_bf16_co
    .balign 64
    .globl fp_gfx950_merge_state_bf16_f32_co
fp_gfx950_merge_state_bf16_f32_co:
    .incbin "build/gfx950/merge_state_bf16_f32.co"
.Lmerge_state_bf16_f32_co_end:
    .balign 8
    .globl fp_gfx950_merge_state_bf16_f32_co_size
fp_gfx950_merge_state_bf16_f32_co_size:
    .quad .Lmerge_state_bf16_f32_co_end - fp_gfx950_merge_state_bf16_f32_co
    .balign 64
    .globl fp_gfx950_merge_state_f32_bf16_co
fp_gfx950_merge_state_f32_bf16_co:
    .incbin "build/gfx950/merge_state_f32_bf16.co"
.Lmerge_state_f32_bf16_co_end:
    .balign 8
    .globl fp_gfx950_merge_state_f32_bf16_co_size
fp_gfx950_merge_state_f32_bf16_co_size:
    .quad .Lmerge_state_f32_bf16_co_end - fp_gfx950_merge_state_f32_bf16_co
    .balign 64
    .globl fp_gfx950_merge_state_f32_f32_co
fp_gfx950_merge_state_f32_f32_co:
    .incbin "build/gfx950/merge_state_f32_f32.co"
.Lmerge_state_f32_f32_co_end:
    .balign 8
    .globl fp_gfx950_merge_state_f32_f32_co_size
fp_gfx950_merge_state_f32_f32_co_size:
    .quad .Lmerge_state_f32_f32_co_end - fp_gfx950_merge_state_f32_f32_co
    .balign 64
    .globl fp_gfx950_varlen_check_co
fp_gfx950_varlen_check_co:
    .incbin "build/gfx950/varlen_check.co"
.Lvarlen_check_co_end:
    .balign 8
    .globl fp_gfx950_varlen_check_co_size
fp_gfx950_varlen_check_co_size:
    .quad .Lvarlen_check_co_end - fp_gfx950_varlen_check_co
    .globl fp_gfx950_quantize_paged_d32_co
fp_gfx950_quantize_paged_d32_co:
    .incbin "build/gfx950/quantize_paged_d32.co"
.Lquantize_paged_d32_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d32_co_size
fp_gfx950_quantize_paged_d32_co_size:
    .quad .Lquantize_paged_d32_co_end - fp_gfx950_quantize_paged_d32_co
    .balign 64
    .globl fp_gfx950_quantize_paged_d64_co
fp_gfx950_quantize_paged_d64_co:
    .incbin "build/gfx950/quantize_paged_d64.co"
.Lquantize_paged_d64_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d64_co_size
fp_gfx950_quantize_paged_d64_co_size:
    .quad .Lquantize_paged_d64_co_end - fp_gfx950_quantize_paged_d64_co
    .balign 64
    .globl fp_gfx950_quantize_paged_d96_co
fp_gfx950_quantize_paged_d96_co:
    .incbin "build/gfx950/quantize_paged_d96.co"
.Lquantize_paged_d96_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d96_co_size
fp_gfx950_quantize_paged_d96_co_size:
    .quad .Lquantize_paged_d96_co_end - fp_gfx950_quantize_paged_d96_co
    .balign 64
    .globl fp_gfx950_quantize_paged_d128_co
fp_gfx950_quantize_paged_d128_co:
    .incbin "build/gfx950/quantize_paged_d128.co"
.Lquantize_paged_d128_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d128_co_size
fp_gfx950_quantize_paged_d128_co_size:
    .quad .Lquantize_paged_d128_co_end - fp_gfx950_quantize_paged_d128_co
    .balign 64
    .globl fp_gfx950_quantize_paged_d160_co
fp_gfx950_quantize_paged_d160_co:
    .incbin "build/gfx950/quantize_paged_d160.co"
.Lquantize_paged_d160_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d160_co_size
fp_gfx950_quantize_paged_d160_co_size:
    .quad .Lquantize_paged_d160_co_end - fp_gfx950_quantize_paged_d160_co
    .balign 64
    .globl fp_gfx950_quantize_paged_d192_co
fp_gfx950_quantize_paged_d192_co:
    .incbin "build/gfx950/quantize_paged_d192.co"
.Lquantize_paged_d192_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d192_co_size
fp_gfx950_quantize_paged_d192_co_size:
    .quad .Lquantize_paged_d192_co_end - fp_gfx950_quantize_paged_d192_co
    .balign 64
    .globl fp_gfx950_quantize_paged_d224_co
fp_gfx950_quantize_paged_d224_co:
    .incbin "build/gfx950/quantize_paged_d224.co"
.Lquantize_paged_d224_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d224_co_size
fp_gfx950_quantize_paged_d224_co_size:
    .quad .Lquantize_paged_d224_co_end - fp_gfx950_quantize_paged_d224_co
    .balign 64
    .globl fp_gfx950_quantize_paged_d256_co
fp_gfx950_quantize_paged_d256_co:
    .incbin "build/gfx950/quantize_paged_d256.co"
.Lquantize_paged_d256_co_end:
    .balign 8
    .globl fp_gfx950_quantize_paged_d256_co_size
fp_gfx950_quantize_paged_d256_co_size:
    .quad .Lquantize_paged_d256_co_end - fp_gfx950_quantize_paged_d256_co
    .section .note.GNU-stack,"",@progbits
