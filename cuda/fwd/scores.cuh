// S = Q K^T of one KV tile for one consumer warpgroup's 64 rows: the score policies, stateless; the main loop holds
// S's registers, Q's fragments and the descriptors of Q and K's stage 0.
//   F32Scores (here): bf16 or e4m3 Q and K, S in float32 (m64n128, or m64n192 at 192 keys a tile)
//   F16Scores (scores_f16.cuh): e4m3 Q and K, S in float16 pairs (m64n192), q's codes first brought within a bound
#pragma once

#include <cstdint>

#include "fwd/descriptors.cuh"
#include "fwd/smem.cuh"
#include "ptx.cuh"

namespace fp {

// Q's operand and K's descriptors, shared by the score policies.
template <class Config>
struct QkOperands {
    using Input = typename Config::Input;
    static constexpr int kStepBytes = Input::kMmaK * Input::kBytes;          // K bytes per wgmma (32)
    static constexpr int kStepsPerChunk = Config::kSwizzleQk / kStepBytes;  // Q, K: 4 (128-byte rows) or 2 (64)
    static constexpr int kQkSteps = Config::kHeadDimQk / Input::kMmaK;
    static_assert(kStepsPerChunk * kStepBytes == Config::kSwizzleQk, "wgmma K steps tile a swizzle row");
    // Q stays in registers as the A operand of every S = Q K^T where it fits (Config::kQInRegisters): half the
    // shared-memory reads of S.
    using QFragments = uint32_t[Config::kQInRegisters ? kQkSteps : 1][4];

    // Q's fragments by ldmatrix.x4 per K step: matrices (rows 0-7 | 8-15 of this warp's 16) x (bytes 0-15 | 16-31
    // of the step).
    __device__ __forceinline__ static void load_q_fragments(QFragments &q_frag, const FwdSharedStorage<Config> &ss,
                                                            int consumer_index, uint32_t lane, uint32_t warp)
    {
        if constexpr (!Config::kQInRegisters)
            return;
        const uint32_t matrix = lane / 8;
        const uint32_t row = consumer_index * Config::kRowsPerWarpgroup + 16 * warp + 8 * (matrix % 2) + lane % 8;
#pragma unroll
        for (int step = 0; step < (Config::kQInRegisters ? kQkSteps : 0); ++step) {
            const uint32_t chunk = step / kStepsPerChunk;
            const uint32_t byte_col = (step % kStepsPerChunk) * kStepBytes + 16 * (matrix / 2);
            ptx::ldmatrix_x4(q_frag[step], ptx::smem_addr(ss.q) + chunk * Config::kBlockM * Config::kSwizzleQk +
                                               swizzle_offset<Config::kSwizzleQk>(row, byte_col));
        }
    }
    __device__ __forceinline__ static uint64_t q_desc(uint64_t q_desc0, int step)
    {
        const uint32_t chunk = step / kStepsPerChunk, within = (step % kStepsPerChunk) * kStepBytes;
        return wgmma_desc_advance(q_desc0, chunk * Config::kBlockM * Config::kSwizzleQk + within);
    }
    // A stage's descriptor once, then each K step's by a constant: one uniform add per wgmma (advancing by the sum
    // let ptxas recompute the stage's part for every step).
    __device__ __forceinline__ static uint64_t k_stage_desc(uint64_t k_desc0, int stage)
    {
        return wgmma_desc_advance(k_desc0, stage * Config::kTileKBytes);
    }
    __device__ __forceinline__ static uint64_t k_desc(uint64_t stage_desc, int step)
    {
        const uint32_t chunk = step / kStepsPerChunk, within = (step % kStepsPerChunk) * kStepBytes;
        return wgmma_desc_advance(stage_desc, chunk * Config::kBlockN * Config::kSwizzleQk + within);
    }
};

// S in float32, from bf16 or e4m3 Q and K.
template <class Config>
struct F32Scores : QkOperands<Config> {
    using Base = QkOperands<Config>;
    static constexpr int kRegs = Config::kBlockN / 2;  // an m64nN accumulator
    using Registers = float[kRegs];
    // S's registers: whatever the last item left (the accumulators are overwritten, but asm operands are read).
    __device__ __forceinline__ static void clear(Registers &s)
    {
#pragma unroll
        for (int e = 0; e < kRegs; ++e)
            s[e] = 0.0f;
    }

    // Float32 scores cannot overflow: q's codes keep their scale.
    __device__ __forceinline__ static int q_code_shift(const FwdSharedStorage<Config> &, int, uint32_t, uint32_t)
    {
        return 0;
    }
    __device__ __forceinline__ static void scale_q(typename Base::QFragments &, int) {}
    __device__ __forceinline__ static float scale_log2(float tile_scale_log2, float) { return tile_scale_log2; }

    __device__ __forceinline__ static void issue(Registers &s, const typename Base::QFragments &q_frag,
                                                 uint64_t q_desc0, uint64_t k_desc0, int stage)
    {
        const uint64_t k_stage_desc = Base::k_stage_desc(k_desc0, stage);
#pragma unroll
        for (int step = 0; step < Base::kQkSteps; ++step) {
            if constexpr (Config::kIsFp8 && Config::kBlockN == 192 && Config::kQInRegisters)
                ptx::wgmma_m64n192k32_f32_e4m3_rs(s, q_frag[step], Base::k_desc(k_stage_desc, step), step > 0);
            else if constexpr (Config::kIsFp8 && Config::kBlockN == 192)
                ptx::wgmma_m64n192k32_f32_e4m3_ss(s, Base::q_desc(q_desc0, step), Base::k_desc(k_stage_desc, step),
                                                  step > 0);
            else if constexpr (Config::kIsFp8)
                ptx::wgmma_m64n128k32_f32_e4m3_rs(s, q_frag[step], Base::k_desc(k_stage_desc, step), step > 0);
            else if constexpr (Config::kQInRegisters)
                ptx::wgmma_m64n128k16_f32_bf16_rs<0>(s, q_frag[step], Base::k_desc(k_stage_desc, step), step > 0);
            else
                ptx::wgmma_m64n128k16_f32_bf16_ss(s, Base::q_desc(q_desc0, step), Base::k_desc(k_stage_desc, step),
                                                  step > 0);
        }
        ptx::wgmma_commit_group();
    }
};

}  // namespace fp
