// Float16 scores (FLASHPREFILL_SCORES_FP16): the softmax of the e4m3-code kernels over an S accumulated in float16,
// two scores per register (the m64nN f16 accumulator pairs the float32 layout's elements 2j and 2j + 1: one row,
// two neighbouring columns).
//
// Per register the exp-free codes (expfree.cuh) take one fma.rn.relu.f16x2 and one add.rn.f16x2 instead of two FFMA
// and one F2FP: y = b, the code's real value, rounded to float16 (negatives 0), then 1024 + y rounds b to an
// integer in the low bits of a float16 of [1024, 2048), where one unit is one step; PRMT packs the low bytes as
// before. The row max takes three-input packed maxima (VHMNMX): about a quarter of the FMNMX of float32 scores.
//
// The float16 constants of the codes, m = 8 scale_log2 and c = K - 8 max_used, move the row max's code by up to
// |8 max_used| 2^-11 + ulp(c) / 2 steps: within 2 while |max_used| <= 256 and m is a normal float16, where every code
// stays below 126 (the largest finite is 0x7E). A warp with a row beyond that (scores spanning hundreds of binades,
// or descales far from 1) takes the exact form for the tile: d = s - the row's max over the tile (a float16 value of
// S), times 2^k where m = m' 2^k with m' in [1, 2), then y = d m' + K + 8 (tile max - max_used): every term within a
// few hundred code steps, and y at most K. A score itself carries up to 2^-11 of its magnitude in error either way:
// the precision float16 scores trade for speed.
#pragma once

#include <cmath>
#include <cstdint>

#include "fwd/expfree.cuh"
#include "ptx.cuh"
#include "fwd/softmax.cuh"

namespace fp {

// This thread's max of each half (row) of the float16 scores, as float32 (exact).
template <int kRegs>
__device__ __forceinline__ void thread_max_f16x2(const uint32_t (&s)[kRegs], float (&thread_max)[2])
{
    constexpr uint32_t kNegInfX2 = 0xfc00fc00u;
    uint32_t part[2][4];  // four chains per half; ptxas folds them into three-input VHMNMX
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int c = 0; c < 4; ++c)
            part[h][c] = kNegInfX2;
#pragma unroll
    for (int j = 0; j < kRegs; ++j)
        part[acc_half(2 * j)][(j >> 1) & 3] = ptx::max_f16x2(part[acc_half(2 * j)][(j >> 1) & 3], s[j]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        uint32_t m = ptx::max_f16x2(ptx::max_f16x2(part[h][0], part[h][1]), ptx::max_f16x2(part[h][2], part[h][3]));
        m = ptx::max_f16x2(m, ptx::prmt(m, m, 0x1032));  // both halves of the pair
        thread_max[h] = ptx::cvt_f32_f16_lo(m);
    }
}

// The exp-free codes (ExpFree<kOffsetLog2>'s) in place: each register becomes two float16 of 1024 + code, for
// pack_codes_f16x2. tile_max: the rows' raw max over this tile (-inf where every key was masked); max_used and
// scale_log2 as OnlineMax and the tile give them.
template <int kOffsetLog2, int kRegs>
__device__ __forceinline__ void encode_f16x2(uint32_t (&s)[kRegs], float scale_log2, const float (&tile_max)[2],
                                             const float (&max_used)[2])
{
    constexpr float kRowBase = ExpFree<kOffsetLog2>::kRowBase;  // K: the row max's code before rounding
    constexpr float kMaxLimit = 256.0f;                          // |max_used| of the fast form (see above)
    constexpr float kMinMultiplier = 0x1p-14f, kMaxMultiplier = 0x1p14f;  // m a normal float16
    constexpr uint32_t k1024X2 = 0x64006400u;
    const float multiplier = 8.0f * scale_log2;
    const bool fast = fabsf(max_used[0]) <= kMaxLimit && fabsf(max_used[1]) <= kMaxLimit &&
                      multiplier >= kMinMultiplier && multiplier <= kMaxMultiplier;
    if (__all_sync(0xffffffffu, fast)) {  // y = s m + c
        const uint32_t m = ptx::cvt_rn_f16x2_splat(multiplier);
        uint32_t c[2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
            c[h] = ptx::cvt_rn_f16x2_splat(kRowBase - 8.0f * max_used[h]);
#pragma unroll
        for (int j = 0; j < kRegs; ++j)
            s[j] = ptx::add_rn_f16x2(ptx::fma_rn_relu_f16x2(s[j], m, c[acc_half(2 * j)]), k1024X2);
    } else {  // y = ((s - tile max) 2^k) m' + c'
        int k;
        const float mantissa = 2.0f * frexpf(multiplier, &k);  // multiplier = mantissa 2^(k - 1)
        const int shift = min(max(k - 1, -24), 15);              // 2^shift a float16 (subnormal from 2^-15 down)
        const uint32_t m = ptx::cvt_rn_f16x2_splat(ldexpf(mantissa, k - 1 - shift));
        const uint32_t power = ptx::cvt_rn_f16x2_splat(ldexpf(1.0f, shift));
        uint32_t minus_max[2], c[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float row_max = tile_max[h] == -INFINITY ? 0.0f : tile_max[h];  // a masked row's d stays -inf
            minus_max[h] = ptx::cvt_rn_f16x2_splat(-row_max);
            // the product rounded as OnlineMax rounds it (no FMA contraction): 0 for the row whose max this is
            c[h] = ptx::cvt_rn_f16x2_splat(kRowBase + 8.0f * (__fmul_rn(row_max, scale_log2) - max_used[h]));
        }
#pragma unroll
        for (int j = 0; j < kRegs; ++j) {
            const int h = acc_half(2 * j);
            const uint32_t d = ptx::mul_rn_f16x2(ptx::add_rn_f16x2(s[j], minus_max[h]), power);
            s[j] = ptx::add_rn_f16x2(ptx::fma_rn_relu_f16x2(d, m, c[h]), k1024X2);
        }
    }
}

// The A fragment of P for K step `step` from the encoded registers 8 step .. 8 step + 7 (elements 16 step ..): the
// low byte of each float16 of 1024 + code is the code; the key order of ExpFree::pack.
template <int kRegs, int kPRegs>
__device__ __forceinline__ void pack_codes_f16x2(const uint32_t (&s)[kRegs], int step, uint32_t (&p)[kPRegs])
{
    const uint32_t *pair = s + 8 * step;
    p[4 * step + 0] = ptx::prmt(pair[0], pair[2], 0x6420);
    p[4 * step + 1] = ptx::prmt(pair[1], pair[3], 0x6420);
    p[4 * step + 2] = ptx::prmt(pair[4], pair[6], 0x6420);
    p[4 * step + 3] = ptx::prmt(pair[5], pair[7], 0x6420);
}

}  // namespace fp
