// The order of the persistent grid's work items (query tiles of 128 rows of one head): which CTA takes which item,
// and the L2 sections that keep the K and V being read by the running CTAs inside L2.
//
// Static rounds: CTA c takes item index c in round 0, gridDim.x - 1 - c in round 1, and so on, snaking, so that
// over every two rounds of items whose cost falls linearly each CTA draws the same amount of work (no atomic counter,
// which would need a workspace the C ABI does not have); every warpgroup of a CTA walks the same sequence.
//
// Sections: without them the items run m-block by m-block over every (batch, head), so every round of CTAs reads
// the K and V of all heads, from DRAM again once those exceed L2 (and the kernels, at the power limit, lose clock to
// the DRAM traffic). So (batch, head) pairs are cut into sections of `section_heads` that fit in 40% of L2 (whole KV
// groups) and the sections run one after the other. Within a section the m-blocks run longest first in the last
// section and in every second one before it, shortest first in the others (a zigzag): a descending run followed by
// a descending one would put the shortest and the longest items in one round and break the snake's balance. A
// section holds at least three rounds of items. Sections are used from 16 m-blocks (2k tokens) on: short rows
// re-read K and V as often (every m-block of a head reads its K and V up to the diagonal), and below 64 m-blocks the
// traffic saved outweighed the imbalance wherever measured (bench/NOTES.md).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define FP_HOST_DEVICE __host__ __device__
#else
#define FP_HOST_DEVICE
#endif

namespace fp {

struct WorkItem {
    int m_block, head, batch;
};

// Item `index` (< m_blocks * heads_q * batch) of the order above.
FP_HOST_DEVICE inline WorkItem work_item_at(int index, int m_blocks, int heads_q, int batch, int section_heads)
{
    const int heads_total = heads_q * batch;
    const int per_section = m_blocks * section_heads;
    const int section = index / per_section, within = index - section * per_section;
    const int sections = (heads_total + section_heads - 1) / section_heads;
    const int heads_in = heads_total - section * section_heads < section_heads ? heads_total - section * section_heads
                                                                               : section_heads;
    const int m_position = within / heads_in;
    const int pair = section * section_heads + within % heads_in;  // batch * heads_q + head
    const bool longest_first = (sections - 1 - section) % 2 == 0;
    return {longest_first ? m_blocks - 1 - m_position : m_position, pair % heads_q, pair / heads_q};
}

// The (batch, head) pairs of one section: a divisor of heads_q * batch made of whole KV groups.
inline int section_heads_for(int m_blocks, int heads_q, int heads_kv, int batch, int64_t kv_head_bytes,
                             int64_t l2_bytes, int grid)
{
    constexpr int kMinMBlocks = 16, kMinRounds = 3;
    const int heads_total = heads_q * batch, group = heads_q / heads_kv;
    const int64_t groups_fit = l2_bytes * 2 / 5 / (kv_head_bytes > 0 ? kv_head_bytes : 1);
    if (m_blocks < kMinMBlocks || groups_fit * group >= heads_total)
        return heads_total;
    const int64_t fit = (groups_fit > 1 ? groups_fit : 1) * group;
    const int64_t needed = (static_cast<int64_t>(kMinRounds) * grid + m_blocks - 1) / m_blocks;
    int below = group, above = heads_total;  // the largest divisor <= fit, the smallest >= needed
    for (int d = group; d <= heads_total; d += group) {
        if (heads_total % d != 0)
            continue;
        if (d <= fit)
            below = d;
        if (d >= needed && d < above)
            above = d;
    }
    return below >= needed ? below : above;
}

}  // namespace fp
