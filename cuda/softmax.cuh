// Online softmax over the S accumulators of one consumer thread (m64n128 wgmma layout).
//
// Accumulator layout (PTX ISA 9.7.15.5.4, m64nNk*): thread `lane` of warp `w` in the warpgroup holds,
// for element e of 64, row 16 w + lane / 4 + 8 * ((e / 2) % 2) and column 8 (e / 4) + 2 (lane % 4) + e % 2.
// So a thread owns two rows ("halves"), and the 4 threads of a quad share them.
#pragma once

#include <cmath>
#include <cstdint>

#include "ptx.cuh"

namespace fp {

constexpr int kAccRegs = 64;

__device__ __forceinline__ int acc_half(int e) { return (e >> 1) & 1; }
__device__ __forceinline__ int acc_col(int e, uint32_t lane) { return 8 * (e >> 2) + 2 * (lane & 3) + (e & 1); }
// One of four independent reduction chains within a half: by column parity and column-group parity.
__device__ __forceinline__ int acc_chain(int e) { return (e & 1) | ((e >> 2) & 1) << 1; }

__device__ __forceinline__ float quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Sets s to -inf where key `col0 + col` may not be seen by query `row0 + row`: past seqlen_k, or, when
// causal, past the bottom-right-aligned diagonal (key <= query + causal_offset).
__device__ __forceinline__ void apply_mask(float (&s)[kAccRegs], uint32_t lane, int query_half0, int key0,
                                           int seqlen_k, bool causal, int causal_offset)
{
#pragma unroll
    for (int e = 0; e < kAccRegs; ++e) {
        const int key = key0 + acc_col(e, lane);
        const int query = query_half0 + 8 * acc_half(e);
        if (key >= seqlen_k || (causal && key > query + causal_offset))
            s[e] = -INFINITY;
    }
}

// Running max and sum of the two rows a thread owns, in the log2 domain: t = score * scale_log2.
// Probabilities are p = 2^(t - shift) with shift = max - kPOffsetLog2, so the row max maps to 2^kPOffsetLog2.
template <int kPOffsetLog2>
struct OnlineSoftmax {
    float row_max[2] = {-INFINITY, -INFINITY};  // max of t over the keys seen so far
    float row_sum[2] = {0.0f, 0.0f};            // this thread's part of sum(p); quad-reduced at the end

    // Turns the raw scores s into p (in place) for a new KV tile; returns the factor by which the output
    // accumulated so far must be multiplied per half.
    __device__ __forceinline__ void update(float (&s)[kAccRegs], float scale_log2, float (&rescale)[2])
    {
        // Four independent chains per half (by e % 2 and column-group parity) keep the reductions short.
        float part_max[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c = 0; c < 4; ++c)
                part_max[h][c] = -INFINITY;
#pragma unroll
        for (int e = 0; e < kAccRegs; ++e)
            part_max[acc_half(e)][acc_chain(e)] = fmaxf(part_max[acc_half(e)][acc_chain(e)], s[e]);
        float shift[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float tile_max = fmaxf(fmaxf(part_max[h][0], part_max[h][1]), fmaxf(part_max[h][2], part_max[h][3]));
            const float new_max = fmaxf(row_max[h], quad_max(tile_max) * scale_log2);
            // A row with every key masked so far keeps max -inf; shifting by 0 then gives p = 0, not NaN.
            const float max_used = new_max == -INFINITY ? 0.0f : new_max;
            rescale[h] = ptx::ex2_approx_ftz(row_max[h] - max_used);
            row_max[h] = new_max;
            shift[h] = max_used - kPOffsetLog2;
        }
        float part_sum[2][4] = {};
#pragma unroll
        for (int e = 0; e < kAccRegs; ++e) {
            s[e] = ptx::ex2_approx_ftz(fmaf(s[e], scale_log2, -shift[acc_half(e)]));
            part_sum[acc_half(e)][acc_chain(e)] += s[e];
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
            row_sum[h] = row_sum[h] * rescale[h] + ((part_sum[h][0] + part_sum[h][1]) + (part_sum[h][2] + part_sum[h][3]));
    }

    // After the last tile: the full row sums, and ln(sum_j exp(score)) per half.
    __device__ __forceinline__ void finish(float (&sum)[2], float (&lse)[2]) const
    {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            sum[h] = quad_sum(row_sum[h]);
            const float shift = (row_max[h] == -INFINITY ? 0.0f : row_max[h]) - kPOffsetLog2;
            lse[h] = (shift + log2f(sum[h])) * 0.69314718055994531f;
        }
    }
};

}  // namespace fp
