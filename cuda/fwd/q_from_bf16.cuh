// bf16 q against an fp8 k and v: each consumer warpgroup turns its 64 rows of q, loaded by TMA as bf16 (ss.q_bf16),
// into the e4m3 codes of its Q fragments (the A operand of S = Q K^T), so that no pass over q precedes the call.
// Per row: optionally rotated, y = H diag(signs) x with H the orthonormal Sylvester Hadamard matrix (the rotation
// flashprefill_quantize gives k, so q.k is unchanged); then codes = e4m3(y / 2^e), e the smallest integer with
// max |y| <= code_max 2^e over the warpgroup's 64 rows (code_max: 448, or the float16 scores' bound), and the
// scores' scale times 2^e. A non-finite y becomes the NaN code (its row is NaN, as the NaN rule has it).
//
// The rotation runs on the tensor cores. With H128 = [[H64, H64], [H64, -H64]] / sqrt(128) and x_h the dims
// 64h .. 64h + 63 of a row, Z_h = x_h diag(signs_h) H64 is one m64n64k64 bf16 GEMM (weights of +-1, exact; float32
// sums), and y = (Z_0 + Z_1, Z_0 - Z_1) / sqrt(128). The GEMM's B (ss.q_rotation, written once per CTA) has its
// columns permuted so that the dims a thread's accumulators hold are those of its A fragments: the codes go from
// accumulators to fragments within each thread. Without a rotation B is that permutation of the identity, y = Z.
#pragma once

#include <cmath>
#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/descriptors.cuh"
#include "fwd/smem.cuh"
#include "ptx.cuh"

namespace fp {

// The dim (0-63, within a half) that column `col` of an m64n64 accumulator holds: thread t's columns
// 8j + 2 (t % 4) + b (j < 8, b < 2), its accumulator a = 2j + b, become its fragment bytes in K-step order, dims
// 32 (a / 8) + 16 (a / 4 % 2) + 4 (t % 4) + a % 4 (an e4m3 A fragment's bytes: 4 (t % 4) .. + 3 and 16 + those).
__host__ __device__ constexpr uint32_t q_rotation_dim(uint32_t col)
{
    const uint32_t quad = col % 8 / 2, a = 2 * (col / 8) + col % 2;
    return 32 * (a / 8) + 16 * (a / 4 % 2) + 4 * quad + a % 4;
}

// B of both halves' GEMMs, by every thread of the CTA once: row n (the output column), column k (the input dim)
// holds signs[64 h + k] (-1)^popcount(q_rotation_dim(n) & k), or (k == q_rotation_dim(n)) without a rotation; bf16,
// 128-byte rows swizzled as TMA stores them (K-major B).
template <class Config>
__device__ __forceinline__ void write_q_rotation(const FwdArgs &args, FwdSharedStorage<Config> &ss)
{
    static_assert(sizeof(ss.q_rotation) == 2 * 64 * 128, "two 64 x 64 bf16 matrices");
    constexpr uint32_t kOne = 0x3f80u, kSign = 0x8000u;  // bf16 1.0, its sign bit
    constexpr uint32_t kWords = 2 * 64 * 32;             // two halves x 64 rows x 32 pairs of dims
    for (uint32_t i = threadIdx.x; i < kWords; i += Config::kThreads) {
        const uint32_t half = i / (64 * 32), n = i / 32 % 64, k = 2 * (i % 32), dim = q_rotation_dim(n);
        uint32_t word = 0;
#pragma unroll
        for (uint32_t b = 0; b < 2; ++b) {
            uint32_t entry;
            if (args.q_rotation_signs != nullptr) {  // signs of +-1: only their sign bits are read
                const uint32_t sign = __float_as_uint(__ldg(args.q_rotation_signs + 64 * half + k + b)) >> 16;
                entry = kOne | ((sign ^ (__popc(dim & (k + b)) << 15)) & kSign);
            } else {
                entry = k + b == dim ? kOne : 0u;
            }
            word |= entry << (16 * b);
        }
        ptx::st_shared_b32(ptx::smem_addr(ss.q_rotation) + half * 64 * 128 + sw128_offset(n, 2 * k), word);
    }
}

// This warpgroup's 64 rows of q as e4m3 codes in q_frag (K step s, register r: rows r % 2 ? 8 : 0 past the thread's
// first, dims 32 s + 16 (r / 2) + 4 (lane % 4) .. + 3); returns e. amax_slot: the warpgroup's four warps' maxima in
// shared memory (this item's; the last item's may still be read).
template <class Config, class QFragments>
__device__ __forceinline__ int q_codes_from_bf16(const FwdArgs &args, FwdSharedStorage<Config> &ss,
                                                 QFragments &q_frag, int consumer_index, uint32_t thread,
                                                 float (&amax_slot)[4], uint32_t barrier)
{
    static_assert(Config::kHeadDimQk == 128 && Config::kSwizzleQk == 128 && Config::kQkChunks == 1 &&
                      Config::kQInRegisters,
                  "q rounded in the kernel at dim_qk 128: two 128-byte rows of bf16 into Q's registers");
    // Z_h: 4 K steps of 16 dims over chunk h of the bf16 tile (A, K-major) and B_h
    float z[2][32];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 32; ++i)
            z[h][i] = 0.0f;
    ptx::wgmma_fence();
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h) {
        const uint64_t a_desc = wgmma_desc_sw128(
            ptx::smem_addr(ss.q_bf16) + h * Config::kBlockM * 128 + consumer_index * Config::kRowsPerWarpgroup * 128,
            16);
        const uint64_t b_desc = wgmma_desc_sw128(ptx::smem_addr(ss.q_rotation) + h * 64 * 128, 16);
#pragma unroll
        for (uint32_t step = 0; step < 4; ++step)
            ptx::wgmma_m64n64k16_f32_bf16_ss(z[h], wgmma_desc_advance(a_desc, 32 * step),
                                             wgmma_desc_advance(b_desc, 32 * step), step > 0);
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_registers(z[0]);
    ptx::fence_registers(z[1]);

    // y: (Z_0 + Z_1, Z_0 - Z_1) rotated (1 / sqrt(128) goes onto the codes' unit: a rounding of the max commutes
    // with it), else (Z_0, Z_1)
    float norm = 1.0f;
    if (args.q_rotation_signs != nullptr) {
        norm = 0.08838834764831845f;  // 1 / sqrt(128)
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const float a = z[0][i], b = z[1][i];
            z[0][i] = a + b;
            z[1][i] = a - b;
        }
    }

    // max |y| over the warpgroup: a tree over the thread's 64, the warp's, then the four warps' through shared memory
    float m[32];
#pragma unroll
    for (int i = 0; i < 32; ++i)
        m[i] = ptx::max_nan_f32(fabsf(z[0][i]), fabsf(z[1][i]));
#pragma unroll
    for (int level = 0; level < 5; ++level)
#pragma unroll
        for (int i = 0; i < 16; ++i)
            if (i < 16 >> level)
                m[i] = ptx::max_nan_f32(m[i], m[i + (16 >> level)]);
    float amax = m[0] * norm;
#pragma unroll
    for (int d = 16; d > 0; d /= 2)
        amax = ptx::max_nan_f32(amax, __shfl_xor_sync(0xffffffffu, amax, d));
    const uint32_t warp = thread / 32;
    if (thread % 32 == 0)
        amax_slot[warp] = amax;
    ptx::bar_sync(barrier, 128);
    amax = ptx::max_nan_f32(ptx::max_nan_f32(amax_slot[0], amax_slot[1]), ptx::max_nan_f32(amax_slot[2], amax_slot[3]));

    // e: amax = f 2^k, code_max = g 2^c, f and g in [0.5, 1): amax <= code_max 2^e  <=>  e >= k - c + (f > g); 0 where
    // amax is 0, inf or NaN
    int e = 0;
    if (isfinite(amax) && amax > 0.0f) {
        int k, c;
        const float f = frexpf(amax, &k), g = frexpf(Config::kQCodeMax, &c);
        e = k - c + (f > g);
    }
    const float unit = ldexpf(norm, -e);  // exact: norm times a power of two
    // Fragment (K step 2h + s, register r): half h, accumulators 4j + 2 (r % 2) + b with j = 4s + 2 (r / 2), its
    // bytes (j, b = 0), (j, 1), (j + 1, 0), (j + 1, 1).
    auto code_pair = [&](float lo, float hi) {
        uint32_t pair = ptx::cvt_rn_satfinite_e4m3x2_f32(lo * unit, hi * unit);
        pair = isfinite(lo) ? pair : (pair & 0xff00u) | 0x7fu;  // satfinite makes inf 448: NaN instead
        return isfinite(hi) ? pair : (pair & 0x00ffu) | 0x7f00u;
    };
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int j = 4 * s + 2 * (r / 2), i = 4 * j + 2 * (r % 2);
                q_frag[2 * h + s][r] = code_pair(z[h][i], z[h][i + 1]) | code_pair(z[h][i + 4], z[h][i + 5]) << 16;
            }
    return e;
}

}  // namespace fp
