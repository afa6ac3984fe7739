// Exp-free FP8 probabilities: the e4m3 code of each probability, computed by one FFMA and half a conversion instead
// of FFMA + MUFU.EX2 + conversion (the MUFU pipe, 16 a clock and SM, limits the softmax otherwise).
//
// For p' = 2^u (u = t - max + offset, t = score * scale_log2), the e4m3 code of a normal value is close to
// b = 8u + 56 - c (a linear mantissa, centred by c = 0.34 code steps). One FFMA computes y = b * 2^-24 (all its
// constants carry the 2^-24, which scales the float32 rounding exactly); cvt.rn.relu.f16x2.f32 then rounds two
// such y to float16 subnormals, whose bits are round(b) (ties to even), or 0 where b < 0 (relu). A float16
// subnormal holds up to 1023, and b <= 120.5. So the code is the low byte of each half, and one byte
// permute packs four codes, two halves from each of two conversions, straight into the A fragment of the
// P.V wgmma: per four probabilities 4 FFMA + 2 F2FP + 1 PRMT (the gfx950 kernel does the same with v_cvt_pk_f16_f32
// and clamp). Codes below 0
// (p' < 2^-7 once subnormal, p below 2^-15 of the row max) become code 0; codes 1-7 are kept and read as e4m3
// subnormals (the "linear" rule of flashprefill.fp8). The numpy model, bit for bit:
// flashprefill.fp8.expfree_codes(encoder="f16"); worst relative error of one probability: 7.55%.
#pragma once

#include <cstdint>

#include "ptx.cuh"
#include "fwd/softmax.cuh"

namespace fp {

// The per-step operations of an encoder E (ExpFree), each a value E::prepared(s, a, b[half]) of a raw
// score and E::pack of a step's 16 prepared values into the A fragment of P.V.
template <class E>
struct StepEncoder {
    // Step `step`'s codes straight from the raw scores s (into a buffer that no running wgmma reads).
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ static void pack_step(const float (&s)[kRegs], float a, const float (&b)[2], int step,
                                                     uint32_t (&p)[kPRegs])
    {
        float y[16];
#pragma unroll
        for (int e = 0; e < 16; ++e)
            y[e] = E::prepared(s[16 * step + e], a, b[acc_half(e)]);
        E::pack(y, step, p);
    }

    // Step `step`'s raw scores into their prepared values in place, for E::pack once P's registers are free.
    template <int kRegs>
    __device__ __forceinline__ static void prepare_step(float (&s)[kRegs], float a, const float (&b)[2], int step)
    {
#pragma unroll
        for (int e = 0; e < 16; ++e)
            s[16 * step + e] = E::prepared(s[16 * step + e], a, b[acc_half(e)]);
    }
};

// prepared(s, multiplier, row_constant); pack_step and prepare_step take (multiplier, row_constant).
template <int kOffsetLog2>
struct ExpFree : StepEncoder<ExpFree<kOffsetLog2>> {
    static constexpr double kC = 0.34;
    static constexpr float kCodeUnit = 0x1p-24f;  // one code step as a float16 subnormal
    // The per-row constant before the row max: K = f32(56 - c + 8 offset), as the model rounds it.
    static constexpr float kRowBase = static_cast<float>(56.0 - kC + 8.0 * kOffsetLog2);
    static_assert(8 * kOffsetLog2 + 56 <= 126, "the row max must stay below e4m3's largest code (448 = 0x7e)");

    // Per row: C = (K - 8 max) 2^-24, from the tile's max_used (OnlineMax).
    __device__ __forceinline__ static void row_constants(const float (&max_used)[2], float (&row_constant)[2])
    {
#pragma unroll
        for (int h = 0; h < 2; ++h)
            row_constant[h] = fmaf(-8.0f * kCodeUnit, max_used[h], kRowBase * kCodeUnit);
    }

    // The multiplier of the raw scores: 8 scale_log2 code steps per unit of log2.
    __device__ __forceinline__ static float score_multiplier(float scale_log2)
    {
        return scale_log2 * (8.0f * kCodeUnit);
    }

    // The value whose float16 rounding is a probability's code: y = b 2^-24, one FFMA of the raw score.
    __device__ __forceinline__ static float prepared(float s, float multiplier, float row_constant)
    {
        return fmaf(s, multiplier, row_constant);
    }

    // The A fragment of P for K step `step` (32 keys) from the prepared values y of the step's 16 accumulator
    // elements (16 step .. 16 step + 15). Keys are in the order of transpose_v.cuh: per 16-column group, a
    // thread's columns {2c, 2c+1, 2c+8, 2c+9}.
    template <int kPRegs>
    __device__ __forceinline__ static void pack(const float (&y)[16], int step, uint32_t (&p)[kPRegs])
    {
        uint32_t pair[8];  // codes of elements (2i, 2i + 1): `lo` in bits 0-7, `hi` in bits 16-23, zeros between
#pragma unroll
        for (int i = 0; i < 8; ++i)
            pair[i] = ptx::cvt_rn_relu_f16x2_f32(y[2 * i], y[2 * i + 1]);
        // bytes 0 and 2 of each of two pairs: elements {0, 1, 4, 5}, {2, 3, 6, 7}, {8, 9, 12, 13}, ...
        p[4 * step + 0] = ptx::prmt(pair[0], pair[2], 0x6420);
        p[4 * step + 1] = ptx::prmt(pair[1], pair[3], 0x6420);
        p[4 * step + 2] = ptx::prmt(pair[4], pair[6], 0x6420);
        p[4 * step + 3] = ptx::prmt(pair[5], pair[7], 0x6420);
    }
};

}  // namespace fp
