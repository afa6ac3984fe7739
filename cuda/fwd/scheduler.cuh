// Which work items a CTA takes (work_order.cuh) and which KV tiles each visits.
#pragma once

#include "fwd/args.cuh"
#include "fwd/work_order.cuh"

namespace fp {

// The KV tiles a query tile visits: [0, end), with tiles >= mask_from needing the mask.
struct KvRange {
    int end;
    int mask_from;
};

template <class Config>
__device__ __forceinline__ KvRange kv_range(const FwdArgs &args, int m_block)
{
    const int tiles = (args.seqlen_k + Config::kBlockN - 1) / Config::kBlockN;
    const int partial_from = args.seqlen_k % Config::kBlockN ? tiles - 1 : tiles;
    if (!args.causal)
        return {tiles, partial_from};
    const int offset = args.seqlen_k - args.seqlen_q;  // bottom-right alignment
    // the tile's last row sees keys <= (m_block + 1) * kBlockM - 1 + offset
    const int end = min(tiles, ((m_block + 1) * Config::kBlockM + offset + Config::kBlockN - 1) / Config::kBlockN);
    // tiles wholly at or below the first row's limit need no causal mask
    const int unmasked = (m_block * Config::kBlockM + offset + 1) / Config::kBlockN;
    return {end, min(unmasked, partial_from)};
}

// This CTA's item index in round `round` (work_order.cuh).
__device__ __forceinline__ int work_index(int round)
{
    const int position = round % 2 == 0 ? blockIdx.x : gridDim.x - 1 - blockIdx.x;
    return round * gridDim.x + position;
}

}  // namespace fp
