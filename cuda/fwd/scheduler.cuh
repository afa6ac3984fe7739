// Which work items a CTA takes (work_order.cuh) and which KV tiles each visits.
#pragma once

#include "fwd/args.cuh"
#include "fwd/varlen.cuh"
#include "fwd/work_order.cuh"

namespace fp {

// A work item: a query tile of one head of one sequence, where the sequence lies and the KV tiles it visits.
struct Item {
    int m_block, head, batch;
    SeqSpan span;
    KvRange range;
};

// This CTA's item index in round `round` (work_order.cuh).
__device__ __forceinline__ int work_index(int round)
{
    const int position = round % 2 == 0 ? blockIdx.x : gridDim.x - 1 - blockIdx.x;
    return round * gridDim.x + position;
}

// How many work items the call has: varlen calls read the plan kernel's count (each round: held across the item it
// took a register of the converter's 40).
template <class Config>
__device__ __forceinline__ int item_count(const FwdArgs &args)
{
    if constexpr (Config::kVarlen)
        return ptx::ld_global_nc_s32(&args.varlen_header->tiles) * args.heads_per_kv;
    else
        return args.items;
}

// Item `index` of the call: from the dense order (work_order.cuh) or the plan's list (varlen.cuh).
template <class Config>
__device__ __forceinline__ Item item_at(const FwdArgs &args, int index)
{
    if constexpr (Config::kVarlen) {
        const VarlenTile t = args.varlen_tiles[index / args.heads_per_kv];
        const int end = t.kv_range & 0xffff, tail = end > 0 ? t.seqlen_k - (end - 1) * Config::kBlockN : 0;
        return {t.m_block, t.kv_head * args.heads_per_kv + index % args.heads_per_kv, t.batch,
                {t.q_start, t.k_start, t.seqlen_q, t.seqlen_k},
                {end, t.kv_range >> 16, tail < Config::kBlockN ? tail : Config::kBlockN}};
    } else {
        const WorkItem w = work_item_at(index, args.m_blocks, args.heads_q, args.batch, args.section_heads);
        return {w.m_block, w.head, w.batch, {0, 0, args.seqlen_q, args.seqlen_k},
                kv_range_of<Config::kBlockM, Config::kBlockN>(w.m_block, args.seqlen_q, args.seqlen_k, args.causal)};
    }
}

// Runs run(item, round) on each of this CTA's work items in turn: every role walks them with its own ring position.
template <class Config, class Run>
__device__ __forceinline__ void for_each_item(const FwdArgs &args, Run &&run)
{
    for (int round = 0;; ++round) {
        const int index = work_index(round);
        if (index >= item_count<Config>(args))
            return;
        run(item_at<Config>(args, index), round);
    }
}

// The query rows of the item of round `round` in the packed q and out (q_start, seqlen_q) for the epilogue: varlen reads
// them again from the plan's entry (in L1 since the item began) rather than hold two registers across the main loop,
// where the varlen consumers are at their register limit; dense calls take the item's.
template <class Config>
__device__ __forceinline__ SeqSpan out_span(const FwdArgs &args, const Item &item, int round)
{
    if constexpr (Config::kVarlen) {
        const VarlenTile *tile = args.varlen_tiles + work_index(round) / args.heads_per_kv;
        return {ptx::ld_global_nc_s32(&tile->q_start), 0, ptx::ld_global_nc_s32(&tile->seqlen_q), 0};
    } else {
        return item.span;
    }
}

// Varlen: the plan's entry of item `index` into L1 while this one runs (its first load otherwise waits on L2 at the
// start of every item); an index past the list touches nothing.
template <class Config>
__device__ __forceinline__ void prefetch_item(const FwdArgs &args, int index)
{
    if constexpr (Config::kVarlen) {
        if (index < args.items)
            ptx::prefetch_global_l1(args.varlen_tiles + index / args.heads_per_kv);
    }
}

}  // namespace fp
