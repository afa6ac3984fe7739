// Ring positions of the K, V and V^T slots, and the named barriers of the consumer warpgroups.
#pragma once

#include <cstdint>

namespace fp {

// A position in a ring of kStages slots: the slot and the parity of its fill (both count on across items).
template <int kStages>
struct PipelineState {
    int stage = 0;
    uint32_t phase = 0;
    __device__ __forceinline__ void advance()
    {
        if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
        }
    }
};

// One KV tile's positions in the rings: K's and V's (kv), and V^T's (vt), which is the same ring unless V^T has
// more stages (FwdConfig::kVtStages). Both count on across items.
template <class Config>
struct RingPositions {
    using KvState = PipelineState<Config::kStages>;
    using VtState = PipelineState<Config::kVtStages>;
    KvState kv;
    VtState vt_own;  // unused where V^T's ring is K's and V's
    __device__ __forceinline__ const VtState &vt() const
    {
        if constexpr (Config::kVtStages == Config::kStages)
            return kv;
        else
            return vt_own;
    }
    // The V^T ring to advance on its own (the producer's V^T lane where v is prepared: it issues no V).
    __device__ __forceinline__ VtState &vt_ring()
    {
        if constexpr (Config::kVtStages == Config::kStages)
            return kv;
        else
            return vt_own;
    }
    __device__ __forceinline__ void advance()
    {
        kv.advance();
        if constexpr (Config::kVtStages != Config::kStages)
            vt_own.advance();
    }
};

// Named barriers (bar.sync ids; 0 is __syncthreads). The two consumer warpgroups take turns issuing wgmma.
enum class NamedBarrier : uint32_t {
    kConsumer0Turn = 1,
    kConsumer1Turn = 2,
    kConsumer0Vote = 3,  // float16 scores: a warpgroup agrees on its item's path (bar.red.or)
    kConsumer1Vote = 4,
};

}  // namespace fp
