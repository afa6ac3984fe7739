/* tests/test_gfx950_quantize_launch.py's probe: one call of the gfx950 library's flashprefill_quantize in its packed
 * form (argv[1] "packed") or of flashprefill_quantize_paged ("paged"), with stand-in addresses, on tests/hip_stub.c
 * as libamdhip64.so; prints the status, the last error, and the grid and kernel arguments of the last launch the stub
 * recorded (hex), one per line. The params are built here in C, from the header, so that every field is the caller's.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "flashprefill.h"

enum { BATCH = 3, HEADS = 4, DIM = 96, TOTAL = 700, MAX_SEQLEN = 300, BLOCK_TOKENS = 64 };
enum { TOKENS = 37, NUM_PAGES = 50, PAGE_SIZE = 16 };

static const void *address(int i) { return (const void *)(uintptr_t)((uint64_t)(0x7F0 + i) << 36); }

static flashprefill_status packed(void)
{
    flashprefill_quantize_params p = flashprefill_quantize_params_init();
    p.x = address(0), p.codes = (void *)address(1), p.exponents = (int8_t *)address(2);
    p.signs = (const float *)address(3), p.subtract = (const float *)address(4);
    p.cu_seqlens = (const int32_t *)address(5);
    p.x_stride_seq = 2 * HEADS * DIM, p.x_stride_head = DIM, p.x_stride_dim = 1; /* x: a view of every other row */
    p.codes_stride_seq = HEADS * DIM, p.codes_stride_head = DIM, p.codes_stride_dim = 1;
    p.batch = BATCH, p.heads = HEADS, p.dim = DIM, p.block_tokens = BLOCK_TOKENS;
    p.x_dtype = FLASHPREFILL_DTYPE_BF16, p.code_max = 1.125f;
    p.total = TOTAL, p.max_seqlen = MAX_SEQLEN;
    return flashprefill_quantize(&p, NULL);
}

static flashprefill_status paged(void)
{
    flashprefill_quantize_paged_params p = flashprefill_quantize_paged_params_init();
    p.x = address(0), p.slot_mapping = (const int32_t *)address(1), p.codes = (void *)address(2);
    p.exponents = (int8_t *)address(3), p.signs = (const float *)address(4);
    p.x_stride_token = 3 * HEADS * DIM, p.x_stride_head = DIM, p.x_stride_dim = 1; /* k of a packed qkv */
    p.codes_stride_page = PAGE_SIZE * HEADS * DIM, p.codes_stride_row = HEADS * DIM, p.codes_stride_head = DIM;
    p.codes_stride_dim = 1;
    p.tokens = TOKENS, p.heads_kv = HEADS, p.dim = DIM, p.num_pages = NUM_PAGES, p.page_size = PAGE_SIZE;
    p.x_dtype = FLASHPREFILL_DTYPE_FP32;
    return flashprefill_quantize_paged(&p, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const flashprefill_status status = strcmp(argv[1], "paged") == 0 ? paged() : packed();
    printf("%d\n%s\n", (int)status, flashprefill_last_error());
    void *hip = dlopen("libamdhip64.so", RTLD_NOW);
    unsigned (*grid)(int) = hip ? (unsigned (*)(int))dlsym(hip, "stub_last_grid") : NULL;
    size_t (*kernarg)(void *) = hip ? (size_t (*)(void *))dlsym(hip, "stub_last_kernarg") : NULL;
    int (*launches)(void) = hip ? (int (*)(void))dlsym(hip, "stub_launch_count") : NULL;
    if (grid == NULL || kernarg == NULL || launches == NULL)
        return 3;
    unsigned char bytes[1024];
    const size_t n = kernarg(bytes);
    printf("%u %u %u %d\n", grid(0), grid(1), grid(2), launches());
    for (size_t i = 0; i < n; ++i)
        printf("%02x", bytes[i]);
    printf("\n");
    return 0;
}
