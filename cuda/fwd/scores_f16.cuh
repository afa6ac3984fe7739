// Float16 scores (FLASHPREFILL_SCORES_FP16): S = Q K^T accumulated in float16 pairs (wgmma .f16: 48 registers at
// 192 keys, 32 at 128). So that no partial sum of S can pass float16's range, each warpgroup's item first brings its
// 64 rows of q codes within Config::kF16ScoresQCodeMax by a power of two 2^-shift where they pass it (rounded to e4m3
// again), and the score scale takes 2^shift back (exact: a power of two).
#pragma once

#include <cstdint>

#include "fwd/roles.cuh"
#include "fwd/scores.cuh"
#include "fwd/smem.cuh"
#include "ptx.cuh"

namespace fp {

template <class Config>
struct F16Scores : QkOperands<Config> {
    using Base = QkOperands<Config>;
    static constexpr int kRegs = Config::kBlockN / 4;  // float16 pairs of an m64nN accumulator
    using Registers = uint32_t[kRegs];
    __device__ __forceinline__ static void clear(Registers &s)
    {
#pragma unroll
        for (int j = 0; j < kRegs; ++j)
            s[j] = 0u;
    }
    static_assert(Config::kQInRegisters, "float16 scores scale q's codes in its registers");

    // The tile's score scale times 2^shift (q_unshift), what q's codes gave up.
    __device__ __forceinline__ static float scale_log2(float tile_scale_log2, float q_unshift)
    {
        return tile_scale_log2 * q_unshift;
    }
    __device__ __forceinline__ static void issue(Registers &s, const typename Base::QFragments &q_frag, uint64_t,
                                                 uint64_t k_desc0, int stage)
    {
        const uint64_t k_stage_desc = Base::k_stage_desc(k_desc0, stage);
#pragma unroll
        for (int step = 0; step < Base::kQkSteps; ++step)
            if constexpr (Config::kBlockN == 192)
                ptx::wgmma_m64n192k32_f16_e4m3_rs(s, q_frag[step], Base::k_desc(k_stage_desc, step), step > 0);
            else
                ptx::wgmma_m64n128k32_f16_e4m3_rs(s, q_frag[step], Base::k_desc(k_stage_desc, step), step > 0);
        ptx::wgmma_commit_group();
    }

    // shift: the least with every code's magnitude m (e4m3 codes order as their magnitudes, 8 codes a binade) at most
    // the bound, m - 8 shift <= max; 0 where they all fit. The warpgroup agrees on the largest of its threads' by
    // bar.red.or on its barrier `vote`, bit by bit.
    __device__ __forceinline__ static int q_code_shift(const FwdSharedStorage<Config> &ss, int consumer_index,
                                                       uint32_t thread, uint32_t vote)
    {
        constexpr uint32_t kWarpgroupQBytes = Config::kRowsPerWarpgroup * Config::kSwizzleQk;  // per chunk
        static_assert(kWarpgroupQBytes % (16 * 128) == 0, "16 bytes per thread and load");
        uint32_t largest = 0;  // per byte
#pragma unroll
        for (int c = 0; c < Config::kQkChunks; ++c) {
            const uint32_t rows = ptx::smem_addr(ss.q) + c * Config::kBlockM * Config::kSwizzleQk +
                                  consumer_index * kWarpgroupQBytes;
#pragma unroll
            for (uint32_t offset = 16 * thread; offset < kWarpgroupQBytes; offset += 16 * 128) {
                uint32_t word[4];
                ptx::ld_shared_v4(rows + offset, word);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    uint32_t magnitude = word[i] & 0x7f7f7f7fu;
                    // A NaN code (magnitude 0x7f) counts as 0: its row is NaN whatever the shift, and it must not
                    // shrink the other rows' codes. Only 0x7f + 1 sets a byte's top bit.
                    const uint32_t nan = (magnitude + 0x01010101u) & 0x80808080u;
                    magnitude ^= nan - (nan >> 7);
                    largest = __vmaxu4(largest, magnitude);
                }
            }
        }
        largest = max(max(largest & 0xff, (largest >> 8) & 0xff), max((largest >> 16) & 0xff, largest >> 24));
        constexpr uint32_t kMax = Config::kF16ScoresQCodeMax;
        const int own = largest > kMax ? static_cast<int>((largest - kMax + 7) / 8) : 0;
        static_assert((0x7f - kMax + 7) / 8 < 16, "four rounds of the vote cover every shift");
        int shift = 0;
#pragma unroll
        for (int bit = 8; bit > 0; bit /= 2)
            if (ptx::bar_red_or(vote, 128, own >= shift + bit))
                shift += bit;
        return shift;
    }
    // Four e4m3 codes times 2^-shift (factor: that power of two as float16 pairs), rounded to nearest even e4m3:
    // through float16, which holds every e4m3 value times 2^-15..1 exactly; NaN stays NaN.
    __device__ __forceinline__ static uint32_t scale_q_codes(uint32_t codes, uint32_t factor)
    {
        const uint32_t lo = ptx::mul_rn_f16x2(ptx::cvt_rn_f16x2_e4m3x2(static_cast<uint16_t>(codes)), factor);
        const uint32_t hi = ptx::mul_rn_f16x2(ptx::cvt_rn_f16x2_e4m3x2(static_cast<uint16_t>(codes >> 16)), factor);
        return static_cast<uint32_t>(ptx::cvt_rn_satfinite_e4m3x2_f16x2(lo)) |
               static_cast<uint32_t>(ptx::cvt_rn_satfinite_e4m3x2_f16x2(hi)) << 16;
    }
    // This warpgroup's q codes times 2^-shift, in its Q fragments.
    __device__ __forceinline__ static void scale_q(typename Base::QFragments &q_frag, int shift)
    {
        const uint32_t factor = ptx::cvt_rn_f16x2_splat(ldexpf(1.0f, -shift));
#pragma unroll
        for (int step = 0; step < Base::kQkSteps; ++step)
#pragma unroll
            for (int i = 0; i < 4; ++i)
                q_frag[step][i] = scale_q_codes(q_frag[step][i], factor);
    }
};

}  // namespace fp
