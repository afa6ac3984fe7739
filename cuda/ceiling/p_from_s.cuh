// The wgmma loop's stand-in for the softmax: P's A fragments are S itself, rounded to the input type, so that P.V
// depends on S as in attention (S(n) awaited, then P(n) packed) at the cost of a conversion, and the loop computes
// a GEMM chain a test can check: O = sum over the KV tiles of round(Q K^T) V.
#pragma once

#include <cstdint>

#include "ptx.cuh"

namespace fp {

// bf16: S's accumulator pairs are already in the A layout of a k16 wgmma (PTX ISA 9.7.15.5.1): pair i of S is
// register i of P, rounded to nearest even.
struct Bf16PFromS {
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ static void pack(const float (&s)[kRegs], uint32_t (&p)[kPRegs])
    {
        static_assert(2 * kPRegs == kRegs, "one bf16 pair of P per two accumulators of S");
#pragma unroll
        for (int i = 0; i < kPRegs; ++i)
            p[i] = ptx::cvt_rn_bf16x2_f32(s[2 * i], s[2 * i + 1]);
    }
};

// e4m3: each K step's 16 accumulators (32 keys) as the A fragment of a k32 wgmma, rounded to nearest even and
// saturated at 448, in the key order of V^T (prepare_v.cu, transpose_v.cuh): per 16-key group a thread's keys
// {2c, 2c+1, 2c+8, 2c+9}, i.e. its elements {0, 1, 4, 5} (row half 0), {2, 3, 6, 7} (half 1), then {8, 9, 12, 13}
// and {10, 11, 14, 15} for the group's second 16 keys. The byte order is ExpFree::pack's.
struct E4m3PFromS {
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ static void pack(const float (&s)[kRegs], uint32_t (&p)[kPRegs])
    {
        static_assert(4 * kPRegs == kRegs, "one e4m3 code of P per accumulator of S");
#pragma unroll
        for (int step = 0; step < kPRegs / 4; ++step) {
            uint32_t pair[8];  // codes of elements (2i, 2i + 1) in bytes 0 and 1
#pragma unroll
            for (int i = 0; i < 8; ++i)
                pair[i] = ptx::cvt_rn_satfinite_e4m3x2_f32(s[16 * step + 2 * i], s[16 * step + 2 * i + 1]);
            p[4 * step + 0] = ptx::prmt(pair[0], pair[2], 0x5410);
            p[4 * step + 1] = ptx::prmt(pair[1], pair[3], 0x5410);
            p[4 * step + 2] = ptx::prmt(pair[4], pair[6], 0x5410);
            p[4 * step + 3] = ptx::prmt(pair[5], pair[7], 0x5410);
        }
    }
};

}  // namespace fp
