// The wgmma loop's launcher and C entry points (wgmma_loop.h): one kernel per forward-kernel configuration it mirrors.
#include "ceiling/wgmma_loop.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "ceiling/p_from_s.cuh"
#include "ceiling/wgmma_loop.cuh"
#include "error.h"
#include "fwd/work_order.cuh"
#include "launch_common.h"
#include "tensor_map.cuh"

namespace fp {
namespace {

constexpr int kDim = 128;  // the forward kernels' hd128 (dim_qk = dim_v)

struct Shape {
    int32_t batch, seqlen, heads_q, heads_kv, causal;
};

template <class Config>
flashprefill_status encode_maps(FwdArgs &a, const void *q, const void *k, const void *v, const Shape &s)
{
    constexpr int kBytes = Config::Input::kBytes;
    const CUtensorMapDataType type = Config::kIsFp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const int64_t seq = s.seqlen, hq = s.heads_q, hkv = s.heads_kv;
    flashprefill_status status;
    if ((status = encode_tensor_map(&a.tm_q, "q", q, type, kBytes, {kDim, seq, hq, s.batch},
                                    {1, hq * kDim, kDim, seq * hq * kDim}, Config::kAtomColsQk, Config::kBlockM,
                                    Config::kSwizzleQk)) ||
        (status = encode_tensor_map(&a.tm_k, "k", k, type, kBytes, {kDim, seq, hkv, s.batch},
                                    {1, hkv * kDim, kDim, seq * hkv * kDim}, Config::kAtomColsQk, Config::kBlockN,
                                    Config::kSwizzleQk)))
        return status;
    if constexpr (!Config::kVPrepared) {
        return encode_tensor_map(&a.tm_v, "v", v, type, kBytes, {kDim, seq, hkv, s.batch},
                                 {1, hkv * kDim, kDim, seq * hkv * kDim}, Config::kAtomColsV, Config::kBlockN,
                                 Config::kSwizzleV);
    } else {  // as fwd_launch.cu's encode_v_maps for a prepared v
        const int64_t positions = fp_prepared_positions(seq);
        const int64_t extent[4] = {positions, kDim, hkv, s.batch};
        const int64_t stride[4] = {1, positions, kDim * positions, hkv * kDim * positions};
        status = encode_tensor_map(&a.tm_v, "v", v, type, kBytes, extent, stride, 128, kDim, 128);
        if (status == FLASHPREFILL_SUCCESS && VtLayout<Config::kBlockN>::kTailBytes > 0)
            status = encode_tensor_map(&a.tm_v_tail, "v", v, type, kBytes, extent, stride, 64, kDim, 64);
        return status;
    }
}

template <class Config, class PFromS>
flashprefill_status launch(const void *q, const void *k, const void *v, void *out, float *row_sums,
                           const Shape &s, cudaStream_t stream)
{
    static_assert(fits_shared_memory<Config>, "tiles and stages exceed the shared memory of sm_90");
    static_assert(Config::kHeadDimQk == kDim && Config::kHeadDimV == kDim, "hd128 kernels");
    WgmmaLoopArgs args{};
    FwdArgs &a = args.attention;
    if (flashprefill_status status = encode_maps<Config>(a, q, k, v, s))
        return status;
    a.out = static_cast<__nv_bfloat16 *>(out);
    a.out_stride_head = kDim;
    a.out_stride_seq = static_cast<int64_t>(s.heads_q) * kDim;
    a.out_stride_batch = a.out_stride_seq * s.seqlen;
    args.row_sums = row_sums;
    a.q_descale = a.k_descale = a.v_descale = DescaleArg{nullptr, nullptr, 0, 0, 1};  // descale 1
    a.seqlen_q = a.seqlen_k = s.seqlen;
    a.heads_q = s.heads_q;
    a.heads_per_kv = s.heads_q / s.heads_kv;
    a.batch = s.batch;
    a.m_blocks = (s.seqlen + Config::kBlockM - 1) / Config::kBlockM;
    a.items = a.m_blocks * s.heads_q * s.batch;
    a.causal = s.causal;
    a.softmax_scale_log2 = 1.0f;

    const auto kernel = wgmma_loop_kernel<Config, PFromS>;
    const int smem_bytes = static_cast<int>(sizeof(FwdSharedStorage<Config>)) + 1024;  // + alignment slack
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    int device = 0, sms = 0, l2_bytes = 0;
    if (err == cudaSuccess && (err = cudaGetDevice(&device)) == cudaSuccess &&
        (err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) == cudaSuccess)
        err = cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device);
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "setting up the wgmma loop: %s", cudaGetErrorString(err));
    const int grid = a.items < sms ? a.items : sms;  // persistent, one CTA per SM (fwd_launch.cu)
    a.section_heads = section_heads_for(a.m_blocks, s.heads_q, s.heads_kv, s.batch,
                                        static_cast<int64_t>(s.seqlen) * 2 * kDim * Config::Input::kBytes, l2_bytes,
                                        grid);
    kernel<<<grid, Config::kThreads, smem_bytes, stream>>>(args);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "wgmma loop launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}

using LaunchFn = flashprefill_status (*)(const void *, const void *, const void *, void *, float *, const Shape &,
                                         cudaStream_t);
struct Entry {
    const char *name;
    LaunchFn launch;
};

constexpr flashprefill_dtype kBf16 = FLASHPREFILL_DTYPE_BF16;
constexpr flashprefill_dtype kFp8 = FLASHPREFILL_DTYPE_FP8_E4M3;
constexpr flashprefill_probabilities kDefaultP = FLASHPREFILL_PROBABILITIES_DEFAULT;
constexpr flashprefill_scores kF32S = FLASHPREFILL_SCORES_FP32;

// Each forward kernel's configuration as fwd_launch.cu lists it; fp8 with a prepared v (no transposing warps).
constexpr Entry kKernels[] = {
    {"fp8_kv192", launch<FwdConfig<kFp8, kDim, kDim, kDefaultP, 192, kF32S, true>, E4m3PFromS>},
    {"fp8_kv128", launch<FwdConfig<kFp8, kDim, kDim, kDefaultP, 128, kF32S, true>, E4m3PFromS>},
    {"bf16_kv128", launch<FwdConfig<kBf16, kDim, kDim>, Bf16PFromS>},
};
constexpr int kKernelCount = sizeof(kKernels) / sizeof(kKernels[0]);

// The shape's limits: the forward kernels' item count (fwd_launch.cu's check_items) and a whole KV group.
flashprefill_status check_shape(const Shape &s)
{
    if (s.batch < 1 || s.seqlen < 1 || s.heads_kv < 1 || s.heads_q < s.heads_kv || s.heads_q % s.heads_kv != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "batch %d, seqlen %d, heads_q %d, heads_kv %d: each at least 1, heads_q a multiple of heads_kv",
                       s.batch, s.seqlen, s.heads_q, s.heads_kv);
    const int64_t items = (static_cast<int64_t>(s.seqlen) + 127) / 128 * s.heads_q * s.batch;
    if (items > (int64_t{1} << 31) - (1 << 16))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%lld work items exceed 2^31 - 65536",
                       static_cast<long long>(items));
    return FLASHPREFILL_SUCCESS;
}

}  // namespace
}  // namespace fp

extern "C" int fp_wgmma_loop_kernel_count(void)
{
    return fp::kKernelCount;
}

extern "C" const char *fp_wgmma_loop_kernel_name(int index)
{
    return index >= 0 && index < fp::kKernelCount ? fp::kKernels[index].name : nullptr;
}

extern "C" flashprefill_status fp_wgmma_loop_run(const char *kernel, const void *q, const void *k, const void *v,
                                                 void *out, float *row_sums, int32_t batch, int32_t seqlen,
                                                 int32_t heads_q, int32_t heads_kv, int32_t causal, void *stream)
{
    fp_clear_error();
    const fp::Shape shape{batch, seqlen, heads_q, heads_kv, causal != 0};
    if (flashprefill_status status = fp::check_shape(shape))
        return status;
    for (const fp::Entry &e : fp::kKernels)
        if (kernel != nullptr && std::strcmp(kernel, e.name) == 0)
            return e.launch(q, k, v, out, row_sums, shape, static_cast<cudaStream_t>(stream));
    return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "no wgmma loop kernel named \"%s\"",
                   kernel != nullptr ? kernel : "(null)");
}

extern "C" const char *fp_wgmma_loop_last_error(void)
{
    return fp_last_error();
}
