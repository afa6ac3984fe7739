// Online softmax over the S accumulators of one consumer thread (m64nN wgmma layout, N = 128 or 192 keys).
//
// Accumulator layout (PTX ISA 9.7.15.5.4, m64nNk*): thread `lane` of warp `w` in the warpgroup holds,
// for element e of N / 2, row 16 w + lane / 4 + 8 * ((e / 2) % 2) and column 8 (e / 4) + 2 (lane % 4) + e % 2.
// So a thread owns two rows ("halves"), and the 4 threads of a quad share them.
#pragma once

#include <cmath>
#include <cstdint>

#include "ptx.cuh"

namespace fp {

constexpr int kAccRegs = 64;  // an m64n128 accumulator: O, and S over 128 keys

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

// Running max of the two rows a thread owns, in the log2 domain: t = score * scale_log2.
struct OnlineMax {
    // max of t over the keys seen so far (the lazy max's reference: softmax_exp2.cuh)
    float row_max[2] = {-INFINITY, -INFINITY};

    // What p is measured from: the row's max, or 0 where it has seen only masked keys.
    __device__ __forceinline__ float reference(int h) const { return row_max[h] == -INFINITY ? 0.0f : row_max[h]; }
    // The reference moved by shift (up from a max; anywhere from a row's "no key" 0).
    __device__ __forceinline__ void raise(int h, float shift) { row_max[h] = reference(h) + shift; }

    // Takes a new tile of raw scores s; gives the factor by which everything accumulated so far must be
    // multiplied (per half) and the max to measure this tile's t from (0 where a row has seen only masked keys,
    // so that its p come out 0, not NaN).
    template <int kRegs>
    __device__ __forceinline__ void update(const float (&s)[kRegs], float scale_log2, float (&rescale)[2],
                                           float (&max_used)[2])
    {
        float thread_max[2], tile_max[2];
        thread_max_of_bits(s, thread_max);
        bool negative[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            tile_max[h] = quad_max(thread_max[h]);
            negative[h] = __float_as_int(tile_max[h]) < 0;
        }
        if (__any_sync(0xffffffffu, negative[0] || negative[1])) {  // a row below 0 over the whole tile
            thread_max_of_floats(s, thread_max);
#pragma unroll
            for (int h = 0; h < 2; ++h)
                tile_max[h] = quad_max(thread_max[h]);
        }
        update_from_tile_max(tile_max, scale_log2, rescale, max_used);
    }

    // This thread's max of each row over s, by FMNMX (four independent chains per half, by e % 2 and column-group
    // parity, keep the reduction short).
    template <int kRegs>
    __device__ __forceinline__ static void thread_max_of_floats(const float (&s)[kRegs], float (&thread_max)[2])
    {
        float part_max[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c = 0; c < 4; ++c)
                part_max[h][c] = -INFINITY;
#pragma unroll
        for (int e = 0; e < kRegs; ++e)
            part_max[acc_half(e)][acc_chain(e)] = fmaxf(part_max[acc_half(e)][acc_chain(e)], s[e]);
#pragma unroll
        for (int h = 0; h < 2; ++h)
            thread_max[h] = fmaxf(fmaxf(part_max[h][0], part_max[h][1]), fmaxf(part_max[h][2], part_max[h][3]));
    }

    // The same over the scores' bits as signed integers: ptxas merges the chains into three-input VIMNMX3, two scores
    // an instruction (sm_90 has no three-input float max; FMNMX takes one). Float bits order as integers among
    // non-negative floats, and every non-negative float's bits exceed every negative one's: where the thread's row
    // holds a score >= +0 this is its max, else some negative score of the row, which may be below the max. So a
    // row whose max over its quad comes out negative is taken again by FMNMX (update).
    template <int kRegs>
    __device__ __forceinline__ static void thread_max_of_bits(const float (&s)[kRegs], float (&thread_max)[2])
    {
        int32_t part_max[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c = 0; c < 4; ++c)
                part_max[h][c] = INT32_MIN;
#pragma unroll
        for (int e = 0; e < kRegs; ++e)
            part_max[acc_half(e)][acc_chain(e)] = max(part_max[acc_half(e)][acc_chain(e)], __float_as_int(s[e]));
#pragma unroll
        for (int h = 0; h < 2; ++h)
            thread_max[h] =
                __int_as_float(max(max(part_max[h][0], part_max[h][1]), max(part_max[h][2], part_max[h][3])));
    }

    // The same from this thread's max of each of its two rows over the tile (float16 scores take it so); also gives
    // the rows' raw max over the tile.
    __device__ __forceinline__ void update_from_thread_max(const float (&thread_max)[2], float scale_log2,
                                                           float (&rescale)[2], float (&max_used)[2],
                                                           float (&tile_max)[2])
    {
#pragma unroll
        for (int h = 0; h < 2; ++h)
            tile_max[h] = quad_max(thread_max[h]);
        update_from_tile_max(tile_max, scale_log2, rescale, max_used);
    }

    // The same from the rows' raw max over the tile.
    __device__ __forceinline__ void update_from_tile_max(const float (&tile_max)[2], float scale_log2,
                                                         float (&rescale)[2], float (&max_used)[2])
    {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float new_max = fmaxf(row_max[h], tile_max[h] * scale_log2);
            max_used[h] = new_max == -INFINITY ? 0.0f : new_max;
            rescale[h] = ptx::ex2_approx_ftz(row_max[h] - max_used[h]);
            row_max[h] = new_max;
        }
    }
};

// p = 2^(s * scale_log2 - max_used + offset_log2) in place (the MUFU path); returns this thread's part of
// each row's sum of p.
template <int kRegs>
__device__ __forceinline__ void exp2_in_place(float (&s)[kRegs], float scale_log2, const float (&max_used)[2],
                                              int offset_log2, float (&tile_sum)[2])
{
    const float shift[2] = {max_used[0] - offset_log2, max_used[1] - offset_log2};
    float part_sum[2][4] = {};
#pragma unroll
    for (int e = 0; e < kRegs; ++e) {
        s[e] = ptx::ex2_approx_ftz(fmaf(s[e], scale_log2, -shift[acc_half(e)]));
        part_sum[acc_half(e)][acc_chain(e)] += s[e];
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
        tile_sum[h] = (part_sum[h][0] + part_sum[h][1]) + (part_sum[h][2] + part_sum[h][3]);
}

// ln(sum_j exp(score_j)) of a row from its final max_used (log2 units) and its sum of p.
__device__ __forceinline__ float log_sum_exp(float max_used, int offset_log2, float row_sum)
{
    return (max_used - offset_log2 + log2f(row_sum)) * 0.69314718055994531f;
}

}  // namespace fp
