/* The wgmma-loop ceiling (cuda/ceiling/wgmma_loop.cuh): attention's two matrix products per KV tile with the forward
 * kernels' tiles, warp roles, TMA loads and wgmma, P being S rounded to the input type instead of a softmax. Built by
 * `make ceiling` into build/libflashprefill_ceiling.so; a measuring tool (tools/wgmma_loop.py), not the flashprefill
 * ABI.
 */
#ifndef FLASHPREFILL_CEILING_WGMMA_LOOP_H
#define FLASHPREFILL_CEILING_WGMMA_LOOP_H

#include <stdint.h>

#include "flashprefill.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The loop's kernels, by name (e.g. "fp8_kv192": the forward kernel hopper_fwd_fp8_hd128_kv192's tiles and wgmma);
   index < fp_wgmma_loop_kernel_count(), else NULL. */
int fp_wgmma_loop_kernel_count(void);
const char *fp_wgmma_loop_kernel_name(int index);

/* Enqueues kernel `kernel` on `stream` (a cudaStream_t; NULL: the default stream), dim 128, seqlen_q = seqlen_k =
   seqlen, every tensor contiguous:
     q    (batch, seqlen, heads_q, 128), bf16 or e4m3 as the kernel's dtype
     k    (batch, seqlen, heads_kv, 128)
     v    bf16 (batch, seqlen, heads_kv, 128); fp8 in the prepared layout (batch, heads_kv, 128, positions), positions
          seqlen rounded up to 16 (flashprefill_prepare_v)
     out  bf16 (batch, seqlen, heads_q, 128), stored as the forward kernels store theirs: the sum over the KV tiles a
          query tile visits (all; causal: those up to the diagonal, the diagonal's whole) of round(Q K^T) V, round
          to the input type (e4m3 saturating at 448)
     row_sums  NULL, or float32 (batch, heads_q, seqlen): fp8 kernels write each row's sum of round(Q K^T) over the
          same tiles there (P.V's columns of ones, as the forward kernels compute it); bf16 kernels, whose softmax sums
          P without the tensor cores, leave it untouched
   Returns FLASHPREFILL_SUCCESS, INVALID_ARGUMENT (an unknown kernel, a shape out of range) or DEVICE, with
   fp_wgmma_loop_last_error() saying why. */
flashprefill_status fp_wgmma_loop_run(const char *kernel, const void *q, const void *k, const void *v, void *out,
                                      float *row_sums, int32_t batch, int32_t seqlen, int32_t heads_q,
                                      int32_t heads_kv, int32_t causal, void *stream);

/* This thread's last error ("" after a success). */
const char *fp_wgmma_loop_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_CEILING_WGMMA_LOOP_H */
