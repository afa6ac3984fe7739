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

// Where a K or V tile's rows come from. Dense: rows key0 .. of the batch's own tensor. Varlen: the sequence's rows
// of the packed tensor (one batch). Paged: boxes of 2^box_shift rows (16, 32 or 64), each within the page holding
// it; boxes wholly past the sequence's keys are not loaded (their rows are masked, V's zeroed: mainloop.cuh,
// converter.cuh). Pages and boxes are powers of two, so that the lane's few registers hold no division.
template <class Config>
struct KvRows {
    const FwdArgs &args;
    const VarlenTile *tile;  // varlen: the sequence's rows are read from it where used (the lane has few registers)
    int dense_batch, head_kv;

    __device__ __forceinline__ int batch() const
    {
        return Config::kVarlen ? ptx::ld_global_nc_s32(&tile->batch) : dense_batch;
    }

    __device__ __forceinline__ bool paged() const { return Config::kVarlen && args.block_table != nullptr; }
    // The rows of a tile starting at key0 that are loaded: kBlockN, or (paged) its boxes holding keys.
    __device__ __forceinline__ int loaded_rows(int key0) const
    {
        if (!paged())
            return Config::kBlockN;
        const int box = 1 << args.box_shift, keys = (ptx::ld_global_nc_s32(&tile->seqlen_k) - key0 + box - 1) & -box;
        return keys < Config::kBlockN ? keys : Config::kBlockN;
    }
    // The page id holding `key` (paged).
    __device__ __forceinline__ int page_of(int key) const
    {
        return __ldg(args.block_table + static_cast<int64_t>(batch()) * args.block_table_stride +
                     (key >> args.page_shift));
    }
    // Brings the block-table entries of the tile at key0 into L1 (paged), issued a tile ahead so that the page-id
    // loads before its TMAs hit L1 rather than wait on L2 once the slot frees: the first and last loaded box's
    // entries, whose lines hold every entry between (a tile spans at most 12 pages of 16).
    __device__ __forceinline__ void prefetch_pages(int key0) const
    {
        if (!paged())
            return;
        const int32_t *row = args.block_table + static_cast<int64_t>(batch()) * args.block_table_stride;
        ptx::prefetch_global_l1(row + (key0 >> args.page_shift));
        ptx::prefetch_global_l1(row + ((key0 + loaded_rows(key0) - 1) >> args.page_shift));
    }
    // Loads the tile's column chunk at element column `col` into `dst` (kBlockN rows of kSwizzle bytes).
    template <int kSwizzle>
    __device__ __forceinline__ void load(uint8_t *dst, const CUtensorMap *map, uint64_t *full, int col, int key0) const
    {
        if constexpr (!Config::kVarlen) {
            ptx::tma_load_4d(dst, map, full, col, key0, head_kv, dense_batch);
        } else if (!paged()) {
            ptx::tma_load_4d(dst, map, full, col, ptx::ld_global_nc_s32(&tile->k_start) + key0, head_kv, 0);
        } else {
            const int rows = loaded_rows(key0), page_mask = (1 << args.page_shift) - 1;
#pragma unroll 1
            for (int r = 0; r < rows; r += 1 << args.box_shift)
                ptx::tma_load_4d(dst + r * kSwizzle, map, full, col, (key0 + r) & page_mask, head_kv,
                                 page_of(key0 + r));
        }
    }
    // The bytes of a tile of tile_bytes when whole that are loaded (the full barrier's transaction count).
    __device__ __forceinline__ uint32_t bytes(uint32_t tile_bytes, int key0) const
    {
        return tile_bytes / Config::kBlockN * loaded_rows(key0);
    }
    // The block exponent of the tile's descale d (paged PER_BLOCK: one per page and kv head).
    __device__ __forceinline__ int exponent(const DescaleArg &d, int key0) const
    {
        if (paged() && d.exponents != nullptr)
            return descale_exponent(d, page_of(key0), head_kv, 0);
        return descale_exponent(d, batch(), head_kv, key0);
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
    const KvRows<Config> rows{args, item.tile, batch, head_kv};
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
            ptx::mbarrier_arrive_expect_tx(&full[stage], rows.bytes(tile_bytes, key0));
            load(stage, key0);
        };
    };
    // Each tile as column chunks of one swizzle row (kChunks of kSwizzle bytes) per tile row.
    auto chunk_load = [&](auto tiles, const CUtensorMap *map, uint64_t *full, auto chunks) {
        constexpr int kChunks = decltype(chunks)::kChunks, kSwizzle = decltype(chunks)::kSwizzle;
        return [=](int stage, int key0) {
            for (int c = 0; c < kChunks; ++c)
                rows.template load<kSwizzle>(tiles[stage] + c * Config::kBlockN * kSwizzle, map, &full[stage],
                                             c * kSwizzle / Config::Input::kBytes, key0);
        };
    };
    // Every KV tile of the item, each kind in turn (pipe: the issuing lane's position in the ring).
    auto issue_ring = [&](auto &pipe, auto... kinds) {
        // Not unrolled: ptxas unrolled it by four, which spilled at the bf16 producer's 24 registers.
        if (range.end > 0)
            rows.prefetch_pages((range.end - 1) * Config::kBlockN);
#pragma unroll 1
        for (int it = 0; it < range.end; ++it, pipe.advance()) {
            const int key0 = (range.end - 1 - it) * Config::kBlockN;
            (kinds(pipe.stage, pipe.phase, key0), ...);
            if (key0 > 0)
                rows.prefetch_pages(key0 - Config::kBlockN);
        }
    };
    const auto v_tiles = tile_kind(ss.v_empty, ss.v_full, Config::kTileVBytes, [&](int stage, int key0) {
        if constexpr (Config::kIsFp8)
            ss.v_exponent[stage] = rows.exponent(args.v_descale, key0);
    }, chunk_load(ss.v, &args.tm_v, ss.v_full, TileChunks<Config::kVChunks, Config::kSwizzleV>{}));
    if (thread == 0) {
        // Q's buffer is free once every consumer warp has read the previous item's Q.
        ptx::mbarrier_wait_parity(&ss.q_empty, (round & 1) ^ 1);
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
        const float scale_log2 = score_scale_log2(args, batch, head, m_block, Config::kBlockM);
        const auto k_tiles = tile_kind(ss.k_empty, ss.k_full, Config::kTileKBytes, [&](int stage, int key0) {
            if constexpr (Config::kIsFp8)
                ss.k_scale_log2[stage] = ldexpf(scale_log2, rows.exponent(args.k_descale, key0));
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
