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
// That order is what the matrix load/store instructions give with two byte permutes. A task moves 32 keys x
// 16 dims (one 16-byte column chunk c of V, key group g):
//   ldmatrix .x4 .trans, matrices = keys 8i .. 8i+7 (i = 0..3) of the group as 8 x 8 matrices of 16-bit
//     elements (dim pairs): lane t (q = t % 4, j = t / 4) receives, of keys 2q, 2q+1 (+8i), dims 2j and 2j+1:
//     bytes [V[2q][2j], V[2q][2j+1], V[2q+1][2j], V[2q+1][2j+1]].
//   prmt of matrices 0 and 1 (keys 2q, 2q+1 and 2q+8, 2q+9): the word [V[2q][d], V[2q+1][d], V[2q+8][d],
//     V[2q+9][d]] = V^T row d, word q of the group's first 16 positions, for d = 2j (selector 0x6420) and
//     2j + 1 (0x7531); matrices 2 and 3 likewise give the next 16 positions.
//   stmatrix .x4: lane t stores word q of row j of each matrix, and every lane gives one row's address, so
//     a stored matrix's 8 rows can be any 8 dims: row j of matrices 0 and 2 is dim 2j for j < 4 and 2j + 1
//     for j >= 4 (the other one of each pair in matrices 1 and 3). Their rows then cover all 8 residues of
//     dim % 8, so under the 128-byte swizzle (16-byte chunk x of row d at x ^ (d % 8)) the 8 rows of a
//     matrix fill 8 different chunks: no bank conflicts. The loads are free of them too (8 consecutive keys).
// Per 16 bytes a thread: 1 ldmatrix, 4 byte permutes, 1 stmatrix and 2 address operations.
//
// Two tile shapes (VtLayout places them, each followed by rows of ones this file never writes). 128 keys: V^T is 128
// dim rows of 128 positions (sw128), transposed by a warpgroup of its own, each of its 4 warps two column chunks of
// all 4 key groups. 192 keys: V^T is positions 0-127 as above, then positions 128-191 as 128 dim rows of 64 bytes
// under the 64-byte swizzle (16-byte chunk x of row d at x ^ (d / 2 % 4)), which P.V's last two K steps read
// through 64-byte-swizzle descriptors; three warps (the producer warpgroup's warps 1-3) transpose it, warp w the
// key groups 2w and 2w + 1 of all 8 column chunks. In the 64-byte rows a stored matrix's rows (dims 0, 2, 4, 6, 9,
// 11, 13, 15 of the chunk, or the other four pairs) still fall in 8 different 16-byte bank groups: rows d and d + 2
// are 128 bytes apart, their swizzles differ. The addresses are fixed per thread up to the task.
#pragma once

#include <cstdint>

#include "fwd/vt_layout.cuh"
#include "ptx.cuh"

namespace fp {

// Per-thread addresses and selectors of the transpose of a kKeys-key tile, relative to the stage's V and V^T
// tiles (computed once); `thread` counts the transposing threads from 0.
template <int kKeys>
struct TransposeLanes {
    using Layout = VtLayout<kKeys>;
    uint32_t load;        // key 8 (t / 8) + t % 8, swizzle bits of chunk 0 (XOR in the chunk)
    uint32_t store;       // this lane's stored row (a dim) in the warp's part of V^T, chunk 0, group 0
    uint32_t chunk_bytes; // 16 dim rows of the warp's part of V^T: one column chunk of V
    uint32_t first;       // 128 keys: the warp's first column chunk; 192: its first key group
    uint32_t group_xor;   // 192: the XOR that puts the warp's first group in place within its row
    uint32_t select[2];   // prmt selectors of matrices 0/2 and 1/3: this lane's words are dims 2j and 2j + 1

    __device__ __forceinline__ explicit TransposeLanes(uint32_t thread)
    {
        const uint32_t lane = thread % 32, warp = thread / 32;
        const uint32_t matrix = lane / 8, row = lane % 8;
        load = (8 * matrix + row) * 128 + (row << 4);  // swizzle of chunk 0: 0 ^ (key % 8)
        // stored matrix `matrix`, row `row`: dim 2 row or 2 row + 1 within the chunk (see above)
        const uint32_t dim = 2 * row + ((matrix % 2 == 0) == (row < 4) ? 0 : 1);
        const bool tail = kKeys == 192 && warp == 2;  // key groups 4 and 5: positions 128-191
        store = tail ? Layout::kTailOffset + dim * 64 + (((matrix / 2) ^ (dim / 2 % 4)) << 4)
                     : dim * 128 + (((matrix / 2) ^ (dim % 8)) << 4);
        chunk_bytes = tail ? 16 * 64 : 16 * 128;
        first = 2 * warp;
        group_xor = (kKeys == 192 && warp == 1 ? 2u : 0u) << 5;  // groups 2 and 3 are bytes 64-127 of a row
        const uint32_t j = lane / 4;
        select[0] = j < 4 ? 0x6420u : 0x7531u;
        select[1] = j < 4 ? 0x7531u : 0x6420u;
    }
};

// Transposes one kKeys x 128 fp8 V tile at shared address `v` (keys x dims, sw128) into `vt` (dims x positions,
// 1024-byte aligned, as above). Called by every transposing thread. The matrix loads and stores are volatile asm
// with memory clobbers, so they run in program order: kLoadsAhead tasks' loads are issued before the first of their
// permutes, which would otherwise wait out each load's latency alone: two at 192 keys, where the consumers waited for
// V^T with one; four spill in the producer warpgroup's 40 registers, and so do two at 128 keys.
template <int kKeys>
__device__ __forceinline__ void transpose_v_tile_fp8(uint32_t v, uint32_t vt, const TransposeLanes<kKeys> &lanes)
{
    constexpr uint32_t kGroupBytes = 32 * 128;  // one 32-key group of V rows
    // Task t (32 keys x 16 dims): V's column chunk, its key group and the XOR of its positions within V^T's row.
    // 128 keys: the warp's two chunks, all four groups (8 tasks); 192: all eight chunks, the warp's two groups (16).
    constexpr int kTasks = kKeys == 128 ? 2 * 4 : 8 * 2, kLoadsAhead = kKeys == 192 ? 2 : 1;
    static_assert(kTasks % kLoadsAhead == 0, "whole batches of tasks");
    auto chunk_of = [&](int t) { return kKeys == 128 ? lanes.first + t / 4 : static_cast<uint32_t>(t / 2); };
    auto group_of = [&](int t) { return kKeys == 128 ? static_cast<uint32_t>(t % 4) : lanes.first + t % 2; };
    auto position_xor_of = [&](int t) {
        return kKeys == 128 ? static_cast<uint32_t>(t % 4) << 5 : lanes.group_xor ^ static_cast<uint32_t>(t % 2) << 5;
    };
#pragma unroll
    for (int t0 = 0; t0 < kTasks; t0 += kLoadsAhead) {
        uint32_t x[kLoadsAhead][4];
#pragma unroll
        for (int b = 0; b < kLoadsAhead; ++b)
            ptx::ldmatrix_x4_trans(x[b], (v + lanes.load + group_of(t0 + b) * kGroupBytes) ^ (chunk_of(t0 + b) << 4));
#pragma unroll
        for (int b = 0; b < kLoadsAhead; ++b) {
            const uint32_t y[4] = {ptx::prmt(x[b][0], x[b][1], lanes.select[0]),
                                   ptx::prmt(x[b][0], x[b][1], lanes.select[1]),
                                   ptx::prmt(x[b][2], x[b][3], lanes.select[0]),
                                   ptx::prmt(x[b][2], x[b][3], lanes.select[1])};
            ptx::stmatrix_x4((vt + lanes.store + chunk_of(t0 + b) * lanes.chunk_bytes) ^ position_xor_of(t0 + b), y);
        }
    }
}

}  // namespace fp
