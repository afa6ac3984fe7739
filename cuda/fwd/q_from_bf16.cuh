// bf16 q against an fp8 k and v: each consumer warpgroup turns its 64 rows of q, loaded by TMA as bf16 (ss.q_bf16),
// into e4m3 codes in ss.q, where S = Q K^T reads them as it reads fp8 q, so that no pass over q precedes the call.
// Per row: optionally rotated, y = H diag(signs) x with H the orthonormal Sylvester Hadamard matrix (the rotation
// flashprefill_quantize gives k, so q.k is unchanged), in float32; then codes = e4m3(y / 2^e), e the smallest integer
// with max |y| <= code_max 2^e over the warpgroup's 64 rows (code_max: 448, or the float16 scores' bound), and the
// scores' scale times 2^e. A non-finite y becomes the NaN code (its row is NaN, as the NaN rule has it).
//
// Thread t of the warpgroup holds row t / 2, dims 64 (t % 2) .. 64 (t % 2) + 63: the Hadamard's six butterfly stages
// within a half run in registers, the seventh (dims d and d + 64) between the two threads of a row.
#pragma once

#include <cmath>
#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/smem.cuh"
#include "ptx.cuh"

namespace fp {

template <class Config>
__device__ __forceinline__ int q_codes_from_bf16(const FwdArgs &args, FwdSharedStorage<Config> &ss,
                                                 int consumer_index, uint32_t thread, uint32_t barrier)
{
    static_assert(Config::kHeadDimQk == 128 && Config::kSwizzleQk == 128 && Config::kQkChunks == 1,
                  "q rounded in the kernel at dim_qk 128: one 128-byte row of codes, two 128-byte rows of bf16");
    constexpr int kHalf = 64;  // dims a thread holds
    const uint32_t row = consumer_index * Config::kRowsPerWarpgroup + thread / 2, half = thread % 2;

    // The bf16 tile is two column chunks (dims 0-63, 64-127) of 128 rows x 128 bytes, 16-byte pieces swizzled.
    float y[kHalf];
    const uint32_t src = ptx::smem_addr(ss.q_bf16) + half * Config::kBlockM * 128 + row * 128;
#pragma unroll
    for (uint32_t piece = 0; piece < 8; ++piece) {
        uint32_t w[4];
        ptx::ld_shared_v4(src + ((piece ^ (row % 8)) * 16), w);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            y[8 * piece + 2 * i] = __uint_as_float(w[i] << 16);
            y[8 * piece + 2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
    if (args.q_rotation_signs != nullptr) {
        const float *signs = args.q_rotation_signs + kHalf * half;
#pragma unroll
        for (int d = 0; d < kHalf; ++d)
            y[d] *= __ldg(signs + d);
#pragma unroll
        for (int h = 1; h < kHalf; h *= 2)
#pragma unroll
            for (int d = 0; d < kHalf; ++d)
                if ((d & h) == 0) {
                    const float a = y[d], b = y[d + h];
                    y[d] = a + b;
                    y[d + h] = a - b;
                }
        const float norm = 0.08838834764831845f;  // 1 / sqrt(128)
#pragma unroll
        for (int d = 0; d < kHalf; ++d) {
            const float other = __shfl_xor_sync(0xffffffffu, y[d], 1);
            y[d] = (half == 0 ? y[d] + other : other - y[d]) * norm;
        }
    }

    // max |y| over the warpgroup: the warp's, then the four warps' through shared memory
    float amax = 0.0f;
#pragma unroll
    for (int d = 0; d < kHalf; ++d)
        amax = ptx::max_nan_f32(amax, fabsf(y[d]));
#pragma unroll
    for (int d = 16; d > 0; d /= 2)
        amax = ptx::max_nan_f32(amax, __shfl_xor_sync(0xffffffffu, amax, d));
    const uint32_t warp = thread / 32;
    if (thread % 32 == 0)
        ss.q_amax[consumer_index][warp] = amax;
    ptx::bar_sync(barrier, 128);
    amax = ptx::max_nan_f32(ptx::max_nan_f32(ss.q_amax[consumer_index][0], ss.q_amax[consumer_index][1]),
                            ptx::max_nan_f32(ss.q_amax[consumer_index][2], ss.q_amax[consumer_index][3]));

    // e: amax = f 2^k, code_max = g 2^c, f and g in [0.5, 1): amax <= code_max 2^e  <=>  e >= k - c + (f > g); 0 where
    // amax is 0, inf or NaN
    int e = 0;
    if (isfinite(amax) && amax > 0.0f) {
        int k, c;
        const float f = frexpf(amax, &k), g = frexpf(Config::kQCodeMax, &c);
        e = k - c + (f > g);
    }
    const float unit = ldexpf(1.0f, -e);
    uint32_t codes[kHalf / 4];
#pragma unroll
    for (int j = 0; j < kHalf / 4; ++j) {
        uint32_t word = 0;
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const float lo = y[4 * j + 2 * p], hi = y[4 * j + 2 * p + 1];
            uint32_t pair = ptx::cvt_rn_satfinite_e4m3x2_f32(lo * unit, hi * unit);
            pair = isfinite(lo) ? pair : (pair & 0xff00u) | 0x7fu;  // satfinite makes inf 448: NaN instead
            pair = isfinite(hi) ? pair : (pair & 0x00ffu) | 0x7f00u;
            word |= pair << (16 * p);
        }
        codes[j] = word;
    }
    // 64 codes: pieces 4 half .. 4 half + 3 of the row's 128 bytes, swizzled
    const uint32_t dst = ptx::smem_addr(ss.q) + row * 128;
#pragma unroll
    for (uint32_t piece = 0; piece < 4; ++piece) {
        const uint32_t w[4] = {codes[4 * piece], codes[4 * piece + 1], codes[4 * piece + 2], codes[4 * piece + 3]};
        ptx::st_shared_v4(dst + (((4 * half + piece) ^ (row % 8)) * 16), w);
    }
    ptx::bar_sync(barrier, 128);  // every row's codes before any thread's ldmatrix reads them
    return e;
}

}  // namespace fp
