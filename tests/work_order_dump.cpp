// Reads cases "m_blocks heads_q heads_kv batch kv_head_bytes l2_bytes grid" from stdin; for each prints the section
// size that cuda/fwd/work_order.cuh chooses and then its items in index order as "m_block head batch" triples, one line.
#include <cstdint>
#include <cstdio>

#include "fwd/work_order.cuh"

int main()
{
    int m_blocks, heads_q, heads_kv, batch, grid;
    long long kv_head_bytes, l2_bytes;
    while (std::scanf("%d %d %d %d %lld %lld %d", &m_blocks, &heads_q, &heads_kv, &batch, &kv_head_bytes, &l2_bytes,
                      &grid) == 7) {
        const int section = fp::section_heads_for(m_blocks, heads_q, heads_kv, batch, kv_head_bytes, l2_bytes, grid);
        std::printf("%d\n", section);
        for (int index = 0; index < m_blocks * heads_q * batch; ++index) {
            const fp::WorkItem w = fp::work_item_at(index, m_blocks, heads_q, batch, section);
            std::printf("%d %d %d ", w.m_block, w.head, w.batch);
        }
        std::printf("\n");
    }
    return 0;
}
