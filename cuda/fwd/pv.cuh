// O += P V: the P.V policies. Each holds O's accumulator (rescaled between tiles), issues a tile's P.V from P's A
// fragments and the descriptors of the V slot (PvDescriptors, carried by the main loop), and says which barriers
// guard that slot.
//   Bf16Pv:  bf16 P, V as loaded (MN-major)
//   F16Pv:   float16 P, V widened to float16 by the converter (MN-major)
//   CodesPv: e4m3 codes, V^T by the converter or prepared (K-major), with rows of ones below (vt_layout.cuh) that
//            give P's row sums as quantized, in 4 more accumulators
#pragma once

#include <cstdint>

#include "fwd/descriptors.cuh"
#include "fwd/smem.cuh"
#include "fwd/softmax.cuh"
#include "fwd/vt_layout.cuh"
#include "ptx.cuh"

namespace fp {

template <class Config, int kSumRegs>
struct PvAccumulator {
    static constexpr int kPvSteps = Config::kBlockN / Config::kPvMmaK;
    static constexpr int kPRegs = 4 * kPvSteps;  // A fragments of P for one KV tile
    static constexpr int kORegs = kAccRegs + kSumRegs;
    float o[kORegs];

    __device__ __forceinline__ PvAccumulator()
    {
#pragma unroll
        for (int e = 0; e < kORegs; ++e)
            o[e] = 0.0f;
    }
    // O to the new max and the next v block's unit (2^unit_shift), before the next P.V accumulates into it; the
    // warp skips the multiply when neither moved (the common case).
    __device__ __forceinline__ void rescale(const float (&rescale)[2], int unit_shift)
    {
        float factor[2] = {rescale[0], rescale[1]};
        if (unit_shift != 0) {
            factor[0] = ldexpf(factor[0], unit_shift);
            factor[1] = ldexpf(factor[1], unit_shift);
        }
        if (!__any_sync(0xffffffffu, factor[0] != 1.0f || factor[1] != 1.0f))
            return;
#pragma unroll
        for (int e = 0; e < kAccRegs; ++e)
            o[e] *= factor[acc_half(e)];
    }
    // The row sums P.V adds (none here: the softmax keeps them).
    __device__ __forceinline__ void add_tile_sums(float (&)[2], const float (&)[2]) {}
    __device__ __forceinline__ void add_last_sums(float (&)[2]) {}
};

// The descriptors of the V slot whose P.V is next: V's (V^T's positions 0-127) and, at 192 keys, those of V^T's
// positions 128-191.
struct PvDescriptors {
    uint64_t main, tail;
    // From slot `from` to slot `to` of a ring of kSlotBytes slots: derived from the slot index each tile, ptxas
    // rebuilt the shared-window base (S2UR and ~14 dependent instructions) inside the turn window.
    template <int32_t kSlotBytes>
    __device__ __forceinline__ void move(int from, int to)
    {
        main = wgmma_desc_move(main, (to - from) * kSlotBytes);
        tail = wgmma_desc_move(tail, (to - from) * kSlotBytes);
    }
};

template <class Config>
struct Bf16Pv : PvAccumulator<Config, 0> {
    using Base = PvAccumulator<Config, 0>;
    static constexpr int32_t kSlotBytes = Config::kTileVBytes;
    __device__ __forceinline__ explicit Bf16Pv(FwdSharedStorage<Config> &) {}
    __device__ __forceinline__ static uint64_t *full(FwdSharedStorage<Config> &ss, int stage)
    {
        return &ss.v_full[stage];
    }
    __device__ __forceinline__ static uint64_t *empty(FwdSharedStorage<Config> &ss, int stage)
    {
        return &ss.v_empty[stage];
    }
    __device__ __forceinline__ void issue(const PvDescriptors &d, const uint32_t (&p)[Base::kPRegs])
    {
#pragma unroll
        for (int step = 0; step < this->kPvSteps; ++step) {
            const uint32_t a[4] = {p[4 * step], p[4 * step + 1], p[4 * step + 2], p[4 * step + 3]};
            const uint64_t desc_v = wgmma_desc_advance(d.main, step * Config::Input::kMmaK * Config::kSwizzleV);
            ptx::wgmma_m64n128k16_f32_bf16_rs<1>(this->o, a, desc_v, 1);
        }
    }
};

template <class Config>
struct F16Pv : PvAccumulator<Config, 0> {
    using Base = PvAccumulator<Config, 0>;
    static constexpr int32_t kSlotBytes = Config::kTileVtBytes;
    __device__ __forceinline__ explicit F16Pv(FwdSharedStorage<Config> &) {}
    __device__ __forceinline__ static uint64_t *full(FwdSharedStorage<Config> &ss, int stage)
    {
        return &ss.vt_full[stage];
    }
    __device__ __forceinline__ static uint64_t *empty(FwdSharedStorage<Config> &ss, int stage)
    {
        return &ss.vt_empty[stage];
    }
    __device__ __forceinline__ void issue(const PvDescriptors &d, const uint32_t (&p)[Base::kPRegs])
    {
#pragma unroll
        for (int step = 0; step < this->kPvSteps; ++step) {
            const uint32_t a[4] = {p[4 * step], p[4 * step + 1], p[4 * step + 2], p[4 * step + 3]};
            const uint64_t desc_v = wgmma_desc_advance(d.main, step * 16 * 128);  // 16 key rows of 128 bytes
            ptx::wgmma_m64n128k16_f32_f16_rs_mn(this->o, a, desc_v, 1);
        }
    }
};

// O's accumulators 64-67 hold columns 128-135 of P.V's m64n136 (or of the m64n8 beside it): elements 64, 65 of
// half 0, 66, 67 of half 1, the tile's row sums of the quantized P. Those start afresh every tile and are added to
// the row sums in float32: the fp8 wgmma accumulator keeps too few bits to carry a sum over thousands of keys.
template <class Config>
struct CodesPv : PvAccumulator<Config, 4> {
    using Base = PvAccumulator<Config, 4>;
    using Layout = VtLayout<Config::kBlockN>;
    static constexpr int32_t kSlotBytes = Config::kTileVtBytes;
    static constexpr int kStepBytes = 32;  // keys per wgmma, one byte each
    uint64_t ones_desc;  // 128 keys: stage 0's rows of ones (any 8 rows of ones will do), for the m64n8 wgmma

    __device__ __forceinline__ explicit CodesPv(FwdSharedStorage<Config> &ss)
        : ones_desc(wgmma_desc_sw128(ptx::smem_addr(ss.vt[0]) + Layout::kMainBytes, 16))
    {
    }
    __device__ __forceinline__ static uint64_t *full(FwdSharedStorage<Config> &ss, int stage)
    {
        return &ss.vt_full[stage];
    }
    __device__ __forceinline__ static uint64_t *empty(FwdSharedStorage<Config> &ss, int stage)
    {
        return &ss.vt_empty[stage];
    }
    __device__ __forceinline__ void issue(const PvDescriptors &d, const uint32_t (&p)[Base::kPRegs])
    {
        constexpr int kMainSteps = 128 / Config::kPvMmaK;
#pragma unroll
        for (int step = 0; step < this->kPvSteps; ++step) {
            const uint32_t a[4] = {p[4 * step], p[4 * step + 1], p[4 * step + 2], p[4 * step + 3]};
            const uint64_t desc_v = step < kMainSteps ? wgmma_desc_advance(d.main, step * kStepBytes)
                                                      : wgmma_desc_advance(d.tail, (step - kMainSteps) * kStepBytes);
            if constexpr (Config::kSumsInPv) {
                ptx::wgmma_m64n136k32_f32_e4m3_rs(this->o, a, desc_v, 1);
            } else {
                ptx::wgmma_m64n128k32_f32_e4m3_rs(reinterpret_cast<float(&)[kAccRegs]>(this->o), a, desc_v, 1);
                ptx::wgmma_m64n8k32_f32_e4m3_rs(reinterpret_cast<float(&)[4]>(this->o[kAccRegs]), a, ones_desc,
                                                step > 0);
            }
        }
    }
    // After P(n-1) V(n-1): that tile's row sums, moved to the new max. Where P.V computes them in its m64n136 their
    // accumulators are cleared for the next tile by a multiply by 0 (the sums are finite): an overwrite by 0 made
    // ptxas serialize the wgmma. The m64n8 wgmma starts each tile afresh itself.
    __device__ __forceinline__ void add_tile_sums(float (&row_sum)[2], const float (&rescale)[2])
    {
#pragma unroll
        for (int h = 0; h < 2; ++h)
            row_sum[h] = (row_sum[h] + this->o[kAccRegs + 2 * h]) * rescale[h];
        if constexpr (Config::kSumsInPv) {
#pragma unroll
            for (int e = kAccRegs; e < Base::kORegs; ++e)
                this->o[e] *= 0.0f;
        }
    }
    __device__ __forceinline__ void add_last_sums(float (&row_sum)[2])
    {
#pragma unroll
        for (int h = 0; h < 2; ++h)
            row_sum[h] += this->o[kAccRegs + 2 * h];
    }
};

}  // namespace fp
