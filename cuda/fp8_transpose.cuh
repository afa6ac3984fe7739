// In-kernel transpose of an fp8 V tile for the P.V wgmma, done by the producer warpgroup.
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
// of V), in 32 warp tasks of 32 blocks, dealt round-robin to the transposing warps. In warp task t, lane l
// takes D = l % 8 + 8 (t % 4), W = l / 8 + 4 (t / 4); this keeps both the loads and the stores free of
// bank conflicts under the 128-byte swizzle: each thread rotates its block by r = (l / 2) % 4 rows so that
// the 8 lanes of a quarter-warp store to 8 different swizzle chunks.
#pragma once

#include <cstdint>

#include "fwd_config.cuh"
#include "ptx.cuh"

namespace fp {

// First key of position word `w` (0..31) of a 128-key tile; the word's 4 keys are +0, +1, +8, +9.
__device__ __forceinline__ uint32_t vt_word_first_key(uint32_t w)
{
    const uint32_t group = w / 8, word = w % 8;
    return group * 32 + (word / 4) * 16 + 2 * (word % 4);
}

// Transposes one 128 x 128 fp8 V tile (`v`: keys x dims, sw128) into `vt` (dims x positions, sw128).
// Called by every lane of `warps` warps; this one is warp `warp` (0 .. warps - 1).
__device__ __forceinline__ void transpose_v_tile_fp8(const uint8_t *v, uint8_t *vt, uint32_t warp, uint32_t warps)
{
    const uint32_t v_addr = ptx::smem_addr(v), vt_addr = ptx::smem_addr(vt);
    constexpr uint32_t kWarpTasks = 32;
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t rotation = (lane / 2) % 4;  // this thread's store order, see the header
#pragma unroll 2
    for (uint32_t task = warp; task < kWarpTasks; task += warps) {
        const uint32_t dim_word = lane % 8 + 8 * (task % 4);  // dims 4 * dim_word .. + 3
        const uint32_t pos_word = lane / 8 + 4 * (task / 4);  // positions 4 * pos_word .. + 3
        const uint32_t key0 = vt_word_first_key(pos_word);
        const uint32_t keys[4] = {key0, key0 + 1, key0 + 8, key0 + 9};
        uint32_t x[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            // x[i] = V[keys[i]][4 * dim_word .. + 3], bytes rotated right by `rotation`
            const uint32_t word = ptx::ld_shared_b32(v_addr + sw128_offset(keys[i], 4 * dim_word));
            x[i] = __funnelshift_r(word, word, 8 * rotation);
        }
        // 4 x 4 byte transpose: y[e] = byte e of x[0..3]
        const uint32_t lo01 = ptx::prmt(x[0], x[1], 0x5140), lo23 = ptx::prmt(x[2], x[3], 0x5140);
        const uint32_t hi01 = ptx::prmt(x[0], x[1], 0x7362), hi23 = ptx::prmt(x[2], x[3], 0x7362);
        const uint32_t y[4] = {ptx::prmt(lo01, lo23, 0x5410), ptx::prmt(lo01, lo23, 0x7632),
                               ptx::prmt(hi01, hi23, 0x5410), ptx::prmt(hi01, hi23, 0x7632)};
#pragma unroll
        for (uint32_t e = 0; e < 4; ++e) {
            // y[e] holds dim 4 * dim_word + (e + rotation) % 4 at positions 4 * pos_word .. + 3
            const uint32_t dim = 4 * dim_word + (e + rotation) % 4;
            ptx::st_shared_b32(vt_addr + sw128_offset(dim, 4 * pos_word), y[e]);
        }
    }
}

}  // namespace fp
