// Exp-free FP8 probabilities (DESIGN.md "Exp-free FP8 probability"): the e4m3 code of each probability,
// computed by one FFMA instead of FFMA + MUFU.EX2 + conversion.
//
// For p' = 2^u (u = t - max + offset, t = score * scale_log2), the e4m3 code of a normal value is close to
// b = 8u + 56 - c (a linear mantissa, centred by c = 0.34 code steps). One FFMA with the magic constant
// 1.5 * 2^15 folded into the per-row constant puts round(b) into byte 1 of the float's bits (8 fraction bits
// below it; the + 0.5 turns the byte's truncation into rounding). An integer max with the magic's bits clamps
// codes below 0 (p' < 2^-7 once subnormal, p below 2^-15 of the row max) to code 0; codes 1-7 are kept and
// read as e4m3 subnormals (the "linear" rule of flashprefill.fp8). A byte permute packs four codes straight
// into the A fragment of the P.V wgmma. The numpy model, bit for bit: flashprefill.fp8.expfree_codes
// (code_byte=1, subnormal="linear"); worst relative error of one probability: 7.55%.
#pragma once

#include <cstdint>

#include "ptx.cuh"
#include "softmax.cuh"

namespace fp {

template <int kOffsetLog2>
struct ExpFree {
    static constexpr double kMagic = 1.5 * 32768.0;  // 1.5 * 2^15: its float32 ulp is 2^-8
    static constexpr double kC = 0.34;
    // The per-row constant before the row max: rounded once, as the model does.
    static constexpr float kRowBase = static_cast<float>(kMagic + 56.0 - kC + 8.0 * kOffsetLog2 + 0.5);
    static constexpr int32_t kMagicBits = 0x47400000;  // 1.5 * 2^15: sign 0, exponent 142, mantissa .5
    static_assert(8 * kOffsetLog2 + 56 <= 126, "the row max must stay below e4m3's largest code (448 = 0x7e)");

    // Per row: C = magic + 56 - c + 8 (offset - max) + 0.5, from the tile's max_used (OnlineMax).
    __device__ __forceinline__ static void row_constants(const float (&max_used)[2], float (&row_constant)[2])
    {
#pragma unroll
        for (int h = 0; h < 2; ++h)
            row_constant[h] = fmaf(-8.0f, max_used[h], kRowBase);
    }

    // The clamped FFMA result whose byte 1 is the code of p' for score s (scale8 = 8 * scale_log2).
    __device__ __forceinline__ static uint32_t code_word(float s, float scale8, float row_constant)
    {
        return static_cast<uint32_t>(max(__float_as_int(fmaf(s, scale8, row_constant)), kMagicBits));
    }

    // Byte 1 of each of a, b, c, d, in that order from the low byte.
    __device__ __forceinline__ static uint32_t pack_byte1(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
    {
        return ptx::prmt(ptx::prmt(a, b, 0x0051), ptx::prmt(c, d, 0x0051), 0x5410);
    }

    // The A fragments of P for one 128-key tile (4 wgmma K steps of 32), from the raw scores s. Keys are in
    // the order of fp8_transpose.cuh: per 16-column group, a thread's columns {2c, 2c+1, 2c+8, 2c+9}.
    __device__ __forceinline__ static void pack_p(const float (&s)[kAccRegs], float scale8,
                                                  const float (&row_constant)[2], uint32_t (&p)[16])
    {
#pragma unroll
        for (int step = 0; step < 4; ++step) {
            uint32_t w[16];
#pragma unroll
            for (int e = 0; e < 16; ++e)
                w[e] = code_word(s[16 * step + e], scale8, row_constant[acc_half(e)]);
            p[4 * step + 0] = pack_byte1(w[0], w[1], w[4], w[5]);
            p[4 * step + 1] = pack_byte1(w[2], w[3], w[6], w[7]);
            p[4 * step + 2] = pack_byte1(w[8], w[9], w[12], w[13]);
            p[4 * step + 3] = pack_byte1(w[10], w[11], w[14], w[15]);
        }
    }
};

// The MUFU path the exp-free codes replace, for the ablation (FP_ABLATE_EXPFREE): p' = ex2(s * scale_log2 -
// max + offset) rounded to e4m3 by cvt, packed in the same key order as ExpFree::pack_p.
template <int kOffsetLog2>
struct Exp2Codes {
    __device__ __forceinline__ static void pack_p(const float (&s)[kAccRegs], float scale_log2,
                                                  const float (&max_used)[2], uint32_t (&p)[16])
    {
        const float shift[2] = {max_used[0] - kOffsetLog2, max_used[1] - kOffsetLog2};
#pragma unroll
        for (int step = 0; step < 4; ++step) {
            float v[16];
#pragma unroll
            for (int e = 0; e < 16; ++e)
                v[e] = ptx::ex2_approx_ftz(fmaf(s[16 * step + e], scale_log2, -shift[acc_half(e)]));
            auto pack = [&](int a, int b, int c, int d) {
                return static_cast<uint32_t>(ptx::cvt_rn_satfinite_e4m3x2_f32(v[a], v[b])) |
                       static_cast<uint32_t>(ptx::cvt_rn_satfinite_e4m3x2_f32(v[c], v[d])) << 16;
            };
            p[4 * step + 0] = pack(0, 1, 4, 5);
            p[4 * step + 1] = pack(2, 3, 6, 7);
            p[4 * step + 2] = pack(8, 9, 12, 13);
            p[4 * step + 3] = pack(10, 11, 14, 15);
        }
    }
};

}  // namespace fp
