// The producer: TMA loads of Q, K and V (or a prepared V^T), each K and V tile with its fp8 descale.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/pipeline.cuh"
#include "fwd/scheduler.cuh"
#include "fwd/smem.cuh"
#include "ptx.cuh"

namespace fp {

// How a tile is cut into column chunks (a tag for issue_tiles).
template <int kChunkCount, int kSwizzleBytes>
struct TileChunks {
    static constexpr int kChunks = kChunkCount, kSwizzle = kSwizzleBytes;
};

// Issues one work item's loads; `round` counts this CTA's items (Q's buffer alternates phases with it), `pipe`
// is the issuing lane's next K or V slot.
template <class Config>
__device__ __forceinline__ void producer(const FwdArgs &args, FwdSharedStorage<Config> &ss, int m_block, int head,
                                         int batch, KvRange range, int round, RingPositions<Config> &rings)
{
    const int head_kv = head / args.heads_per_kv;
    const uint32_t thread = threadIdx.x % 128;
    // Lane 0 of warp 0 loads Q and every K tile (a K slot frees after S). fp8: lane 1 every V tile (a V slot frees
    // once converted), so that neither kind waits behind the other's free slot; bf16 (Config::kKvFromOneLane):
    // lane 0 each tile's V right after its K (a V slot frees after P.V).
    // fp8: each tile's descale travels with it through shared memory (written before the arrive that
    // releases it): K's score scale with its block exponent applied, V's block exponent.
    // A kind of tile: into slot `stage` of its ring once the slot's last tile is released (parity phase ^ 1), by
    // `load`.
    auto tile_kind = [&](uint64_t *empty, uint64_t *full, uint32_t tile_bytes, auto write_descale, auto load) {
        return [=](int stage, uint32_t phase, int key0) {
            ptx::mbarrier_wait_parity(&empty[stage], phase ^ 1);
            write_descale(stage, key0);
            ptx::mbarrier_arrive_expect_tx(&full[stage], tile_bytes);
            load(stage, key0);
        };
    };
    // Each tile as column chunks of one swizzle row (kChunks of kSwizzle bytes) per tile row.
    auto chunk_load = [&](auto tiles, const CUtensorMap *map, uint64_t *full, auto chunks) {
        constexpr int kChunks = decltype(chunks)::kChunks, kSwizzle = decltype(chunks)::kSwizzle;
        return [=](int stage, int key0) {
            for (int c = 0; c < kChunks; ++c)
                ptx::tma_load_4d(tiles[stage] + c * Config::kBlockN * kSwizzle, map, &full[stage],
                                 c * kSwizzle / Config::Input::kBytes, key0, head_kv, batch);
        };
    };
    // Every KV tile of the item, each kind in turn (pipe: the issuing lane's position in the ring).
    auto issue_ring = [&](auto &pipe, auto... kinds) {
        // Not unrolled: ptxas unrolled it by four, which spilled at the bf16 producer's 24 registers.
#pragma unroll 1
        for (int it = 0; it < range.end; ++it, pipe.advance()) {
            const int key0 = (range.end - 1 - it) * Config::kBlockN;
            (kinds(pipe.stage, pipe.phase, key0), ...);
        }
    };
    const auto v_tiles = tile_kind(ss.v_empty, ss.v_full, Config::kTileVBytes, [&](int stage, int key0) {
        if constexpr (Config::kIsFp8)
            ss.v_exponent[stage] = descale_exponent(args.v_descale, batch, head_kv, key0);
    }, chunk_load(ss.v, &args.tm_v, ss.v_full, TileChunks<Config::kVChunks, Config::kSwizzleV>{}));
    if (thread == 0) {
        // Q's buffer is free once every consumer warp has read the previous item's Q.
        ptx::mbarrier_wait_parity(&ss.q_empty, (round & 1) ^ 1);
        ptx::mbarrier_arrive_expect_tx(&ss.q_full, Config::kTileQBytes);
        for (int c = 0; c < Config::kQkChunks; ++c)
            ptx::tma_load_4d(ss.q + c * Config::kBlockM * Config::kSwizzleQk, &args.tm_q, &ss.q_full,
                             c * Config::kAtomColsQk, m_block * Config::kBlockM, head, batch);
        const float scale_log2 = score_scale_log2(args, batch, head, m_block, Config::kBlockM);
        const auto k_tiles = tile_kind(ss.k_empty, ss.k_full, Config::kTileKBytes, [&](int stage, int key0) {
            if constexpr (Config::kIsFp8)
                ss.k_scale_log2[stage] = ldexpf(scale_log2, descale_exponent(args.k_descale, batch, head_kv, key0));
        }, chunk_load(ss.k, &args.tm_k, ss.k_full, TileChunks<Config::kQkChunks, Config::kSwizzleQk>{}));
        if constexpr (Config::kKvFromOneLane)
            issue_ring(rings.kv, k_tiles, v_tiles);
        else
            issue_ring(rings.kv, k_tiles);
    } else if (thread == 1 && !Config::kKvFromOneLane) {
        if constexpr (Config::kVPrepared) {
            // V^T as P.V reads it (VtLayout): positions 0-127 in 128-byte rows, at 192 keys 128-191 in 64-byte rows;
            // the rows of ones below each part stay as the kernel wrote them.
            using Layout = VtLayout<Config::kBlockN>;
            issue_ring(rings.vt_ring(), tile_kind(ss.vt_empty, ss.vt_full, Config::kTileVBytes,
                                                  [&](int stage, int key0) {
                ss.vt_exponent[stage] = descale_exponent(args.v_descale, batch, head_kv, key0);
            }, [&](int stage, int key0) {
                ptx::tma_load_4d(ss.vt[stage], &args.tm_v, &ss.vt_full[stage], key0, 0, head_kv, batch);
                if constexpr (Layout::kTailBytes > 0)
                    ptx::tma_load_4d(ss.vt[stage] + Layout::kTailOffset, &args.tm_v_tail, &ss.vt_full[stage],
                                     key0 + 128, 0, head_kv, batch);
            }));
        } else {
            issue_ring(rings.kv, v_tiles);
        }
    }
}

}  // namespace fp
