// fp8 with float16 probabilities (FLASHPREFILL_PROBABILITIES_FP16): each V tile widened to float16 in shared
// memory, for a P.V wgmma at the 16-bit rate that takes P as float16 (11 significant bits instead of e4m3's 4).
//
// TMA stores an fp8 V tile as kBlockN key rows of 128 bytes (the dims) under the 128-byte swizzle. The f16 wgmma
// reads B MN-major (dims contiguous), as the bf16 kernel's V is stored: two column chunks of 64 dims, each
// kBlockN key rows of 128 bytes, swizzled likewise. Widening keeps the rows and turns each 16-byte piece of 16
// dims into 32 bytes: thread t of the warpgroup takes key row t and its 8 pieces in turn, each one 16-byte load,
// 8 cvt.f16x2.e4m3x2 (exact: every e4m3 value is a float16) and two 16-byte stores. Any 8 consecutive rows put
// a piece in 8 different 16-byte chunks of the 128-byte line (the swizzle XORs the chunk with row % 8), so a
// warp's loads and stores are free of bank conflicts.
#pragma once

#include <cstdint>

#include "fwd/descriptors.cuh"
#include "ptx.cuh"

namespace fp {

template <class Config>
__device__ __forceinline__ void widen_v_tile_fp8(uint32_t v_tile, uint32_t vw_tile, uint32_t row)
{
    static_assert(Config::kIsFp8 && Config::kHeadDimV == 128 && Config::kSwizzleV == 128,
                  "one 128-byte row of fp8 V per key");
    static_assert(Config::kBlockN == 128, "one key row per thread of the warpgroup");
    constexpr int kPieces = 128 / 16;                  // 16-byte pieces of fp8 per row
    constexpr uint32_t kChunkBytes = Config::kBlockN * 128;  // one float16 column chunk: 64 dims x kBlockN keys
#pragma unroll
    for (int piece = 0; piece < kPieces; ++piece) {
        uint32_t codes[4];
        ptx::ld_shared_v4(v_tile + sw128_offset(row, 16 * piece), codes);
        uint32_t lo[4], hi[4];  // dims 16 piece + 0..7, + 8..15
#pragma unroll
        for (int w = 0; w < 2; ++w) {
            lo[2 * w] = ptx::cvt_rn_f16x2_e4m3x2(static_cast<uint16_t>(codes[w]));
            lo[2 * w + 1] = ptx::cvt_rn_f16x2_e4m3x2(static_cast<uint16_t>(codes[w] >> 16));
            hi[2 * w] = ptx::cvt_rn_f16x2_e4m3x2(static_cast<uint16_t>(codes[w + 2]));
            hi[2 * w + 1] = ptx::cvt_rn_f16x2_e4m3x2(static_cast<uint16_t>(codes[w + 2] >> 16));
        }
        const uint32_t chunk = vw_tile + piece / 4 * kChunkBytes;  // dims 16 piece .. are bytes 32 (piece % 4) ..
        ptx::st_shared_v4(chunk + sw128_offset(row, 32 * (piece % 4)), lo);
        ptx::st_shared_v4(chunk + sw128_offset(row, 32 * (piece % 4) + 16), hi);
    }
}

}  // namespace fp
