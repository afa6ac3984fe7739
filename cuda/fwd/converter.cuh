// fp8: the converting threads make each V tile ready for P.V: V^T for e4m3 codes, float16 for float16 P.
#pragma once

#include <cstdint>

#include "fwd/pipeline.cuh"
#include "fwd/scheduler.cuh"
#include "fwd/smem.cuh"
#include "fwd/roles.cuh"
#include "fwd/transpose_v.cuh"
#include "fwd/v_tail.cuh"
#include "fwd/widen_v.cuh"
#include "ptx.cuh"

namespace fp {

// fp8: the converting threads turn each V tile into V^T (e4m3 P) or widen it (float16 P) as it lands, once the
// P.V that read the stage's last V^T is done (vt_empty), and hand V's slot back to the producer at once (v_empty),
// with the tile's block exponent passed on beside V^T: the next V loads while this one waits for its P.V.
template <class Config>
__device__ __forceinline__ void v_converter(FwdSharedStorage<Config> &ss, KvRange range,
                                            const TransposeLanes<Config::kBlockN> &lanes, uint32_t thread,
                                            RingPositions<Config> &rings)
{
    for (int it = 0; it < range.end; ++it, rings.advance()) {
        const int v = rings.kv.stage, vt = rings.vt().stage;
        ptx::mbarrier_wait_parity(&ss.v_full[v], rings.kv.phase);
        ptx::mbarrier_wait_parity(&ss.vt_empty[vt], rings.vt().phase ^ 1);
        if (thread == 0)
            ss.vt_exponent[vt] = ss.v_exponent[v];
        if (Config::kVarlen && it == 0 && range.tail_keys < Config::kBlockN) {
            zero_v_rows<Config::kVChunks, Config::kBlockN, Config::kSwizzleV, Config::kConverterThreads>(
                ptx::smem_addr(ss.v[v]), range.tail_keys, thread);
            ptx::bar_sync(static_cast<uint32_t>(NamedBarrier::kVTailZeroed), Config::kConverterThreads);
        }
        if constexpr (Config::kPCodes)
            transpose_v_tile_fp8(ptx::smem_addr(ss.v[v]), ptx::smem_addr(ss.vt[vt]), lanes);
        else
            widen_v_tile_fp8<Config>(ptx::smem_addr(ss.v[v]), ptx::smem_addr(ss.vt[vt]), thread);
        ptx::fence_proxy_async_shared();  // V^T's writes before the tensor cores read them, V's reads before TMA
        ptx::mbarrier_arrive(&ss.vt_full[vt]);
        ptx::mbarrier_arrive(&ss.v_empty[v]);
    }
}

}  // namespace fp
