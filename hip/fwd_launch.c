/* The gfx950 backend's kernel table (src/backend.h) and launcher: params -> fp_gfx950_fwd_kernarg -> one
 * hipModuleLaunchKernel. Pointers are not checked against the device here (the HIP pointer-attribute API has
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
    return fp_hip_load(&api, &fn);
}

static flashprefill_status launch_fwd_bf16_hd128(const flashprefill_params *p, void *stream)
{
    const fp_hip_api *api;
    hipFunction_t fn;
    flashprefill_status s = fp_hip_load(&api, &fn);
    if (s)
        return s;
    enum { ELEM = 2 };
    const int64_t strides[8] = {p->q_stride_seq, p->q_stride_head, p->k_stride_seq, p->k_stride_head,
                                p->v_stride_seq, p->v_stride_head, p->out_stride_seq, p->out_stride_head};
    for (int i = 0; i < 8; ++i)
        if (!fits_u32(strides[i] * ELEM))
            return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                           "the gfx950 kernel takes sequence and head strides below 4 GiB");
    fp_gfx950_fwd_kernarg a = {
        .q = (uint64_t)(uintptr_t)p->q, .k = (uint64_t)(uintptr_t)p->k, .v = (uint64_t)(uintptr_t)p->v,
        .out = (uint64_t)(uintptr_t)p->out, .lse = (uint64_t)(uintptr_t)p->lse,
        .q_stride_seq = (uint32_t)(p->q_stride_seq * ELEM), .q_stride_head = (uint32_t)(p->q_stride_head * ELEM),
        .q_stride_batch = (uint64_t)(p->q_stride_batch * ELEM),
        .k_stride_seq = (uint32_t)(p->k_stride_seq * ELEM), .k_stride_head = (uint32_t)(p->k_stride_head * ELEM),
        .k_stride_batch = (uint64_t)(p->k_stride_batch * ELEM),
        .v_stride_seq = (uint32_t)(p->v_stride_seq * ELEM), .v_stride_head = (uint32_t)(p->v_stride_head * ELEM),
        .v_stride_batch = (uint64_t)(p->v_stride_batch * ELEM),
        .out_stride_seq = (uint32_t)(p->out_stride_seq * ELEM),
        .out_stride_head = (uint32_t)(p->out_stride_head * ELEM),
        .out_stride_batch = (uint64_t)(p->out_stride_batch * ELEM),
        .seqlen_q = p->seqlen_q, .seqlen_k = p->seqlen_k, .heads_q = p->heads_q,
        .heads_per_kv = p->heads_q / p->heads_kv, .causal = p->causal, .causal_offset = p->seqlen_k - p->seqlen_q,
        .softmax_scale_log2 = p->softmax_scale * (float)M_LOG2E,
    };
    size_t size = sizeof a;
    void *extra[] = {FP_HIP_LAUNCH_PARAM_BUFFER_POINTER, &a, FP_HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     FP_HIP_LAUNCH_PARAM_END};
    const unsigned blocks = (unsigned)((p->seqlen_q + QUERIES_PER_WORKGROUP - 1) / QUERIES_PER_WORKGROUP);
    const hipError_t err = api->ModuleLaunchKernel(fn, blocks, (unsigned)p->heads_q, (unsigned)p->batch,
                                                   LANES_PER_WORKGROUP, 1, 1, 0, (hipStream_t)stream, NULL, extra);
    if (err != 0)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "hipModuleLaunchKernel(fwd_bf16_hd128): %s",
                       api->GetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}

const fp_kernel_entry fp_backend_kernels[] = {
    {"gfx950_fwd_bf16_hd128", FLASHPREFILL_DTYPE_BF16, FLASHPREFILL_DTYPE_BF16, 128, 128,
     FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE), 0, launch_fwd_bf16_hd128},
};
const int fp_backend_kernel_count = sizeof fp_backend_kernels / sizeof fp_backend_kernels[0];
