// Softmax policies whose probabilities are e4m3 codes, computed exp-free (expfree.cuh), for P.V at the fp8 rate:
//   CodesSoftmax:    from float32 scores; at 128 keys a tile straight into a second P buffer while P.V reads the
//                    first (Config::kPDoubleBuffered), at 192 prepared in place in S and packed after P.V's wait
//   F16CodesSoftmax: from float16 scores (f16_scores.cuh), in place, packed after P.V's wait
// P.V itself sums the quantized P (P times rows of ones: pv.cuh), so the rows' sums are whole, not a thread's part.
// The interface is softmax_exp2.cuh's.
#pragma once

#include <cstdint>

#include "fwd/expfree.cuh"
#include "fwd/f16_scores.cuh"
#include "fwd/mask.cuh"
#include "fwd/softmax.cuh"
#include "fwd/softmax_exp2.cuh"

namespace fp {

// P.V sums the rows of the quantized P whole.
struct CodesSoftmaxRows : SoftmaxRows {
    __device__ __forceinline__ float row_total(int h) const { return row_sum[h]; }
};

template <class Config>
struct CodesSoftmax : CodesSoftmaxRows {
    using Codes = ExpFree<Config::Input::kPOffsetLog2>;

    template <int kRegs, int kPRegs>
    __device__ __forceinline__ void step(const TileMask<Config::kBlockN> &mask, int it, float (&s)[kRegs],
                                         float scale_log2, float (&rescale)[2], uint32_t (&p_new)[kPRegs])
    {
        mask.apply(s, it);
        float max_used[2];
        this->online_max.update(s, scale_log2, rescale, max_used);
        float row_constant[2];
        Codes::row_constants(max_used, row_constant);
        const float multiplier = Codes::score_multiplier(scale_log2);
#pragma unroll
        for (int step = 0; step < kPRegs / 4; ++step) {
            if constexpr (Config::kPDoubleBuffered)
                Codes::pack_step(s, multiplier, row_constant, step, p_new);
            else
                Codes::prepare_step(s, multiplier, row_constant, step);
        }
    }
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ void pack(const float (&s)[kRegs], uint32_t (&p)[kPRegs]) const
    {
        if constexpr (!Config::kPDoubleBuffered) {
#pragma unroll
            for (int step = 0; step < kPRegs / 4; ++step) {
                float y[16];
#pragma unroll
                for (int e = 0; e < 16; ++e)
                    y[e] = s[16 * step + e];
                Codes::pack(y, step, p);
            }
        }
    }
};

template <class Config>
struct F16CodesSoftmax : CodesSoftmaxRows {
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ void step(const TileMask<Config::kBlockN> &mask, int it, uint32_t (&s16)[kRegs],
                                         float scale_log2, float (&rescale)[2], uint32_t (&)[kPRegs])
    {
        mask.apply(s16, it);
        float thread_max[2], max_used[2], tile_max[2];
        thread_max_f16x2(s16, thread_max);
        this->online_max.update_from_thread_max(thread_max, scale_log2, rescale, max_used, tile_max);
        encode_f16x2<Config::Input::kPOffsetLog2>(s16, scale_log2, tile_max, max_used);
    }
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ void pack(const uint32_t (&s16)[kRegs], uint32_t (&p)[kPRegs]) const
    {
#pragma unroll
        for (int step = 0; step < kPRegs / 4; ++step)
            pack_codes_f16x2(s16, step, p);
    }
};

}  // namespace fp
