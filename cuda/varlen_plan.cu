// The varlen plan kernel: checks a varlen or paged call's device arrays and lists its (sequence, query tile) work
// items in the workspace, costliest first (cuda/fwd/varlen.cuh), for the forward kernel launched after it.
//
// One CTA: the list has a few entries per sequence (64k tokens make about 600), and a CTA's shared memory holds the
// counting sort's buckets, one per KV tile count. On invalid arrays it lists nothing and writes NaN to every
// element of out and lse, so that a caller who does not read the workspace back still sees the failure.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "fwd/varlen.cuh"
#include "ptx.cuh"
#include "varlen_plan.cuh"

namespace fp {
namespace {

constexpr int kPlanThreads = 1024;

struct PlanArgs {
    const int32_t *cu_seqlens_q, *cu_seqlens_k, *seqused_k, *block_table;
    int32_t batch, total_q, total_k, max_seqlen_q, max_seqlen_k;
    int32_t block_table_stride, page_size, num_pages;
    int32_t causal, levels;
    VarlenHeader *header;
    VarlenTile *tiles;
    __nv_bfloat16 *out;
    int64_t out_stride_seq, out_stride_head;
    float *lse;
    int32_t heads_q, dim_v;
};

// A sequence's lengths, or the first fault found in its arrays (error != kVarlenOk, value the offending number).
struct SeqCheck {
    int32_t error, value, q_start, k_start, seqlen_q, seqlen_k;
};

__device__ SeqCheck check_sequence(const PlanArgs &a, int b)
{
    const int32_t q0 = a.cu_seqlens_q[b], q1 = a.cu_seqlens_q[b + 1];
    if (q0 < 0 || q1 < q0 || q1 > a.total_q)
        return {kCuSeqlensQ, q0 < 0 || q1 < q0 ? q0 : q1};
    if (q1 - q0 > a.max_seqlen_q)
        return {kSeqlenQ, q1 - q0};
    int32_t k0 = 0, rows = a.block_table_stride * a.page_size;  // the keys the sequence may hold
    if (a.cu_seqlens_k != nullptr) {
        const int32_t k1 = a.cu_seqlens_k[b + 1];
        k0 = a.cu_seqlens_k[b];
        if (k0 < 0 || k1 < k0 || k1 > a.total_k)
            return {kCuSeqlensK, k0 < 0 || k1 < k0 ? k0 : k1};
        rows = k1 - k0;
    }
    const int32_t seqlen_k = a.seqused_k != nullptr ? a.seqused_k[b] : rows;
    if (a.seqused_k != nullptr && (seqlen_k < 0 || seqlen_k > rows))
        return {kSequsedK, seqlen_k};
    if (seqlen_k > a.max_seqlen_k)
        return {kSeqlenK, seqlen_k};
    if (a.block_table != nullptr) {
        const int32_t *pages = a.block_table + static_cast<int64_t>(b) * a.block_table_stride;
        for (int j = 0; j < (seqlen_k + a.page_size - 1) / a.page_size; ++j)
            if (pages[j] < 0 || pages[j] >= a.num_pages)
                return {kBlockTable, pages[j]};
    }
    return {kVarlenOk, 0, q0, k0, q1 - q0, seqlen_k};
}

// Every element of out (total_q, heads_q, dim_v) and lse (heads_q, total_q) to NaN.
__device__ void poison_outputs(const PlanArgs &a)
{
    const __nv_bfloat16 nan = __float2bfloat16(NAN);
    const int64_t elements = static_cast<int64_t>(a.total_q) * a.heads_q * a.dim_v;
    for (int64_t i = threadIdx.x; i < elements; i += blockDim.x) {
        const int64_t row = i / a.dim_v, d = i % a.dim_v;
        a.out[row / a.heads_q * a.out_stride_seq + row % a.heads_q * a.out_stride_head + d] = nan;
    }
    if (a.lse != nullptr)
        for (int64_t i = threadIdx.x; i < static_cast<int64_t>(a.total_q) * a.heads_q; i += blockDim.x)
            a.lse[i] = NAN;
}

template <int kBlockN>
__global__ void __launch_bounds__(kPlanThreads) varlen_plan_kernel(const PlanArgs a)
{
    __shared__ int count[kVarlenMaxLevels];  // items per KV tile count, then the place of the next one
    __shared__ int start[kVarlenMaxLevels];  // where each count's items begin: costliest first
    __shared__ int first_fault;              // the least b * 8 + error over faulty sequences
    ptx::griddepcontrol_launch_dependents();  // the forward kernel sets up meanwhile, then waits for this grid
    for (int i = threadIdx.x; i < a.levels; i += blockDim.x)
        count[i] = 0;
    if (threadIdx.x == 0)
        first_fault = INT_MAX;
    __syncthreads();

    for (int b = threadIdx.x; b < a.batch; b += blockDim.x) {
        const SeqCheck c = check_sequence(a, b);
        if (c.error != kVarlenOk) {
            atomicMin(&first_fault, b * 8 + c.error);
            continue;
        }
        for (int m = 0; m < (c.seqlen_q + kVarlenTileRows - 1) / kVarlenTileRows; ++m)
            atomicAdd(&count[kv_range_of<kVarlenTileRows, kBlockN>(m, c.seqlen_q, c.seqlen_k, a.causal).end], 1);
    }
    __syncthreads();
    if (first_fault != INT_MAX) {
        if (threadIdx.x == 0) {
            const int b = first_fault / 8;
            *a.header = {first_fault % 8, b, check_sequence(a, b).value, 0};
        }
        poison_outputs(a);
        return;
    }

    // start[l] = the items visiting more than l tiles: a descending exclusive scan by warp 0, 32 levels a step.
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        int carry = 0;
        for (int top = a.levels - 1; top >= 0; top -= 32) {
            const int level = top - lane;
            const int own = level >= 0 ? count[level] : 0;
            int inclusive = own;
            for (int d = 1; d < 32; d *= 2) {
                const int other = __shfl_up_sync(0xffffffffu, inclusive, d);
                if (lane >= d)
                    inclusive += other;
            }
            if (level >= 0) {
                start[level] = carry + inclusive - own;
                count[level] = 0;
            }
            carry += __shfl_sync(0xffffffffu, inclusive, 31);
        }
        if (lane == 0)
            *a.header = {kVarlenOk, 0, 0, carry};
    }
    __syncthreads();

    for (int b = threadIdx.x; b < a.batch; b += blockDim.x) {
        const SeqCheck c = check_sequence(a, b);
        for (int m = 0; m < (c.seqlen_q + kVarlenTileRows - 1) / kVarlenTileRows; ++m) {
            const KvRange r = kv_range_of<kVarlenTileRows, kBlockN>(m, c.seqlen_q, c.seqlen_k, a.causal);
            a.tiles[start[r.end] + atomicAdd(&count[r.end], 1)] = {c.q_start, c.k_start, c.seqlen_q, c.seqlen_k,
                                                                   b, m, r.end, r.mask_from};
        }
    }
}

}  // namespace

flashprefill_status varlen_plan(const flashprefill_params *p, int kv_tile_keys, cudaStream_t stream)
{
    PlanArgs a{};
    a.cu_seqlens_q = p->cu_seqlens_q;
    a.cu_seqlens_k = p->cu_seqlens_k;
    a.seqused_k = p->seqused_k;
    a.block_table = p->block_table;
    a.batch = p->batch;
    a.total_q = p->total_q;
    a.total_k = p->total_k;
    a.max_seqlen_q = p->seqlen_q;
    a.max_seqlen_k = p->seqlen_k;
    a.block_table_stride = p->block_table_stride;
    a.page_size = p->page_size;
    a.num_pages = p->num_pages;
    a.causal = p->causal;
    a.levels = varlen_levels(p->seqlen_k, kv_tile_keys);
    a.header = static_cast<VarlenHeader *>(p->workspace);
    a.tiles = reinterpret_cast<VarlenTile *>(static_cast<uint8_t *>(p->workspace) + sizeof(VarlenHeader));
    a.out = static_cast<__nv_bfloat16 *>(p->out);
    a.out_stride_seq = p->out_stride_seq;
    a.out_stride_head = p->out_stride_head;
    a.lse = p->lse;
    a.heads_q = p->heads_q;
    a.dim_v = p->dim_v;
    if (kv_tile_keys == 128)
        varlen_plan_kernel<128><<<1, kPlanThreads, 0, stream>>>(a);
    else
        varlen_plan_kernel<192><<<1, kPlanThreads, 0, stream>>>(a);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "varlen plan launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}

}  // namespace fp
