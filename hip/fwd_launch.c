/* The gfx950 backend's kernel table (src/backend.h) and launcher: params -> fp_gfx950_fwd_kernarg -> one
 * hipModuleLaunchKernel of fwd_bf16_hd128 or fwd_fp8_hd128. Pointers are not checked against the device here (the HIP pointer-attribute API has
 * no stable C layout to dlopen against); the runtime reports bad addresses at the launch or sync.
 */
#include <limits.h>
#include <math.h>

#include "backend.h"
#include "fwd_kernarg.h"
#include "loader.h"

enum { QUERIES_PER_WORKGROUP = 32, LANES_PER_WORKGROUP = 64 };

static int fits_u32(int64_t bytes) { return bytes >= 0 && bytes <= (int64_t)UINT32_MAX; }

flashprefill_status fp_backend_check_device(const flashprefill_params *p)
{
    const fp_hip_api *api;
    hipFunction_t fn;
    (void)p;
    return fp_hip_load(&api, FP_GFX950_FWD_BF16_HD128, &fn);
}

/* A descale as fwd_fp8_hd128 reads it: factors[batch * stride_batch + head_kv * stride_head], or none. */
static void set_descale(const flashprefill_descale *d, int32_t heads_kv, uint64_t *factors, int32_t *stride_batch,
                        int32_t *stride_head)
{
    const int per_head = d->kind == FLASHPREFILL_DESCALE_PER_HEAD;
    *factors = d->kind == FLASHPREFILL_DESCALE_NONE ? 0 : (uint64_t)(uintptr_t)d->factors;
    *stride_batch = per_head ? heads_kv : 0;
    *stride_head = per_head ? 1 : 0;
}

static flashprefill_status launch_fwd(const flashprefill_params *p, void *stream, fp_gfx950_kernel kernel)
{
    const fp_hip_api *api;
    hipFunction_t fn;
    flashprefill_status s = fp_hip_load(&api, kernel, &fn);
    if (s)
        return s;
    const int64_t elem = p->in_dtype == FLASHPREFILL_DTYPE_BF16 ? 2 : 1, out_elem = 2;
    const int64_t strides[8] = {p->q_stride_seq * elem, p->q_stride_head * elem, p->k_stride_seq * elem,
                                p->k_stride_head * elem, p->v_stride_seq * elem, p->v_stride_head * elem,
                                p->out_stride_seq * out_elem, p->out_stride_head * out_elem};
    for (int i = 0; i < 8; ++i)
        if (!fits_u32(strides[i]))
            return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                           "the gfx950 kernels take sequence and head strides below 4 GiB");
    fp_gfx950_fwd_kernarg a = {
        .q = (uint64_t)(uintptr_t)p->q, .k = (uint64_t)(uintptr_t)p->k, .v = (uint64_t)(uintptr_t)p->v,
        .out = (uint64_t)(uintptr_t)p->out, .lse = (uint64_t)(uintptr_t)p->lse,
        .q_stride_seq = (uint32_t)strides[0], .q_stride_head = (uint32_t)strides[1],
        .q_stride_batch = (uint64_t)(p->q_stride_batch * elem),
        .k_stride_seq = (uint32_t)strides[2], .k_stride_head = (uint32_t)strides[3],
        .k_stride_batch = (uint64_t)(p->k_stride_batch * elem),
        .v_stride_seq = (uint32_t)strides[4], .v_stride_head = (uint32_t)strides[5],
        .v_stride_batch = (uint64_t)(p->v_stride_batch * elem),
        .out_stride_seq = (uint32_t)strides[6], .out_stride_head = (uint32_t)strides[7],
        .out_stride_batch = (uint64_t)(p->out_stride_batch * out_elem),
        .seqlen_q = p->seqlen_q, .seqlen_k = p->seqlen_k, .heads_q = p->heads_q,
        .heads_per_kv = p->heads_q / p->heads_kv, .causal = p->causal, .causal_offset = p->seqlen_k - p->seqlen_q,
        .softmax_scale_log2 = p->softmax_scale * (float)M_LOG2E,
    };
    set_descale(&p->q_descale, p->heads_kv, &a.q_descale, &a.q_descale_stride_batch, &a.q_descale_stride_head);
    set_descale(&p->k_descale, p->heads_kv, &a.k_descale, &a.k_descale_stride_batch, &a.k_descale_stride_head);
    set_descale(&p->v_descale, p->heads_kv, &a.v_descale, &a.v_descale_stride_batch, &a.v_descale_stride_head);
    size_t size = sizeof a;
    void *extra[] = {FP_HIP_LAUNCH_PARAM_BUFFER_POINTER, &a, FP_HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     FP_HIP_LAUNCH_PARAM_END};
    const unsigned blocks = (unsigned)((p->seqlen_q + QUERIES_PER_WORKGROUP - 1) / QUERIES_PER_WORKGROUP);
    const hipError_t err = api->ModuleLaunchKernel(fn, blocks, (unsigned)p->heads_q, (unsigned)p->batch,
                                                   LANES_PER_WORKGROUP, 1, 1, 0, (hipStream_t)stream, NULL, extra);
    if (err != 0)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "hipModuleLaunchKernel: %s", api->GetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}

static flashprefill_status launch_fwd_bf16_hd128(const flashprefill_params *p, void *stream)
{
    return launch_fwd(p, stream, FP_GFX950_FWD_BF16_HD128);
}

static flashprefill_status launch_fwd_fp8_hd128(const flashprefill_params *p, void *stream)
{
    return launch_fwd(p, stream, FP_GFX950_FWD_FP8_HD128);
}

const fp_kernel_entry fp_backend_kernels[] = {
    {"gfx950_fwd_bf16_hd128", FLASHPREFILL_DTYPE_BF16, FLASHPREFILL_DTYPE_BF16, 128, 128,
     FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE), 0, launch_fwd_bf16_hd128},
    {"gfx950_fwd_fp8_hd128", FLASHPREFILL_DTYPE_FP8_E4M3, FLASHPREFILL_DTYPE_BF16, 128, 128,
     FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE) | FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_TENSOR) |
         FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_HEAD),
     0, launch_fwd_fp8_hd128},
};
const int fp_backend_kernel_count = sizeof fp_backend_kernels / sizeof fp_backend_kernels[0];
