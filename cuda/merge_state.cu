// flashprefill_merge_state: (out_a, lse_a) and (out_b, lse_b), attention of the same queries over disjoint keys,
// combined into the attention over both (the formula and the non-finite rows: include/flashprefill.h).
//
// Memory-bound, one pass: a CTA takes a run of query rows of one (batch, head). Its first threads merge the rows'
// lse into weights (shared memory), then every thread streams 16-byte pieces of 8 elements: out_a's and out_b's
// piece in, out's piece out, in float32. Each element of out is written by the thread that read it, and each lse by
// the thread that read lse_a and lse_b, so in place (out = out_a, lse = lse_a) is safe.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend.h"
#include "device_check.h"
#include "merge_state.h"

namespace fp {
namespace {

constexpr int kThreads = 256;
constexpr int kPieceElems = 8;  // 16 bytes of bf16, two 16-byte loads of float32
constexpr int kMaxGridYz = 65535;

struct MergeStateArgs {
    const void *out_a, *out_b;
    void *out;
    const float *lse_a, *lse_b;
    float *lse;  // nullptr: not written
    int64_t a_stride_batch, a_stride_seq, a_stride_head;
    int64_t b_stride_batch, b_stride_seq, b_stride_head;
    int64_t out_stride_batch, out_stride_seq, out_stride_head;
    int32_t seqlen_q, heads_q, pieces_per_row, rows_per_cta;
};

struct Piece {
    float x[kPieceElems];
};

__device__ __forceinline__ Piece load_piece(const __nv_bfloat16 *p)
{
    const uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    Piece piece;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // a bf16 is the upper half of its float32; the first of a pair the low half
        piece.x[2 * i] = __uint_as_float(words[i] << 16);
        piece.x[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
    }
    return piece;
}

__device__ __forceinline__ Piece load_piece(const float *p)
{
    const float4 lo = *reinterpret_cast<const float4 *>(p), hi = *reinterpret_cast<const float4 *>(p + 4);
    return Piece{{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}};
}

__device__ __forceinline__ void store_piece(__nv_bfloat16 *p, const Piece &piece)
{
    uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // round to nearest even; NaN stays NaN
        const __nv_bfloat162 pair = __floats2bfloat162_rn(piece.x[2 * i], piece.x[2 * i + 1]);
        words[i] = *reinterpret_cast<const uint32_t *>(&pair);
    }
    *reinterpret_cast<uint4 *>(p) = make_uint4(words[0], words[1], words[2], words[3]);
}

__device__ __forceinline__ void store_piece(float *p, const Piece &piece)
{
    *reinterpret_cast<float4 *>(p) = make_float4(piece.x[0], piece.x[1], piece.x[2], piece.x[3]);
    *reinterpret_cast<float4 *>(p + 4) = make_float4(piece.x[4], piece.x[5], piece.x[6], piece.x[7]);
}

// lse = log(exp(lse_a) + exp(lse_b)) and the weights exp(lse_x - lse). Both -inf: no key on either side, weights 0.
// A NaN lands in `lo` or `hi` (a comparison with NaN is false) and spreads through every result; +inf makes lse
// NaN too (attention writes NaN, never +inf, for a row whose score is +inf).
__device__ __forceinline__ float2 merge_weights(float lse_a, float lse_b, float *lse)
{
    if (lse_a == -INFINITY && lse_b == -INFINITY) {
        *lse = -INFINITY;
        return make_float2(0.0f, 0.0f);
    }
    const float hi = lse_a > lse_b ? lse_a : lse_b, lo = lse_a > lse_b ? lse_b : lse_a;
    *lse = hi == INFINITY ? NAN : hi + log1pf(expf(lo - hi));  // lo = -inf: exactly hi, and its weight exactly 1
    return make_float2(expf(lse_a - *lse), expf(lse_b - *lse));
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads) merge_state_kernel(const MergeStateArgs a)
{
    __shared__ float2 weights[kThreads];  // (w_a, w_b) of each row of the CTA
    const int head = blockIdx.y, batch = blockIdx.z;
    const int row0 = blockIdx.x * a.rows_per_cta;
    const int rows = min(a.rows_per_cta, a.seqlen_q - row0);
    if (threadIdx.x < rows) {
        const int64_t at = (static_cast<int64_t>(batch) * a.heads_q + head) * a.seqlen_q + row0 + threadIdx.x;
        float lse;
        weights[threadIdx.x] = merge_weights(a.lse_a[at], a.lse_b[at], &lse);
        if (a.lse != nullptr)
            a.lse[at] = lse;
    }
    __syncthreads();
    const In *out_a = static_cast<const In *>(a.out_a) + batch * a.a_stride_batch + head * a.a_stride_head;
    const In *out_b = static_cast<const In *>(a.out_b) + batch * a.b_stride_batch + head * a.b_stride_head;
    Out *out = static_cast<Out *>(a.out) + batch * a.out_stride_batch + head * a.out_stride_head;
    for (int item = threadIdx.x; item < rows * a.pieces_per_row; item += kThreads) {
        const int r = item / a.pieces_per_row, elem = (item - r * a.pieces_per_row) * kPieceElems;
        const int64_t row = row0 + r;
        const Piece x_a = load_piece(out_a + row * a.a_stride_seq + elem);
        const Piece x_b = load_piece(out_b + row * a.b_stride_seq + elem);
        const float2 w = weights[r];
        Piece y;
#pragma unroll
        for (int i = 0; i < kPieceElems; ++i)  // out = w_a out_a + w_b out_b
            y.x[i] = fmaf(w.x, x_a.x[i], w.y * x_b.x[i]);
        store_piece(out + row * a.out_stride_seq + elem, y);
    }
}

using MergeStateKernel = void (*)(MergeStateArgs);

// [in float32][out float32]
constexpr MergeStateKernel kKernels[2][2] = {
    {merge_state_kernel<__nv_bfloat16, __nv_bfloat16>, merge_state_kernel<__nv_bfloat16, float>},
    {merge_state_kernel<float, __nv_bfloat16>, merge_state_kernel<float, float>},
};

}  // namespace
}  // namespace fp

extern "C" flashprefill_status fp_backend_merge_state(const flashprefill_merge_state_params *p, void *stream)
{
    flashprefill_status s;
    if ((s = fp_check_merge_state_device(p)))
        return s;
    static_assert(fp::kPieceElems == 8, "fp_validate_merge_state admits dim_v a multiple of 8");
    if (p->heads_q > fp::kMaxGridYz || p->batch > fp::kMaxGridYz)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "heads_q = %d or batch = %d exceeds merge_state's grid limit "
                       "of %d", p->heads_q, p->batch, fp::kMaxGridYz);
    fp::MergeStateArgs a{};
    a.out_a = p->out_a, a.out_b = p->out_b, a.out = p->out;
    a.lse_a = p->lse_a, a.lse_b = p->lse_b, a.lse = p->lse;
    a.a_stride_batch = p->out_a_stride_batch, a.a_stride_seq = p->out_a_stride_seq;
    a.a_stride_head = p->out_a_stride_head;
    a.b_stride_batch = p->out_b_stride_batch, a.b_stride_seq = p->out_b_stride_seq;
    a.b_stride_head = p->out_b_stride_head;
    a.out_stride_batch = p->out_stride_batch, a.out_stride_seq = p->out_stride_seq;
    a.out_stride_head = p->out_stride_head;
    a.seqlen_q = p->seqlen_q, a.heads_q = p->heads_q;
    a.pieces_per_row = p->dim_v / fp::kPieceElems;
    a.rows_per_cta = a.pieces_per_row >= fp::kThreads ? 1 : fp::kThreads / a.pieces_per_row;
    const dim3 grid(static_cast<unsigned>((p->seqlen_q + a.rows_per_cta - 1) / a.rows_per_cta), p->heads_q, p->batch);
    const fp::MergeStateKernel kernel =
        fp::kKernels[p->in_dtype == FLASHPREFILL_DTYPE_FP32][p->out_dtype == FLASHPREFILL_DTYPE_FP32];
    kernel<<<grid, fp::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "merge_state launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
