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

// The rows of a K or V tile as loaded: how many, and (paged) page ids read before the issuing warp waits for the
// tile's slot, so that no load stands between the slot freeing and the tile's TMAs: the id of this lane's box
// (Config::kBoxPerLane), else those of the first kHeldPages boxes (lane 0 issues them all).
template <class Config>
struct TileRows {
    static constexpr int kHeldPages = Config::kBoxPerLane ? 1 : 4;  // 4: the boxes of pages >= 64 (192 keys a tile)
    int loaded;
    int page[Config::kVarlen ? kHeldPages : 1];
};

// Where a K or V tile's rows come from. Dense: rows key0 .. of the batch's own tensor. Varlen: the sequence's rows
// of the packed tensor (one batch). Paged: boxes of 2^box_shift rows (a divisor of the page and the tile: one box a
// tile at pages >= 128 of the 128-key kernels), each within the page holding it; boxes wholly past the sequence's
// keys are not loaded (their rows are masked, V's zeroed: mainloop.cuh, converter.cuh). Box j is issued by lane j of
// the issuing warp (Config::kBoxPerLane), else every box by lane 0. Pages and boxes are powers of two, so that the
// lanes' few registers hold no division.
template <class Config>
struct KvRows {
    const FwdArgs &args;
    const int32_t *pages;  // paged: the sequence's row of the block table
    int batch, head_kv, k_start, seqlen_k;

    __device__ __forceinline__ KvRows(const FwdArgs &a, const Item &item, int head_kv_index)
        : args(a), pages(paged_call(a) ? a.block_table + static_cast<int64_t>(item.batch) * a.block_table_stride
                                       : nullptr),
          batch(item.batch), head_kv(head_kv_index), k_start(item.span.k_start), seqlen_k(item.span.seqlen_k)
    {
    }
    __device__ __forceinline__ static bool paged_call(const FwdArgs &a)
    {
        return Config::kVarlen && a.block_table != nullptr;
    }
    __device__ __forceinline__ bool paged() const { return paged_call(args); }

    // The tile at key0: its loaded rows (kBlockN, or paged its boxes holding keys) and page ids.
    __device__ __forceinline__ TileRows<Config> where(int key0) const
    {
        TileRows<Config> t{Config::kBlockN, {}};
        if (!paged())
            return t;
        const int box = 1 << args.box_shift, keys = (seqlen_k - key0 + box - 1) & -box;
        t.loaded = keys < Config::kBlockN ? keys : Config::kBlockN;
        if constexpr (Config::kBoxPerLane) {
            if (const int row = static_cast<int>(ptx::lane_index()) << args.box_shift; row < t.loaded)
                t.page[0] = __ldg(pages + ((key0 + row) >> args.page_shift));
        } else {
#pragma unroll
            for (int j = 0; j < TileRows<Config>::kHeldPages; ++j)
                if (j << args.box_shift < t.loaded)
                    t.page[j] = __ldg(pages + ((key0 + (j << args.box_shift)) >> args.page_shift));
        }
        return t;
    }
    // Loads the tile's column chunk at element column `col` into `dst` (kBlockN rows of kSwizzle bytes): dense by the
    // calling lane, varlen by lane 0 of the issuing warp, paged by the lanes of its boxes (or lane 0).
    template <int kSwizzle>
    __device__ __forceinline__ void load(uint8_t *dst, const CUtensorMap *map, uint64_t *full, int col, int key0,
                                         const TileRows<Config> &t) const
    {
        const int page_mask = (1 << args.page_shift) - 1;
        if constexpr (!Config::kVarlen) {
            ptx::tma_load_4d(dst, map, full, col, key0, head_kv, batch);
        } else if (!paged()) {
            if (ptx::lane_index() == 0)
                ptx::tma_load_4d(dst, map, full, col, k_start + key0, head_kv, 0);
        } else if constexpr (Config::kBoxPerLane) {
            if (const int row = static_cast<int>(ptx::lane_index()) << args.box_shift; row < t.loaded)
                ptx::tma_load_4d(dst + row * kSwizzle, map, full, col, (key0 + row) & page_mask, head_kv, t.page[0]);
        } else if (ptx::lane_index() == 0) {
#pragma unroll
            for (int j = 0; j < TileRows<Config>::kHeldPages; ++j)
                if (j << args.box_shift < t.loaded)
                    ptx::tma_load_4d(dst + (j << args.box_shift) * kSwizzle, map, full, col,
                                     (key0 + (j << args.box_shift)) & page_mask, head_kv, t.page[j]);
#pragma unroll 1
            for (int r = TileRows<Config>::kHeldPages << args.box_shift; r < t.loaded; r += 1 << args.box_shift)
                ptx::tma_load_4d(dst + r * kSwizzle, map, full, col, (key0 + r) & page_mask, head_kv,
                                 __ldg(pages + ((key0 + r) >> args.page_shift)));
        }
    }
    // The bytes of a tile of tile_bytes when whole that are loaded (the full barrier's transaction count).
    __device__ __forceinline__ uint32_t bytes(uint32_t tile_bytes, const TileRows<Config> &t) const
    {
        return tile_bytes / Config::kBlockN * t.loaded;
    }
    // The block exponent of the tile's descale d (paged PER_BLOCK: one per page and kv head, the tile's first page:
    // lane 0's).
    __device__ __forceinline__ int exponent(const DescaleArg &d, int key0, const TileRows<Config> &t) const
    {
        if (paged() && d.exponents != nullptr)
            return descale_exponent(d, t.page[0], head_kv, 0);
        return descale_exponent(d, batch, head_kv, key0);
    }
};

// Issues one work item's loads; `round` counts this CTA's items (Q's buffer alternates phases with it), `pipe`
// is the issuing lane's next K or V slot.
template <class Config>
__device__ __forceinline__ void producer(const FwdArgs &args, FwdSharedStorage<Config> &ss, Item item, int round,
                                         RingPositions<Config> &rings)
{
    const int m_block = item.m_block, head = item.head, batch = item.batch;
    const KvRange range = item.range;
    const int head_kv = head / args.heads_per_kv;
    const KvRows<Config> rows(args, item, head_kv);
    const uint32_t thread = threadIdx.x % 128;
    // Lane 0 of warp 0 loads Q and every K tile (a K slot frees after S). fp8: lane 1 every V tile (a V slot frees
    // once converted), so that neither kind waits behind the other's free slot; bf16 (Config::kKvTogether):
    // lane 0 each tile's V right after its K (a V slot frees after P.V). Varlen (Config::kWarpIssues): every lane of
    // warp 0 waits as one, lane 0 writes the descale and expects the bytes, the lanes of the boxes issue them.
    // fp8: each tile's descale travels with it through shared memory (written before the arrive that
    // releases it): K's score scale with its block exponent applied, V's block exponent.
    // A kind of tile: into slot `stage` of its ring once the slot's last tile is released (parity phase ^ 1), by
    // `load`.
    auto tile_kind = [&](uint64_t *empty, uint64_t *full, uint32_t tile_bytes, auto write_descale, auto load) {
        return [=](int stage, uint32_t phase, int key0) {
            const TileRows<Config> where = rows.where(key0);
            ptx::mbarrier_wait_parity(&empty[stage], phase ^ 1);
            if (!Config::kWarpIssues || thread == 0) {
                write_descale(stage, key0, where);
                ptx::mbarrier_arrive_expect_tx(&full[stage], rows.bytes(tile_bytes, where));
            }
            if constexpr (Config::kWarpIssues)
                __syncwarp();  // the bytes expected before the boxes land
            load(stage, key0, where);
        };
    };
    // Each tile as column chunks of one swizzle row (kChunks of kSwizzle bytes) per tile row.
    auto chunk_load = [&](auto tiles, const CUtensorMap *map, uint64_t *full, auto chunks) {
        constexpr int kChunks = decltype(chunks)::kChunks, kSwizzle = decltype(chunks)::kSwizzle;
        return [=](int stage, int key0, const TileRows<Config> &where) {
            for (int c = 0; c < kChunks; ++c)
                rows.template load<kSwizzle>(tiles[stage] + c * Config::kBlockN * kSwizzle, map, &full[stage],
                                             c * kSwizzle / Config::Input::kBytes, key0, where);
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
    const auto v_tiles = tile_kind(ss.v_empty, ss.v_full, Config::kTileVBytes,
                                   [&](int stage, int key0, const TileRows<Config> &where) {
        if constexpr (Config::kIsFp8)
            ss.v_exponent[stage] = rows.exponent(args.v_descale, key0, where);
    }, chunk_load(ss.v, &args.tm_v, ss.v_full, TileChunks<Config::kVChunks, Config::kSwizzleV>{}));
    if (Config::kWarpIssues || thread == 0) {
        // Q's buffer is free once every consumer warp has read the previous item's Q.
        ptx::mbarrier_wait_parity(&ss.q_empty, (round & 1) ^ 1);
        if (!Config::kWarpIssues || thread == 0) {
            if constexpr (Config::kQBf16) {  // two chunks of 64 bf16 columns, rounded by the consumers
                ptx::mbarrier_arrive_expect_tx(&ss.q_full, Config::kTileQBf16Bytes);
                for (int c = 0; c < 2; ++c)
                    ptx::tma_load_4d(ss.q_bf16 + c * Config::kBlockM * 128, &args.tm_q, &ss.q_full, c * 64,
                                     item.span.q_start + m_block * Config::kBlockM, head, 0);
            } else {
                ptx::mbarrier_arrive_expect_tx(&ss.q_full, Config::kTileQBytes);
                for (int c = 0; c < Config::kQkChunks; ++c)
                    ptx::tma_load_4d(ss.q + c * Config::kBlockM * Config::kSwizzleQk, &args.tm_q, &ss.q_full,
                                     c * Config::kAtomColsQk, item.span.q_start + m_block * Config::kBlockM, head,
                                     Config::kVarlen ? 0 : batch);
            }
        }
        const float scale_log2 = score_scale_log2(args, batch, head, m_block, Config::kBlockM);
        const auto k_tiles = tile_kind(ss.k_empty, ss.k_full, Config::kTileKBytes,
                                       [&](int stage, int key0, const TileRows<Config> &where) {
            if constexpr (Config::kIsFp8)
                ss.k_scale_log2[stage] = ldexpf(scale_log2, rows.exponent(args.k_descale, key0, where));
        }, chunk_load(ss.k, &args.tm_k, ss.k_full, TileChunks<Config::kQkChunks, Config::kSwizzleQk>{}));
        if constexpr (Config::kKvTogether)
            issue_ring(rings.kv, k_tiles, v_tiles);
        else
            issue_ring(rings.kv, k_tiles);
    } else if (thread == 1 && !Config::kKvTogether) {
        if constexpr (Config::kVPrepared) {
            // V^T as P.V reads it (VtLayout): positions 0-127 in 128-byte rows, at 192 keys 128-191 in 64-byte rows;
            // the rows of ones below each part stay as the kernel wrote them.
            using Layout = VtLayout<Config::kBlockN>;
            issue_ring(rings.vt_ring(), tile_kind(ss.vt_empty, ss.vt_full, Config::kTileVBytes,
                                                  [&](int stage, int key0, const TileRows<Config> &) {
                ss.vt_exponent[stage] = descale_exponent(args.v_descale, batch, head_kv, key0);
            }, [&](int stage, int key0, const TileRows<Config> &) {
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
