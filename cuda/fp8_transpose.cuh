// In-kernel transpose of an fp8 V tile for the P.V wgmma, done by a warpgroup of its own.
//
// fp8 wgmma takes B only K-major, so P.V needs V^T (dim rows, key columns) in shared memory, while TMA
// delivers V as (key rows, dim columns). The consumers pack P into the A fragment straight from the S
// accumulators, which hold, per thread, keys {2c, 2c+1, 2c+8, 2c+9} (c = lane % 4) of each 16-key group
// where the A layout wants positions {4c .. 4c+3}. Instead of shuffling P between threads, V^T stores its
// key columns in that same order: position p of each 32-key group holds key
//     (w / 4) * 16 + 2 * (w % 4) + {0, 1, 8, 9}[p % 4],   w = p / 4,
// so P's k index and V^T's k index name the same key.
//
// Work split: 1024 blocks of 4 x 4 bytes (4 keys = one position word W of V^T, by 4 dims = one dim word D
// of V). Lane l of warp w takes D = l % 8 + 8 w and, in task j = 0..7, W = l / 8 + 4 j, whose keys are
// 16 j + 2 (l / 8) + {0, 1, 8, 9}. Both the loads and the stores are free of bank conflicts under the
// 128-byte swizzle: each thread rotates its block by r = (l / 2) % 4 rows so that the 8 lanes of a
// quarter-warp store to 8 different swizzle chunks. Every address is fixed per thread up to the task:
// loads step by 16 key rows (+2048 bytes, an immediate offset), stores move to swizzle chunk j (one XOR).
#pragma once

#include <cstdint>

#include "fwd_config.cuh"
#include "ptx.cuh"

namespace fp {

// Per-thread addresses of the transpose, relative to the stage's V and V^T tiles (computed once).
struct TransposeLanes {
    uint32_t load[4];   // byte offset of key row 2 (l / 8) + {0, 1, 8, 9}, dim word D, in V (task 0)
    uint32_t store[4];  // byte offset of dim 4 D + (e + r) % 4, position word l / 8, chunk bits = dim % 8
    uint32_t rotation_bits;

    __device__ __forceinline__ explicit TransposeLanes(uint32_t thread)
    {
        const uint32_t lane = thread % 32, warp = thread / 32;
        const uint32_t dim_word = lane % 8 + 8 * warp;
        const uint32_t rotation = (lane / 2) % 4;
        const uint32_t key_offsets[4] = {0, 1, 8, 9};
#pragma unroll
        for (int i = 0; i < 4; ++i)
            load[i] = sw128_offset(2 * (lane / 8) + key_offsets[i], 4 * dim_word);
#pragma unroll
        for (uint32_t e = 0; e < 4; ++e) {
            const uint32_t dim = 4 * dim_word + (e + rotation) % 4;
            store[e] = dim * 128 + ((dim % 8) << 4) + 4 * (lane / 8);  // = sw128_offset(dim, 4 (l / 8))
        }
        rotation_bits = 8 * rotation;
    }
};

// Transposes one 128 x 128 fp8 V tile at shared address `v` (keys x dims, sw128) into `vt` (dims x
// positions, sw128, 1024-byte aligned). Called by all 128 threads of the transposing warpgroup.
__device__ __forceinline__ void transpose_v_tile_fp8(uint32_t v, uint32_t vt, const TransposeLanes &lanes)
{
    constexpr uint32_t kTasks = 8;
    constexpr uint32_t kTaskKeyBytes = 16 * 128;  // task j + 1 starts 16 key rows further
#pragma unroll 2
    for (uint32_t j = 0; j < kTasks; ++j) {
        uint32_t x[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            // x[i] = V[key i][4 D .. 4 D + 3], bytes rotated right by the thread's rotation
            const uint32_t word = ptx::ld_shared_b32(v + lanes.load[i] + j * kTaskKeyBytes);
            x[i] = __funnelshift_r(word, word, lanes.rotation_bits);
        }
        // 4 x 4 byte transpose: y[e] = byte e of x[0..3]
        const uint32_t lo01 = ptx::prmt(x[0], x[1], 0x5140), lo23 = ptx::prmt(x[2], x[3], 0x5140);
        const uint32_t hi01 = ptx::prmt(x[0], x[1], 0x7362), hi23 = ptx::prmt(x[2], x[3], 0x7362);
        const uint32_t y[4] = {ptx::prmt(lo01, lo23, 0x5410), ptx::prmt(lo01, lo23, 0x7632),
                               ptx::prmt(hi01, hi23, 0x5410), ptx::prmt(hi01, hi23, 0x7632)};
#pragma unroll
        for (int e = 0; e < 4; ++e)  // position word W = l / 8 + 4 j lives in swizzle chunk j ^ (dim % 8)
            ptx::st_shared_b32((vt + lanes.store[e]) ^ (j << 4), y[e]);
    }
}

}  // namespace fp
