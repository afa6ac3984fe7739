// V^T's slot in shared memory for e4m3 codes: P.V's B operand, K-major, with 8 rows of ones below each part.
#pragma once

#include <cstdint>

namespace fp {

// e4m3 codes: one V^T slot, P.V's B operand of N = 136 rows: V^T's 128 dim rows (transpose_v.cuh writes them
// each tile), then 8 rows of e4m3 ones (written once), so that the same wgmma gives P's row sums as quantized in
// accumulator columns 128-135 instead of a second m64n8 wgmma per K step. Positions 0-127: 128 rows of 128 bytes
// (128-byte swizzle) and their 8 rows of ones; at 192 keys positions 128-191 follow as 128 rows of 64 bytes (64-byte
// swizzle, 512-byte aligned) and their 8 rows of ones. A descriptor's 17th group of 8 rows lies 16 groups (sbo)
// past its first: right after each part's 128 rows.
template <int kKeys>
struct VtLayout {
    static_assert(kKeys == 128 || kKeys == 192, "V^T tiles of 128 or 192 keys");
    static constexpr uint32_t kMainBytes = 128 * 128;                            // positions 0-127
    static constexpr uint32_t kMainOnesBytes = 8 * 128;
    static constexpr uint32_t kTailOffset = kMainBytes + kMainOnesBytes;         // positions 128-191
    static constexpr uint32_t kTailBytes = kKeys == 192 ? 128 * 64 : 0;
    static constexpr uint32_t kTailOnesBytes = kKeys == 192 ? 8 * 64 : 0;
    static constexpr uint32_t kTailOnesOffset = kTailOffset + kTailBytes;
    static constexpr uint32_t kBytes = (kTailOnesOffset + kTailOnesBytes + 1023) / 1024 * 1024;  // slots 1 KiB aligned
    static_assert(kTailOffset % 512 == 0, "the 64-byte swizzle repeats every 512 bytes");
};

constexpr uint32_t kE4m3OneX4 = 0x38383838u;  // four e4m3 codes of 1.0

}  // namespace fp
