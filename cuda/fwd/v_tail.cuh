// Varlen and paged calls: V's rows past a sequence's last key are set to zero before P.V reads them. Their
// probabilities are 0, but the rows hold whatever lies beyond the sequence (the next sequence's values, a page's
// unwritten slots), and the tensor cores give 0 * NaN = NaN. Only the first tile an item visits can hold such rows
// (KvRange::tail_keys).
#pragma once

#include <cstdint>

#include "ptx.cuh"

namespace fp {

// Zeroes rows [keys, kRows) of every column chunk (kChunks chunks of kRows rows x kRowBytes) of the V tile at `tile`
// (a shared-memory address), 16 bytes a store, spread over `threads` threads (`thread` counts from 0). A swizzle
// permutes 16-byte pieces within a row only, so whole rows are zeroed whatever the swizzle.
template <int kChunks, int kRows, int kRowBytes>
__device__ __forceinline__ void zero_v_rows(uint32_t tile, int keys, uint32_t thread, uint32_t threads)
{
    constexpr int kPiecesPerRow = kRowBytes / 16;
    const int pieces = (kRows - keys) * kPiecesPerRow;
    const uint32_t zero[4] = {0, 0, 0, 0};
    for (int c = 0; c < kChunks; ++c)
        for (int i = static_cast<int>(thread); i < pieces; i += static_cast<int>(threads))
            ptx::st_shared_v4(tile + (c * kRows + keys) * kRowBytes + 16 * i, zero);
}

}  // namespace fp
