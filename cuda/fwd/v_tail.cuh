// Varlen and paged calls: V's rows past a sequence's last key are set to zero before P.V reads them. Their
// probabilities are 0, but the rows hold whatever lies beyond the sequence (the next sequence's values, a page's
// unwritten slots), and the tensor cores give 0 * NaN = NaN. Only the first tile an item visits can hold such rows
// (KvRange::tail_keys).
#pragma once

#include <cstdint>

#include "ptx.cuh"

namespace fp {

// Zeroes rows [keys, kRows) of every column chunk (kChunks chunks of kRows rows x kRowBytes) of the V tile at `tile`
// (a shared-memory address), 16 bytes a store, spread over kThreads threads (`thread` counts from 0). A swizzle
// permutes 16-byte pieces within a row only, so whole rows are zeroed whatever the swizzle.
template <int kChunks, int kRows, int kRowBytes, int kThreads>
__device__ __forceinline__ void zero_v_rows(uint32_t tile, int keys, uint32_t thread)
{
    // The same trip count in every thread, the stores predicated (no loop of a thread's own trip count): the warp
    // stays converged as far as the compiler can tell, and the wgmma after it keep their descriptors in uniform
    // registers. Not unrolled: the converting threads have 40 registers.
    constexpr int kPiecesPerRow = kRowBytes / 16, kPieces = kRows * kPiecesPerRow;
    static_assert(kPieces % kThreads == 0, "whole pieces a thread");
    const int first = keys * kPiecesPerRow;
    const uint32_t zero[4] = {0, 0, 0, 0};
#pragma unroll 1
    for (int c = 0; c < kChunks; ++c)
#pragma unroll 1
        for (int k = 0; k < kPieces / kThreads; ++k) {
            const int piece = k * kThreads + static_cast<int>(thread);
            if (piece >= first)
                ptx::st_shared_v4(tile + (c * kRows * kPiecesPerRow + piece) * 16, zero);
        }
}

}  // namespace fp
