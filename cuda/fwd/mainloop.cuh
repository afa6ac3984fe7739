// The consumer warpgroups' main loop: one work item, 64 query rows per warpgroup, over the item's KV tiles from the
// diagonal down. What varies between the kernels lives in three policies (policies.cuh): the scores (S = Q K^T:
// scores.cuh, scores_f16.cuh), the softmax (softmax_exp2.cuh, softmax_codes.cuh) and P.V (pv.cuh).
//
//   Q:          wait for Q; into registers where it fits (float16 scores: q's codes first within their bound)
//   tile 0:     S(0) = Q K(0)^T; softmax(0)
//   tile n > 0: [my turn] S(n) = Q K(n)^T; O *= the factor of softmax(n-1); O += P(n-1) V(n-1) [your turn]
//               wait S(n); softmax(n) under the running P.V; wait V(n); wait P(n-1) V(n-1); P(n) to P's registers
//   last:       O *= the last factor; O += P(last) V(last); O / row sum to global memory
// The turns (named barriers, Config::kTurns) let one warpgroup's softmax overlap the other's matrix products.
//
// The shape of this function is part of the machine code: the compiler simplifies each function (lambdas
// included) before inlining it, so moving code between the body, run_tiles and the policies, or computing shared-
// memory descriptors outside the body, changed the instruction order of some kernels (tests/test_sass.py pins it).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/descriptors.cuh"
#include "fwd/mask.cuh"
#include "fwd/o_store.cuh"
#include "fwd/pipeline.cuh"
#include "fwd/policies.cuh"
#include "fwd/q_from_bf16.cuh"
#include "fwd/roles.cuh"
#include "fwd/scheduler.cuh"
#include "fwd/smem.cuh"
#include "fwd/softmax.cuh"
#include "fwd/v_tail.cuh"
#include "fwd/vt_layout.cuh"
#include "ptx.cuh"

namespace fp {

// Where row `query` of an item's query tile goes in out (and its lse, when asked for): the batch's own rows, or the
// sequence's rows of the packed tensor with lse (heads_q, total_q).
template <class Config>
struct OutRows {
    const FwdArgs &args;
    int batch, head, q_start;
    __device__ __forceinline__ __nv_bfloat16 *row(int query) const
    {
        if constexpr (Config::kVarlen)
            return args.out + static_cast<int64_t>(q_start + query) * args.out_stride_seq +
                   head * args.out_stride_head;
        return args.out + batch * args.out_stride_batch + static_cast<int64_t>(query) * args.out_stride_seq +
               head * args.out_stride_head;
    }
    __device__ __forceinline__ float *lse(int query) const
    {
        if constexpr (Config::kVarlen)
            return args.lse + static_cast<int64_t>(head) * args.total_q + q_start + query;
        return args.lse + (static_cast<int64_t>(batch) * args.heads_q + head) * args.seqlen_q + query;
    }
};

// One work item; `rings` holds the next tile's K and V (fp8: V^T) slots to consume.
template <class Config>
__device__ __forceinline__ void consumer(const FwdArgs &args, FwdSharedStorage<Config> &ss, Item item, int round,
                                         RingPositions<Config> &rings)
{
    prefetch_item<Config>(args, work_index(round + 1));  // the next item's entry, which this role waits for
    const int m_block = item.m_block, head = item.head, batch = item.batch;
    const KvRange range = item.range;
    using Scores = typename Policies<Config>::Scores;
    using Softmax = typename Policies<Config>::Softmax;
    using Pv = typename Policies<Config>::Pv;

    const ConsumerThread<Config> me;
    const int consumer_index = me.index;
    const uint32_t thread = me.thread, lane = me.lane, warp = me.warp;
    const Turns<Config::kTurns, Config::kConsumerWarpgroups> turns{
        static_cast<uint32_t>(consumer_index == 0 ? NamedBarrier::kConsumer0Turn : NamedBarrier::kConsumer1Turn),
        static_cast<uint32_t>(consumer_index == 0 ? NamedBarrier::kConsumer1Turn : NamedBarrier::kConsumer0Turn)};
    const int head_kv = head / args.heads_per_kv;
    const int row_in_tile = consumer_index * Config::kRowsPerWarpgroup + 16 * warp + lane / 4;
    const int query_half0 = m_block * Config::kBlockM + row_in_tile;  // this thread's first row (softmax.cuh)
    const int causal_offset = item.span.seqlen_k - item.span.seqlen_q;
    const TileMask<Config::kBlockN> mask{args, range, lane, query_half0, item.span.seqlen_k, causal_offset};

    // Registers: Q's fragments where Q fits (Config::kQInRegisters), O (pv), S, P(n-1) read by the running P.V and
    // P(n) which a double-buffered softmax fills meanwhile (Config::kPDoubleBuffered), the rows' max and sums.
    typename Scores::QFragments q_frag;
    // Descriptors of this warpgroup's 64 rows of Q and of K's stage 0, advanced per stage and K step.
    const uint64_t q_desc0 = wgmma_desc<Config::kSwizzleQk>(
        ptx::smem_addr(ss.q) + consumer_index * Config::kRowsPerWarpgroup * Config::kSwizzleQk, 16);
    const uint64_t k_desc0 = wgmma_desc<Config::kSwizzleQk>(ptx::smem_addr(ss.k[0]), 16);
    Pv pv(ss);
    typename Scores::Registers s;
    uint32_t p_run[Pv::kPRegs], p_new[Pv::kPRegs];
    Softmax softmax;

    // P.V's B operand at stage 0: V as loaded (bf16, MN-major), widened (float16 P, MN-major) or V^T (e4m3 codes,
    // K-major; at 192 keys its positions 128-191 in 64-byte rows: vt_layout.cuh).
    const uint64_t v_desc0 =
        Config::kPCodes  ? wgmma_desc_sw128(ptx::smem_addr(ss.vt[0]), 16)
        : Config::kPvF16 ? wgmma_desc_sw128(ptx::smem_addr(ss.vt[0]), Config::kBlockN * 128)
                         : wgmma_desc_sw128(ptx::smem_addr(ss.v[0]), Config::kBlockN * Config::kSwizzleV);
    const uint64_t vt_tail_desc0 =
        wgmma_desc<64>(ptx::smem_addr(ss.vt[0]) + VtLayout<Config::kBlockN>::kTailOffset, 16);
    // The descriptors of a slot from its index (PvDescriptors::move carries them from slot to slot).
    auto pv_descriptors = [&](int stage) {
        const uint32_t stage_bytes = stage * Pv::kSlotBytes;
        return PvDescriptors{wgmma_desc_advance(v_desc0, stage_bytes), wgmma_desc_advance(vt_tail_desc0, stage_bytes)};
    };
    const uint32_t vote = static_cast<uint32_t>(consumer_index == 0 ? NamedBarrier::kConsumer0Vote
                                                                    : NamedBarrier::kConsumer1Vote);

    if (consumer_index == 1)
        turns.pass();  // consumer 0 starts
    ptx::mbarrier_wait_parity(&ss.q_full, round & 1);
    // bf16 q: rounded to codes in Q's registers here (within the float16 scores' bound), the scores' scale times
    // 2^q_exponent
    int q_exponent = 0;
    if constexpr (Config::kQBf16)
        q_exponent = q_codes_from_bf16<Config>(args, ss, q_frag, consumer_index, thread,
                                               ss.q_amax[round & 1][consumer_index], vote);
    const float q_scale = ldexpf(1.0f, q_exponent);
    auto with_q_scale = [&](float scale_log2) {
        if constexpr (Config::kQBf16)
            return scale_log2 * q_scale;
        else
            return scale_log2;
    };
    // float16 scores: q's codes times 2^-q_shift (scores_f16.cuh), the score scale times q_unshift = 2^q_shift
    const int q_shift = Config::kQBf16 ? 0 : Scores::q_code_shift(ss, consumer_index, thread, vote);
    auto load_q_fragments = [&]() { Scores::load_q_fragments(q_frag, ss, consumer_index, lane, warp); };
    if constexpr (!Config::kQBf16)
        load_q_fragments();
    if (q_shift != 0)  // uniform over the warpgroup
        Scores::scale_q(q_frag, q_shift);
    const float q_unshift = ldexpf(1.0f, q_shift);
    if constexpr (Config::kQInRegisters) {
        // Q is in registers: the next item's may come. ldmatrix read Q through the generic proxy and TMA writes the
        // next one through the async proxy: the proxy fence keeps the arrive from overtaking the reads.
        ptx::fence_proxy_async_shared();
        ptx::mbarrier_arrive(&ss.q_empty);
    }

    // fp8 descales: each K tile's score scale and each V tile's block exponent come with the tile (producer.cuh).
    // O holds sum P V / 2^e_v of the last tile accumulated: before each P.V it is multiplied by 2^(e_v(previous tile)
    // - e_v(this tile)) with the softmax's factor, and by 2^e_v and v's factor at the end. Every factor is a power
    // of two: exact while one head's v block exponents span at most 64 (fp8.quantize_blocks' always do).
    float pending_rescale[2] = {1.0f, 1.0f};  // O's factor from the last softmax, applied before the next P.V
    int o_exponent = 0;                       // O's unit: 2^o_exponent (set by the first P.V)
    int prev_vt = rings.vt().stage;           // the V (fp8: V^T) slot of the tile whose P.V is next
    PvDescriptors pv_desc = pv_descriptors(prev_vt);
    // Every KV tile but the last P.V.
    auto run_tiles = [&]() {
        Scores::clear(s);
        {  // tile 0: no P.V yet
            const auto [stage, phase, vt, vt_phase] = rings.take();
            ptx::mbarrier_wait_parity(&ss.k_full[stage], phase);
            const float scale_log2 = with_q_scale(Scores::scale_log2(k_tile_scale_log2(args, ss, stage), q_unshift));
            turns.take();
            ptx::wgmma_fence();
            Scores::issue(s, q_frag, q_desc0, k_desc0, stage);
            turns.pass();
            ptx::wgmma_wait_group<0>();
            ptx::fence_registers(s);
            ptx::mbarrier_arrive(&ss.k_empty[stage]);
            float rescale[2];  // O is still zero
            softmax.step(mask, 0, s, scale_log2, rescale, p_run);
            mbarrier_wait_tested(Pv::full(ss, vt), vt_phase);  // for P(0) V(0), issued with S(1)
            if constexpr (Config::kVarlen && !Config::kIsFp8) {  // bf16 P.V reads V as loaded (fp8: converter.cuh)
                if (range.tail_keys < Config::kBlockN) {
                    zero_v_rows<Config::kVChunks, Config::kBlockN, Config::kSwizzleV, 128 * Config::kConsumerWarpgroups>(
                        ptx::smem_addr(ss.v[vt]), range.tail_keys, consumer_index * 128 + thread);
                    ptx::fence_proxy_async_shared();  // before the tensor cores read the rows
                    ptx::bar_sync(static_cast<uint32_t>(NamedBarrier::kVTailZeroed), 128 * Config::kConsumerWarpgroups);
                }
            }
            softmax.finish_first(s, pv.o, rescale);
            softmax.pack(s, p_run);
        }
        for (int it = 1; it < range.end; ++it) {
            const auto [stage, phase, vt, vt_phase] = rings.take();
            ptx::mbarrier_wait_parity(&ss.k_full[stage], phase);
            const float scale_log2 = with_q_scale(Scores::scale_log2(k_tile_scale_log2(args, ss, stage), q_unshift));
            turns.take();
            ptx::wgmma_fence();
            Scores::issue(s, q_frag, q_desc0, k_desc0, stage);
            const int v_exponent = v_tile_exponent(ss, prev_vt);  // the unit P(n-1) V(n-1) adds in
            softmax.rescale_o_before_pv(pv, pending_rescale, it == 1 ? 0 : o_exponent - v_exponent);  // under S(n)
            o_exponent = v_exponent;
            ptx::wgmma_fence();
            pv.issue(pv_desc, p_run);
            ptx::wgmma_commit_group();
            turns.pass();

            ptx::wgmma_wait_group<1>();  // S(n) is done, P(n-1) V(n-1) may still run
            ptx::fence_registers(s);
            ptx::mbarrier_arrive(&ss.k_empty[stage]);
            float rescale[2];
            softmax.step(mask, it, s, scale_log2, rescale, p_new);  // double-buffered codes into p_new, else in s
            // V(n) for the next P.V. Waiting here also closes the softmax's basic block: ptxas schedules within
            // blocks, and put the wait_group below in the softmax's block ahead of all of it (no overlap left).
            mbarrier_wait_tested(Pv::full(ss, vt), vt_phase);
            ptx::wgmma_wait_group<0>();
            ptx::fence_registers(p_run);
            ptx::fence_registers(pv.o);
            ptx::mbarrier_arrive(Pv::empty(ss, prev_vt));
            pv.add_tile_sums(softmax.row_sum, rescale);
            softmax.finish(s, pv.o, rescale, pending_rescale);
            softmax.pack(s, p_run);  // P(n-1) V(n-1) is done with P's registers
            pv_desc.move<Pv::kSlotBytes>(prev_vt, vt);
            prev_vt = vt;
            // P(n) to the buffer the next P.V reads (two buffers taking turns over a loop unrolled by two let ptxas
            // sink the softmax below the P(n-1) V(n-1) wait in one of the two copies).
            if constexpr (Config::kPDoubleBuffered) {
#pragma unroll
                for (int r = 0; r < Pv::kPRegs; ++r)
                    p_run[r] = p_new[r];
            }
        }
    };
    run_tiles();
    if constexpr (!Config::kQInRegisters)
        ptx::mbarrier_arrive(&ss.q_empty);  // the last S = Q K^T is done
    {  // the last P.V
        const int last = range.end - 1;
        const int stage = prev_vt;  // V(last)'s, awaited after the last softmax
        const int v_exponent = v_tile_exponent(ss, stage);
        pv.rescale(pending_rescale, last == 0 ? 0 : o_exponent - v_exponent);
        o_exponent = v_exponent;
        ptx::wgmma_fence();
        pv.issue(pv_desc, p_run);
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<0>();
        ptx::fence_registers(pv.o);
        ptx::mbarrier_arrive(Pv::empty(ss, stage));
        pv.add_last_sums(softmax.row_sum);
    }
    if (consumer_index == 0)
        turns.take();  // takes consumer 1's last hand-over, so none is left pending

    // Epilogue (in this body: as a function of its own it compiled to other code): O / row sum, times v's descale
    // and O's unit, as bf16, 16 bytes a store (o_store.cuh); the log-sum-exp where asked for.
    const float v_descale = ldexpf(descale_factor(args.v_descale, batch, head_kv), o_exponent);
    const SeqSpan span = out_span<Config>(args, item, round);
    const OutRows<Config> rows{args, item.batch, item.head, span.q_start};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int query = query_half0 + 8 * h;
        const float sum = softmax.row_total(h);
        const bool in_range = query < span.seqlen_q;
        // varlen: causal rows above the diagonal of a sequence with more queries than keys see no key
        const bool sees_keys = !Config::kVarlen || !args.causal || query + causal_offset >= 0;
        const float inv = sees_keys ? v_descale / sum : 0.0f;
        __nv_bfloat16 *row = rows.row(in_range ? query : 0);
        uint32_t packed[kAccRegs / 4];
#pragma unroll
        for (int j = 0; j < kAccRegs / 4; ++j)
            packed[j] = ptx::cvt_rn_bf16x2_f32(pv.o[4 * j + 2 * h] * inv, pv.o[4 * j + 2 * h + 1] * inv);
        store_row_bf16(row, packed, lane, in_range);
        if (in_range && args.lse != nullptr && lane % 4 == 0) {
            const float max_used = softmax.online_max.row_max[h] == -INFINITY ? 0.0f : softmax.online_max.row_max[h];
            *rows.lse(query) = sees_keys ? log_sum_exp(max_used, Config::Input::kPOffsetLog2, sum) : -INFINITY;
        }
    }
}

}  // namespace fp
