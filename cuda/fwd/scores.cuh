// S = Q K^T of one KV tile for one consumer warpgroup's 64 rows: the score policies. Each holds S's registers and
// Q's operand (fragments in registers, or descriptors of Q in shared memory), and issues the tile's wgmma.
//   F32Scores (here): bf16 or e4m3 Q and K, S in float32 (m64n128, or m64n192 at 192 keys a tile)
//   F16Scores (scores_f16.cuh): e4m3 Q and K, S in float16 pairs (m64n192), q's codes within their bound
#pragma once

#include <cstdint>

#include "fwd/descriptors.cuh"
#include "fwd/roles.cuh"
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
    uint32_t q_frag[Config::kQInRegisters ? kQkSteps : 1][4];
    // Descriptors of this warpgroup's 64 rows of Q and of K's stage 0, advanced per stage and K step.
    uint64_t q_desc0, k_desc0;

    __device__ __forceinline__ QkOperands(const FwdSharedStorage<Config> &ss, int consumer_index)
        : q_desc0(wgmma_desc<Config::kSwizzleQk>(
              ptx::smem_addr(ss.q) + consumer_index * Config::kRowsPerWarpgroup * Config::kSwizzleQk, 16)),
          k_desc0(wgmma_desc<Config::kSwizzleQk>(ptx::smem_addr(ss.k[0]), 16))
    {
    }

    // Q's fragments by ldmatrix.x4 per K step: matrices (rows 0-7 | 8-15 of this warp's 16) x (bytes 0-15 | 16-31
    // of the step).
    __device__ __forceinline__ void load_q_fragments(const FwdSharedStorage<Config> &ss, const ConsumerThread<Config> &me)
    {
        if constexpr (!Config::kQInRegisters)
            return;
        const uint32_t matrix = me.lane / 8;
        const uint32_t row = me.index * Config::kRowsPerWarpgroup + 16 * me.warp + 8 * (matrix % 2) + me.lane % 8;
#pragma unroll
        for (int step = 0; step < (Config::kQInRegisters ? kQkSteps : 0); ++step) {
            const uint32_t chunk = step / kStepsPerChunk;
            const uint32_t byte_col = (step % kStepsPerChunk) * kStepBytes + 16 * (matrix / 2);
            ptx::ldmatrix_x4(q_frag[step], ptx::smem_addr(ss.q) + chunk * Config::kBlockM * Config::kSwizzleQk +
                                               swizzle_offset<Config::kSwizzleQk>(row, byte_col));
        }
    }
    // Q in registers: the next item's may come. ldmatrix read Q through the generic proxy and TMA writes the next
    // one through the async proxy, so the proxy fence comes first: without it the arrive could overtake the reads.
    __device__ __forceinline__ void release_q_if_in_registers(FwdSharedStorage<Config> &ss) const
    {
        if constexpr (Config::kQInRegisters) {
            ptx::fence_proxy_async_shared();
            ptx::mbarrier_arrive(&ss.q_empty);
        }
    }
    // Q read from shared memory by each S: its slot is free once the item's last S is done.
    __device__ __forceinline__ void release_q_if_in_shared(FwdSharedStorage<Config> &ss) const
    {
        if constexpr (!Config::kQInRegisters)
            ptx::mbarrier_arrive(&ss.q_empty);
    }

    __device__ __forceinline__ uint64_t q_desc(int step) const
    {
        const uint32_t chunk = step / kStepsPerChunk, within = (step % kStepsPerChunk) * kStepBytes;
        return wgmma_desc_advance(q_desc0, chunk * Config::kBlockM * Config::kSwizzleQk + within);
    }
    // A stage's descriptor once, then each K step's by a constant: one uniform add per wgmma (advancing by the sum
    // let ptxas recompute the stage's part for every step).
    __device__ __forceinline__ uint64_t k_stage_desc(int stage) const
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

    using Base::Base;
    // q's codes need no shift: float32 scores cannot overflow.
    __device__ __forceinline__ static int q_code_shift(const FwdSharedStorage<Config> &, const ConsumerThread<Config> &)
    {
        return 0;
    }
    __device__ __forceinline__ void scale_q(int) const {}
    // S's registers: whatever the last item left (the accumulators are overwritten, but asm operands are read).
    __device__ __forceinline__ static void clear(Registers &s)
    {
#pragma unroll
        for (int e = 0; e < kRegs; ++e)
            s[e] = 0.0f;
    }
    __device__ __forceinline__ static float scale_log2(float tile_scale_log2, float) { return tile_scale_log2; }
    __device__ __forceinline__ void issue(Registers &s, int stage) const
    {
        const uint64_t k_stage = this->k_stage_desc(stage);
#pragma unroll
        for (int step = 0; step < Base::kQkSteps; ++step) {
            if constexpr (Config::kIsFp8 && Config::kBlockN == 192 && Config::kQInRegisters)
                ptx::wgmma_m64n192k32_f32_e4m3_rs(s, this->q_frag[step], Base::k_desc(k_stage, step), step > 0);
            else if constexpr (Config::kIsFp8 && Config::kBlockN == 192)
                ptx::wgmma_m64n192k32_f32_e4m3_ss(s, this->q_desc(step), Base::k_desc(k_stage, step), step > 0);
            else if constexpr (Config::kIsFp8)
                ptx::wgmma_m64n128k32_f32_e4m3_rs(s, this->q_frag[step], Base::k_desc(k_stage, step), step > 0);
            else
                ptx::wgmma_m64n128k16_f32_bf16_rs<0>(s, this->q_frag[step], Base::k_desc(k_stage, step), step > 0);
        }
        ptx::wgmma_commit_group();
    }
    __device__ __forceinline__ static void fence(Registers &s) { ptx::fence_registers(s); }
};

}  // namespace fp
