/* tests/test_gfx950_varlen_launch.py's probe: one varlen call (argv[1] "varlen", or "paged" with pages of argv[2]
 * tokens, and with argv[3] fp8 inputs with per-block descales of argv[3] tokens, or "bf16q": a bf16 q, rotated, against
 * fp8 k and v with cu_seqlens_k) of the gfx950 library's
 * flashprefill_forward with stand-in addresses, on tests/hip_stub.c as libamdhip64.so;
 * prints the status, the last error, the grid and kernel arguments (hex) of the last launch the stub recorded (the
 * forward kernel) and the kernel arguments of the one before it (the check of the arrays), one per line. The
 * params are built here in C, from the header, so that every 0.10.0 field is the caller's.
 */
#include <stdlib.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "flashprefill.h"

enum { HEADS_Q = 4, HEADS_KV = 2, DIM = 128, TOTAL_Q = 300, TOTAL_K = 400, MAX_Q = 260, MAX_K = 300 };

static const void *address(int i) { return (const void *)(uintptr_t)((uint64_t)(0x7F0 + i) << 36); }

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    flashprefill_params p = flashprefill_params_init();
    p.q = address(0), p.k = address(1), p.v = address(2), p.out = (void *)address(3), p.lse = (float *)address(4);
    p.q_stride_seq = p.out_stride_seq = HEADS_Q * DIM, p.k_stride_seq = p.v_stride_seq = HEADS_KV * DIM;
    p.q_stride_head = p.k_stride_head = p.v_stride_head = p.out_stride_head = DIM;
    p.q_stride_dim = p.k_stride_dim = p.v_stride_dim = p.out_stride_dim = 1;
    p.batch = 1, p.seqlen_q = MAX_Q, p.seqlen_k = MAX_K, p.heads_q = HEADS_Q, p.heads_kv = HEADS_KV;
    p.dim_qk = p.dim_v = DIM;
    p.in_dtype = p.out_dtype = FLASHPREFILL_DTYPE_BF16;
    p.causal = 1, p.softmax_scale = 0.125f;
    p.cu_seqlens_q = (const int32_t *)address(5), p.seqused_k = (const int32_t *)address(7);
    p.total_q = TOTAL_Q;
    p.workspace = (void *)address(8), p.workspace_bytes = 1 << 20;
    if (argc == 4) {
        p.in_dtype = FLASHPREFILL_DTYPE_FP8_E4M3;
        const flashprefill_descale blocks = {FLASHPREFILL_DESCALE_PER_BLOCK, atoi(argv[3]), NULL,
                                             (const int8_t *)address(10)};
        p.q_descale = p.k_descale = p.v_descale = blocks;
    }
    if (strcmp(argv[1], "bf16q") == 0) {
        p.in_dtype = FLASHPREFILL_DTYPE_FP8_E4M3, p.q_dtype = FLASHPREFILL_DTYPE_BF16;
        p.q_rotation_signs = (const float *)address(11);
    }
    if (strcmp(argv[1], "paged") == 0 && argc >= 3) {
        p.page_size = atoi(argv[2]);
        p.block_table = (const int32_t *)address(9), p.block_table_stride = MAX_K / p.page_size + 1;
        p.num_pages = 64;
        p.k_stride_batch = p.page_size * HEADS_KV * DIM;     /* between pages */
        p.v_stride_batch = 2 * p.page_size * HEADS_KV * DIM; /* v's pages apart from k's, to tell them apart */
    } else {
        p.cu_seqlens_k = (const int32_t *)address(6), p.total_k = TOTAL_K;
    }
    const flashprefill_status status = flashprefill_forward(&p, NULL);
    printf("%d\n%s\n", (int)status, flashprefill_last_error());
    void *hip = dlopen("libamdhip64.so", RTLD_NOW);
    unsigned (*grid)(int) = hip ? (unsigned (*)(int))dlsym(hip, "stub_last_grid") : NULL;
    size_t (*kernarg)(int, void *) = hip ? (size_t (*)(int, void *))dlsym(hip, "stub_kernarg") : NULL;
    if (grid == NULL || kernarg == NULL)
        return 3;
    printf("%u %u %u\n", grid(0), grid(1), grid(2));
    for (int back = 0; back < 2; ++back) {
        unsigned char bytes[1024];
        const size_t n = kernarg(back, bytes);
        for (size_t i = 0; i < n; ++i)
            printf("%02x", bytes[i]);
        printf("\n");
    }
    return 0;
}
