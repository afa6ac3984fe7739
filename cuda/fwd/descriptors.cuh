// wgmma shared-memory matrix descriptors and the TMA swizzle they describe.
#pragma once

#include <cstdint>

namespace fp {

// A wgmma shared-memory matrix descriptor (PTX ISA 9.7.15.5.1) for an operand in rows of kSwizzle (128 or 64)
// bytes, swizzled as TMA's SWIZZLE_128B / _64B store them:
//   K-major (rows along K):   lbo unused, sbo = 8 rows (the next group of 8 rows).
//   MN-major (rows along MN): lbo = bytes to the next column chunk of MN, sbo = 8 rows along K.
template <int kSwizzle>
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t smem_addr, uint32_t lbo_bytes)
{
    static_assert(kSwizzle == 128 || kSwizzle == 64, "128- or 64-byte swizzle");
    constexpr uint64_t kSbo = 8 * kSwizzle;
    constexpr uint64_t kLayout = kSwizzle == 128 ? 1 : 2;  // SWIZZLE_128B, SWIZZLE_64B
    return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
           ((kSbo >> 4) << 32) | (kLayout << 62);
}
// The descriptor of the operand `bytes` further on. The start address field (bits 0-13) holds address / 16 of a
// shared-memory address below 2^18, so the sum never carries out of it: one 32-bit add on the low word, and
// each tile's descriptors come from one computed before the loop.
__device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes)
{
    const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4), hi = static_cast<uint32_t>(desc >> 32);
    return static_cast<uint64_t>(hi) << 32 | lo;
}
// The same by a signed distance (a ring's wrap-around moves back).
__device__ __forceinline__ uint64_t wgmma_desc_move(uint64_t desc, int32_t bytes)
{
    const uint32_t lo = static_cast<uint32_t>(desc) + static_cast<uint32_t>(bytes >> 4);
    return (desc >> 32) << 32 | lo;
}
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes)
{
    return wgmma_desc<128>(smem_addr, lbo_bytes);
}

// Byte offset of (row, byte column) in a tile of kSwizzle-byte rows as TMA swizzles it: address bits 4-6 (128)
// or 4-5 (64) take the XOR of bits 7-9 / 7-8, so 16-byte chunk c of row r lives at c ^ (r % 8) (128) or
// c ^ (r / 2 % 4) (64).
template <int kSwizzle>
__device__ __forceinline__ uint32_t swizzle_offset(uint32_t row, uint32_t byte_col)
{
    constexpr uint32_t kChunks = kSwizzle / 16, kRowsPerLine = 128 / kSwizzle;
    return row * kSwizzle + ((((byte_col >> 4) ^ (row / kRowsPerLine)) & (kChunks - 1)) << 4) + (byte_col & 15);
}
__device__ __forceinline__ uint32_t sw128_offset(uint32_t row, uint32_t byte_col)
{
    return swizzle_offset<128>(row, byte_col);
}

}  // namespace fp
