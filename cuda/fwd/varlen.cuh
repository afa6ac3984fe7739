// Variable-length batches and paged KV caches: the work list the plan kernel (cuda/varlen_plan.cu) writes into the
// caller's workspace, and the KV range of a query tile, which the plan and the equal-length kernels compute alike.
//
// The plan lists every (sequence, query tile, kv head) with the KV tiles it visits, in the equal-length kernels'
// order (work_order.cuh) over L2 sections of (sequence, kv head) pairs: one long prompt among many short ones is
// spread over every SM, and the K and V a section reads stay in L2.
#pragma once

#include <cstdint>

#include "fwd/work_order.cuh"
#include "launch_common.h"

namespace fp {

// One (sequence, query tile, kv head) of the list: the items of its kv head's query heads. Rows are rows of the
// packed buffers.
struct alignas(16) VarlenTile {
    int32_t q_start, k_start;    // the sequence's first query and key row (paged: k_start 0)
    int32_t seqlen_q, seqlen_k;  // its lengths
    int32_t batch, m_block;      // the sequence and the query tile within it
    int32_t kv_head;
    int32_t kv_range;            // KvRange::end | KvRange::mask_from << 16 (both below 2^15: kVarlenMaxLevels)
};

// The workspace's first 16 bytes, then VarlenTile[tiles]. error 0: the device arrays were valid (flashprefill.h).
struct alignas(16) VarlenHeader {
    int32_t error;        // an fp_varlen_error (launch_common.h), 0 when valid
    int32_t error_batch;  // the first sequence found at fault
    int32_t error_value;  // the offending value
    int32_t tiles;        // entries of the list (0 after an error)
};


// A sequence's place in the packed buffers (dense calls: q_start = k_start = 0 and the call's lengths).
struct SeqSpan {
    int q_start, k_start, seqlen_q, seqlen_k;
};

// The KV tiles a query tile visits: [0, end), with tiles >= mask_from needing the mask; tail_keys: the keys of
// tile end - 1 (the first visited) below seqlen_k, kBlockN where it is whole.
struct KvRange {
    int end;
    int mask_from;
    int tail_keys;
};

// KvRange of query tile m_block of a sequence of seqlen_q queries over seqlen_k keys (bottom-right causal).
template <int kBlockM, int kBlockN>
FP_HOST_DEVICE inline KvRange kv_range_of(int m_block, int seqlen_q, int seqlen_k, bool causal)
{
    const int tiles = (seqlen_k + kBlockN - 1) / kBlockN;
    const int partial_from = seqlen_k % kBlockN ? tiles - 1 : tiles;
    int end = tiles, mask_from = partial_from;
    if (causal) {
        const int offset = seqlen_k - seqlen_q;  // bottom-right alignment
        // the tile's last row sees keys <= (m_block + 1) * kBlockM - 1 + offset; none where that is negative
        const int last_key = (m_block + 1) * kBlockM - 1 + offset;
        end = last_key < 0 ? 0 : last_key / kBlockN + 1 < tiles ? last_key / kBlockN + 1 : tiles;
        // tiles wholly at or below the first row's limit need no causal mask
        const int first_limit = m_block * kBlockM + offset + 1;
        const int unmasked = first_limit < 0 ? 0 : first_limit / kBlockN;
        mask_from = unmasked < partial_from ? unmasked : partial_from;
    }
    const int tail = end > 0 ? seqlen_k - (end - 1) * kBlockN : 0;
    return {end, mask_from, tail < kBlockN ? tail : kBlockN};
}

}  // namespace fp
