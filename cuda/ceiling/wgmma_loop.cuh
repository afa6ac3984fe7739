// The wgmma loop: attention's matrix products without its softmax, as a ceiling for the forward kernels. Each CTA is
// one of the forward kernel's (fwd/kernel.cuh): the same configuration (tiles, stages, register budgets), shared
// memory, persistent work order (scheduler.cuh), producer lanes and TMA loads (producer.cuh), consumer turns
// (roles.cuh) and wgmma of S = Q K^T (scores.cuh) and O += P V (pv.cuh). Only the softmax is replaced: P is S rounded
// to the input type (p_from_s.cuh). fp8 reads v prepared (fwd/vt_layout.cuh), so no warp transposes V.
//
//   Q:          wait for Q, into registers
//   tile 0:     S(0) = Q K(0)^T; P(0) = round(S(0))
//   tile n > 0: [my turn] S(n) = Q K(n)^T; O += P(n-1) V(n-1) [your turn]; wait S(n), V(n), P(n-1) V(n-1);
//               P(n) = round(S(n))
//   last:       O += P(last) V(last); O (bf16, unscaled) and, fp8, P's row sums to global memory
// fp8 P.V also multiplies P by rows of ones (pv.cuh), as in the forward kernels: those row sums are stored too, so
// that the wgmma computing them is kept (ptxas removes a wgmma whose result is never read).
// Causal items visit the forward kernel's KV tiles (the diagonal ones whole, unmasked): the same matrix products.
#pragma once

#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/descriptors.cuh"
#include "fwd/o_store.cuh"
#include "fwd/pipeline.cuh"
#include "fwd/policies.cuh"
#include "fwd/producer.cuh"
#include "fwd/roles.cuh"
#include "fwd/scheduler.cuh"
#include "fwd/smem.cuh"
#include "fwd/vt_layout.cuh"
#include "ptx.cuh"

namespace fp {

// The forward kernel's parameters (the maps, shape, work order and out are read; out bf16 as attention's) and, fp8,
// where P's row sums go: row_sums (batch, heads_q, seqlen_q) unless NULL.
struct WgmmaLoopArgs {
    FwdArgs attention;
    float *row_sums;
};

// O rounded to bf16 as the forward kernel stores it (o_store.cuh: 16 bytes a thread and store), unscaled; fp8: the
// rows' sums, which each thread holds whole (every column of ones sums the row), by lane % 4 == 0.
template <class Config>
__device__ __forceinline__ void store_o(const WgmmaLoopArgs &args, const Item &item, const float (&o)[kAccRegs],
                                        const float (&row_sum)[2], int query_half0, uint32_t lane)
{
    const FwdArgs &a = args.attention;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int query = query_half0 + 8 * h;
        const bool in_range = query < a.seqlen_q;
        uint32_t packed[kAccRegs / 4];
#pragma unroll
        for (int j = 0; j < kAccRegs / 4; ++j)
            packed[j] = ptx::cvt_rn_bf16x2_f32(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
        store_row_bf16(a.out + item.batch * a.out_stride_batch + static_cast<int64_t>(in_range ? query : 0) *
                                                                     a.out_stride_seq + item.head * a.out_stride_head,
                       packed, lane, in_range);
        if (Config::kPCodes && args.row_sums != nullptr && in_range && lane % 4 == 0)
            args.row_sums[(static_cast<int64_t>(item.batch) * a.heads_q + item.head) * a.seqlen_q + query] =
                row_sum[h];
    }
}

// One work item of a consumer warpgroup (mainloop.cuh's schedule, its softmax replaced by PFromS::pack).
template <class Config, class PFromS>
__device__ __forceinline__ void wgmma_loop_consumer(const WgmmaLoopArgs &args, FwdSharedStorage<Config> &ss,
                                                    const Item &item, int round, RingPositions<Config> &rings)
{
    using Scores = F32Scores<Config>;
    using Pv = typename PvOf<Config, Config::kP>::type;
    const ConsumerThread<Config> me;
    const Turns<Config::kTurns, Config::kConsumerWarpgroups> turns{
        static_cast<uint32_t>(me.index == 0 ? NamedBarrier::kConsumer0Turn : NamedBarrier::kConsumer1Turn),
        static_cast<uint32_t>(me.index == 0 ? NamedBarrier::kConsumer1Turn : NamedBarrier::kConsumer0Turn)};
    const int query_half0 = item.m_block * Config::kBlockM + me.index * Config::kRowsPerWarpgroup + 16 * me.warp +
                            me.lane / 4;

    typename Scores::QFragments q_frag;
    const uint64_t q_desc0 = wgmma_desc<Config::kSwizzleQk>(
        ptx::smem_addr(ss.q) + me.index * Config::kRowsPerWarpgroup * Config::kSwizzleQk, 16);
    const uint64_t k_desc0 = wgmma_desc<Config::kSwizzleQk>(ptx::smem_addr(ss.k[0]), 16);
    Pv pv(ss);
    typename Scores::Registers s;
    uint32_t p[Pv::kPRegs];
    float row_sum[2] = {0.0f, 0.0f};  // fp8: P's row sums, from P.V's columns of ones
    constexpr float kNoRescale[2] = {1.0f, 1.0f};
    // P.V's B operand at stage 0 (mainloop.cuh): V^T K-major (fp8), or V as loaded, MN-major (bf16).
    const uint64_t v_desc0 = Config::kPCodes
                                 ? wgmma_desc_sw128(ptx::smem_addr(ss.vt[0]), 16)
                                 : wgmma_desc_sw128(ptx::smem_addr(ss.v[0]), Config::kBlockN * Config::kSwizzleV);
    const uint64_t vt_tail_desc0 =
        wgmma_desc<64>(ptx::smem_addr(ss.vt[0]) + VtLayout<Config::kBlockN>::kTailOffset, 16);
    auto pv_descriptors = [&](int stage) {
        const uint32_t stage_bytes = stage * Pv::kSlotBytes;
        return PvDescriptors{wgmma_desc_advance(v_desc0, stage_bytes), wgmma_desc_advance(vt_tail_desc0, stage_bytes)};
    };

    if (me.index == 1)
        turns.pass();  // consumer 0 starts
    ptx::mbarrier_wait_parity(&ss.q_full, round & 1);
    Scores::load_q_fragments(q_frag, ss, me.index, me.lane, me.warp);
    ptx::fence_proxy_async_shared();  // ldmatrix's generic reads of Q before TMA's next write
    ptx::mbarrier_arrive(&ss.q_empty);

    int prev_vt = rings.vt().stage;
    PvDescriptors pv_desc = pv_descriptors(prev_vt);
    Scores::clear(s);
    {  // tile 0: no P.V yet
        const auto [stage, phase, vt, vt_phase] = rings.take();
        ptx::mbarrier_wait_parity(&ss.k_full[stage], phase);
        turns.take();
        ptx::wgmma_fence();
        Scores::issue(s, q_frag, q_desc0, k_desc0, stage);
        turns.pass();
        ptx::wgmma_wait_group<0>();
        ptx::fence_registers(s);
        ptx::mbarrier_arrive(&ss.k_empty[stage]);
        mbarrier_wait_tested(Pv::full(ss, vt), vt_phase);
        PFromS::pack(s, p);
    }
    for (int it = 1; it < item.range.end; ++it) {
        const auto [stage, phase, vt, vt_phase] = rings.take();
        ptx::mbarrier_wait_parity(&ss.k_full[stage], phase);
        turns.take();
        ptx::wgmma_fence();
        Scores::issue(s, q_frag, q_desc0, k_desc0, stage);
        pv.issue(pv_desc, p);
        ptx::wgmma_commit_group();
        turns.pass();
        ptx::wgmma_wait_group<1>();  // S(n) is done, P(n-1) V(n-1) may still run
        ptx::fence_registers(s);
        ptx::mbarrier_arrive(&ss.k_empty[stage]);
        mbarrier_wait_tested(Pv::full(ss, vt), vt_phase);
        ptx::wgmma_wait_group<0>();
        ptx::fence_registers(p);
        ptx::fence_registers(pv.o);
        ptx::mbarrier_arrive(Pv::empty(ss, prev_vt));
        pv.add_tile_sums(row_sum, kNoRescale);
        PFromS::pack(s, p);
        pv_desc.move<Pv::kSlotBytes>(prev_vt, vt);
        prev_vt = vt;
    }
    {  // the last P.V
        ptx::wgmma_fence();
        pv.issue(pv_desc, p);
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<0>();
        ptx::fence_registers(pv.o);
        ptx::mbarrier_arrive(Pv::empty(ss, prev_vt));
        pv.add_last_sums(row_sum);
    }
    if (me.index == 0)
        turns.take();  // takes consumer 1's last hand-over, so none is left pending
    store_o<Config>(args, item, reinterpret_cast<const float(&)[kAccRegs]>(pv.o), row_sum, query_half0, me.lane);
}

// The kernel: fwd_kernel's set-up and roles for the configurations whose V needs no converting warps.
template <class Config, class PFromS>
__global__ void __launch_bounds__(Config::kThreads, 1) wgmma_loop_kernel(const __grid_constant__ WgmmaLoopArgs args)
{
    static_assert(Config::kConverter == ConverterPlace::kNone && !Config::kVarlen && Config::kQInRegisters,
                  "the wgmma loop runs the dense kernels whose V needs no converting warps and whose Q fits registers");
    extern __shared__ uint8_t smem_raw[];
    const uint32_t align_offset = (1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u;  // fwd/kernel.cuh
    auto &ss = *reinterpret_cast<FwdSharedStorage<Config> *>(smem_raw + align_offset);
    const FwdArgs &a = args.attention;

    constexpr uint32_t kConsumerThreads = 128 * Config::kConsumerWarpgroups;
    if (threadIdx.x == 0) {
        ptx::prefetch_tensormap(&a.tm_q);
        ptx::prefetch_tensormap(&a.tm_k);
        ptx::prefetch_tensormap(&a.tm_v);
        if constexpr (Config::kVPrepared && VtLayout<Config::kBlockN>::kTailBytes > 0)
            ptx::prefetch_tensormap(&a.tm_v_tail);
        ptx::mbarrier_init(&ss.q_full, 1);
        ptx::mbarrier_init(&ss.q_empty, kConsumerThreads);
        for (int i = 0; i < Config::kStages; ++i) {
            ptx::mbarrier_init(&ss.k_full[i], 1);
            ptx::mbarrier_init(&ss.v_full[i], 1);
            ptx::mbarrier_init(&ss.k_empty[i], kConsumerThreads);
            ptx::mbarrier_init(&ss.v_empty[i], kConsumerThreads);  // bf16: freed after P.V (prepared v: unused)
        }
        for (int i = 0; i < Config::kVtStages; ++i) {
            ptx::mbarrier_init(&ss.vt_full[i], 1);  // the V^T lane's expect_tx (prepared v)
            ptx::mbarrier_init(&ss.vt_empty[i], kConsumerThreads);
        }
        ptx::fence_mbarrier_init();
    }
    if constexpr (Config::kPCodes) {  // each V^T slot's rows of ones, once: P.V's row-sum columns (VtLayout)
        using Layout = VtLayout<Config::kBlockN>;
        constexpr uint32_t kMainWords = Layout::kMainOnesBytes / 4, kWords = kMainWords + Layout::kTailOnesBytes / 4;
        for (uint32_t i = threadIdx.x; i < Config::kVtStages * kWords; i += Config::kThreads) {
            const uint32_t word = i % kWords;
            const uint32_t offset = word < kMainWords ? Layout::kMainBytes + 4 * word
                                                      : Layout::kTailOnesOffset + 4 * (word - kMainWords);
            ptx::st_shared_b32(ptx::smem_addr(ss.vt[i / kWords]) + offset, kE4m3OneX4);
        }
        ptx::fence_proxy_async_shared();
    }
    __syncthreads();

    RingPositions<Config> rings;
    if (threadIdx.x / 128 < Config::kProducerWarpgroups) {
        ptx::setmaxnreg_dec<Config::kProducerRegs>();
        if (threadIdx.x < Config::kIssuingThreads)
            for_each_item<Config>(a, [&](Item item, int round) { producer<Config>(a, ss, item, round, rings); });
    } else {
        ptx::setmaxnreg_inc<Config::kConsumerRegs>();
        for_each_item<Config>(a,
            [&](Item item, int round) { wgmma_loop_consumer<Config, PFromS>(args, ss, item, round, rings); });
    }
}

}  // namespace fp
