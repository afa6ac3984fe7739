// Ring positions of the K, V and V^T slots (each slot has a full and an empty mbarrier: smem.cuh).
#pragma once

#include <cstdint>

#include "ptx.cuh"

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
    // A consumer's next KV tile: K's slot and the parity of its fill, P.V's V (fp8: V^T) slot and its parity.
    struct Slots {
        int k;
        uint32_t k_phase;
        int v;
        uint32_t v_phase;
    };
    __device__ __forceinline__ Slots take()
    {
        const Slots slots{kv.stage, kv.phase, vt().stage, vt().phase};
        advance();
        return slots;
    }
};

// Waits for a slot's fill by a test that does not wait first, and the waiting try_wait only where the tile has not
// landed: ptxas hoisted a lone try_wait into the softmax before it, which then held the rest of the softmax behind a
// late tile; the test it may hoist does not wait.
__device__ __forceinline__ void mbarrier_wait_tested(uint64_t *full, uint32_t phase)
{
    if (!ptx::mbarrier_test_wait_parity(full, phase))
        ptx::mbarrier_wait_parity(full, phase);
}

}  // namespace fp
