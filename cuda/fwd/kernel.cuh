// The Hopper forward kernel: a persistent grid of CTAs, each taking work items of (128 query rows, query head,
// batch) in turn (scheduler.cuh), warp-specialised; the producer loads the next item's tiles while the consumers
// finish the last one. This file sets up shared memory and the barriers and gives each warp its role:
//   warpgroup 0, lanes 0-1 (varlen: warp 0) (producer.cuh): every TMA load, kStages deep, each K and V tile with
//       its fp8 descale.
//   fp8 (converter.cuh): a warpgroup of its own at 128 keys a tile, warps 1-3 of warpgroup 0 at 192: V made ready
//       for P.V as it lands (V^T for e4m3 codes, float16 for float16 P); none where v comes prepared.
//   the last two warpgroups (mainloop.cuh): the consumers, 64 query rows each.
#pragma once

#include <cstdint>

#include "fwd/converter.cuh"
#include "fwd/mainloop.cuh"
#include "fwd/producer.cuh"
#include "fwd/scheduler.cuh"
#include "fwd/smem.cuh"
#include "ptx.cuh"

namespace fp {

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1) fwd_kernel(const __grid_constant__ FwdArgs args)
{
    extern __shared__ uint8_t smem_raw[];
    // The runtime aligns dynamic shared memory to 16 bytes only; the launcher adds 1024 bytes of slack. The
    // offset is taken on the shared-window address and applied to the array, so the compiler still knows
    // every access through ss is to shared memory (through an integer it would emit generic LD/ST).
    const uint32_t align_offset = (1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u;
    auto &ss = *reinterpret_cast<FwdSharedStorage<Config> *>(smem_raw + align_offset);

    // Barriers and V^T's rows of ones in this body: moved into functions of their own they changed the code.
    if (threadIdx.x == 0) {
        ptx::prefetch_tensormap(&args.tm_q);
        ptx::prefetch_tensormap(&args.tm_k);
        ptx::prefetch_tensormap(&args.tm_v);
        if constexpr (Config::kVPrepared && VtLayout<Config::kBlockN>::kTailBytes > 0)
            ptx::prefetch_tensormap(&args.tm_v_tail);
        ptx::mbarrier_init(&ss.q_full, 1);
        ptx::mbarrier_init(&ss.q_empty, 128 * Config::kConsumerWarpgroups);  // every consumer thread
        for (int i = 0; i < Config::kStages; ++i) {
            ptx::mbarrier_init(&ss.k_full[i], 1);
            ptx::mbarrier_init(&ss.v_full[i], 1);
            ptx::mbarrier_init(&ss.k_empty[i], 128 * Config::kConsumerWarpgroups);  // every consumer thread
            // fp8: V's slot is freed by the converting threads, bf16's by the consumers after P.V
            ptx::mbarrier_init(&ss.v_empty[i], Config::kIsFp8 ? Config::kConverterThreads
                                                              : 128 * Config::kConsumerWarpgroups);
        }
        for (int i = 0; i < Config::kVtStages; ++i) {
            // every converting thread, or the V^T lane's expect_tx where TMA fills V^T (prepared v)
            ptx::mbarrier_init(&ss.vt_full[i], Config::kVPrepared ? 1 : Config::kConverterThreads);
            ptx::mbarrier_init(&ss.vt_empty[i], 128 * Config::kConsumerWarpgroups);
        }
        ptx::fence_mbarrier_init();
    }
    if constexpr (Config::kPCodes) {  // each V^T slot's rows of ones, once (VtLayout)
        using Layout = VtLayout<Config::kBlockN>;
        constexpr uint32_t kMainWords = Layout::kMainOnesBytes / 4, kWords = kMainWords + Layout::kTailOnesBytes / 4;
        for (uint32_t i = threadIdx.x; i < Config::kVtStages * kWords; i += Config::kThreads) {
            const uint32_t word = i % kWords;
            const uint32_t offset = word < kMainWords ? Layout::kMainBytes + 4 * word
                                                      : Layout::kTailOnesOffset + 4 * (word - kMainWords);
            ptx::st_shared_b32(ptx::smem_addr(ss.vt[i / kWords]) + offset, kE4m3OneX4);
        }
        ptx::fence_proxy_async_shared();  // the tensor cores read them
    }
    if constexpr (Config::kQBf16) {  // the bf16 q rotation's B, once
        write_q_rotation<Config>(args, ss);
        ptx::fence_proxy_async_shared();  // the tensor cores read it
    }
    __syncthreads();

    // Varlen: launched while the plan kernel runs (programmatic dependent launch); its list is read from here on.
    if constexpr (Config::kVarlen)
        ptx::griddepcontrol_wait();
    RingPositions<Config> rings;
    const int warpgroup = threadIdx.x / 128;
    if (warpgroup < Config::kProducerWarpgroups) {
        ptx::setmaxnreg_dec<Config::kProducerRegs>();
        if (threadIdx.x < Config::kIssuingThreads) {  // the issuing lanes (producer)
            for_each_item<Config>(args, [&](Item item, int round) { producer<Config>(args, ss, item, round, rings); });
        } else if constexpr (Config::kIsFp8 && !Config::kVPrepared) {
            if (threadIdx.x >= Config::kConverterThread0) {
                const uint32_t thread = threadIdx.x - Config::kConverterThread0;
                const TransposeLanes<Config::kBlockN> lanes(thread);
                for_each_item<Config>(args,
                    [&](Item item, int) { v_converter<Config>(ss, item.range, lanes, thread, rings); });
            }
        }
    } else {
        ptx::setmaxnreg_inc<Config::kConsumerRegs>();
        for_each_item<Config>(args, [&](Item item, int round) { consumer<Config>(args, ss, item, round, rings); });
    }
}

}  // namespace fp
