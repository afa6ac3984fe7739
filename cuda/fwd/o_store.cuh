// O's rows to global memory, 16 bytes a thread and store.
//
// In the m64nN accumulator layout (softmax.cuh) the 4 threads of a quad hold, of each 8-column block of a row, 2
// columns each: as bf16 pairs, one word a thread. Stored as they are, a warp's 4-byte stores cover 8 rows x 16 bytes
// (half a sector each), and O's 32 of them a thread held an item's end back at short sequences. Per 4 blocks the
// quad transposes its 4 x 4 words instead (two butterfly stages of shuffles), after which thread q holds the 8
// columns of block 4 m + q: 8 stores of 16 bytes a row half, a warp's covering 8 rows x 64 bytes.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ptx.cuh"

namespace fp {

// w[k]: this thread's word of block k of 4 (lane % 4 its position in the quad). Afterwards w[k] is word k of block
// lane % 4, i.e. what quad thread k held of that block. Every lane of the warp takes part.
__device__ __forceinline__ void quad_transpose_words(uint32_t (&w)[4], uint32_t lane)
{
#pragma unroll
    for (int s = 1; s <= 2; s *= 2) {
        const bool high = lane & s;
#pragma unroll
        for (int k0 = 0; k0 < 4; ++k0) {
            if (k0 & s)
                continue;
            // of the pair (k0, k0 + s), the slot whose bit s differs from the lane's goes to the partner lane, which
            // sends back its other slot
            const uint32_t got = __shfl_xor_sync(0xffffffffu, high ? w[k0] : w[k0 | s], s);
            if (high)
                w[k0] = got;
            else
                w[k0 | s] = got;
        }
    }
}

// One row of O as the quad holds it (packed[j]: this thread's two columns of block j, a bf16 pair) to `row`, 16
// bytes a thread. Every lane of the warp takes part (the shuffles); the stores only where `store` (a row past
// seqlen_q has none).
template <int kBlocks>
__device__ __forceinline__ void store_row_bf16(__nv_bfloat16 *row, const uint32_t (&packed)[kBlocks], uint32_t lane,
                                               bool store)
{
    static_assert(kBlocks % 4 == 0, "whole groups of 4 blocks of 8 columns");
#pragma unroll
    for (int m = 0; m < kBlocks / 4; ++m) {
        uint32_t w[4] = {packed[4 * m], packed[4 * m + 1], packed[4 * m + 2], packed[4 * m + 3]};
        quad_transpose_words(w, lane);
        if (store)
            ptx::st_global_v4(row + 8 * (4 * m + lane % 4), w);
    }
}

}  // namespace fp
