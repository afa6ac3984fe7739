// The consumer warpgroups' main loop.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "fwd/args.cuh"
#include "fwd/descriptors.cuh"
#include "fwd/expfree.cuh"
#include "fwd/f16_scores.cuh"
#include "fwd/o_store.cuh"
#include "fwd/pipeline.cuh"
#include "fwd/policies.cuh"
#include "fwd/roles.cuh"
#include "fwd/mask.cuh"
#include "fwd/scheduler.cuh"
#include "fwd/smem.cuh"
#include "fwd/softmax.cuh"
#include "ptx.cuh"

namespace fp {

template <bool kSecond, class A, class B>
__device__ __forceinline__ auto &pick(A &a, B &b)
{
    if constexpr (kSecond)
        return b;
    else
        return a;
}

// One work item; `rings` holds the next tile's K and V^T (bf16: V) slots to consume.
template <class Config>
__device__ __forceinline__ void consumer(const FwdArgs &args, FwdSharedStorage<Config> &ss, int m_block, int head,
                                         int batch, KvRange range, int round, RingPositions<Config> &rings)
{
    using Input = typename Config::Input;
    constexpr int kStepBytes = Input::kMmaK * Input::kBytes;        // K bytes per wgmma (32)
    constexpr int kStepsPerChunk = Config::kSwizzleQk / kStepBytes;   // Q, K: 4 (128-byte rows) or 2 (64)
    constexpr int kQkSteps = Config::kHeadDimQk / Input::kMmaK;
    constexpr int kPvSteps = Config::kBlockN / Config::kPvMmaK;
    constexpr int kPRegs = 4 * kPvSteps;                              // A fragments of P for one KV tile
    constexpr int kSRegs = Config::kBlockN / 2;                       // S of one KV tile (m64nN accumulator)
    static_assert(kStepsPerChunk * kStepBytes == Config::kSwizzleQk, "wgmma K steps tile a swizzle row");

    // e4m3 codes: the warpgroup index taken from lane 0 (__shfl_sync), which ptxas knows to be warp-uniform, so that
    // the descriptors and barrier ids derived from it live in uniform registers: 40 fewer instructions, and 2-4%
    // faster (bench/NOTES.md); the bf16 and float16-P kernels measured slower that way, so they keep the plain one.
    const ConsumerThread<Config> me;
    const int consumer_index = me.index;
    const uint32_t thread = me.thread, lane = me.lane, warp = me.warp;
    const Turns<Config::kTurns, Config::kConsumerWarpgroups> turns{
        static_cast<uint32_t>(consumer_index == 0 ? NamedBarrier::kConsumer0Turn : NamedBarrier::kConsumer1Turn),
        static_cast<uint32_t>(consumer_index == 0 ? NamedBarrier::kConsumer1Turn : NamedBarrier::kConsumer0Turn)};
    const int head_kv = head / args.heads_per_kv;
    const int row_in_tile = consumer_index * Config::kRowsPerWarpgroup + 16 * warp + lane / 4;
    const int query_half0 = m_block * Config::kBlockM + row_in_tile;
    const int causal_offset = args.seqlen_k - args.seqlen_q;
    const TileMask<Config::kBlockN> mask{args, range, lane, query_half0, causal_offset};

    // Descales (fp8): each K tile's score scale (score_scale_log2 with the tile's k block exponent) and each V
    // tile's block exponent come with the tile (producer). v's factor is applied at the end, and v's block
    // exponents as O's unit: O holds sum P V / 2^e_v of the last tile accumulated, so before each P.V it is
    // multiplied by 2^(e_v(previous tile) - e_v(this tile)) with the softmax rescale, and by 2^e_v at the end.
    // Every factor is a power of two, so this is exact while the exponents of one head's v blocks span at
    // most 64 (O stays within float32's range; fp8.quantize_blocks' always do).

    // Q stays in registers as the A operand of every S = Q K^T where it fits (Config::kQInRegisters): half the
    // shared-memory reads of S.
    typename Policies<Config>::Scores::QFragments q_frag;
    using Scores = typename Policies<Config>::Scores;
    // Descriptors of this warpgroup's 64 rows of Q and of K's stage 0, advanced per stage and K step.
    const uint64_t q_desc0 = wgmma_desc<Config::kSwizzleQk>(
        ptx::smem_addr(ss.q) + consumer_index * Config::kRowsPerWarpgroup * Config::kSwizzleQk, 16);
    const uint64_t k_desc0 = wgmma_desc<Config::kSwizzleQk>(ptx::smem_addr(ss.k[0]), 16);

    using Pv = typename Policies<Config>::Pv;
    Pv pv(ss);
    auto &o = pv.o;
    // S(n): float32 accumulators, or float16 pairs in the same registers' first half where the item's scores may be
    // (Config::kF16Scores).
    typename Scores::Registers s;
    // P(n-1), read by the running P(n-1) V(n-1), and P(n), which the softmax of S(n) fills meanwhile where P is
    // double-buffered (Config::kPDoubleBuffered; p_new is unused elsewhere).
    uint32_t p_run[kPRegs], p_new[kPRegs];
    using Softmax = typename Policies<Config>::Softmax;
    Softmax softmax;
    OnlineMax &online_max = softmax.online_max;
    // Row sums of the probabilities P.V uses, per half. bf16 (and float16 P): this thread's part (of its 32
    // columns), quad-reduced at the end. e4m3 codes: the whole row's sum of the quantized P, which the tensor
    // cores compute per tile in o[64..67] as P times ones. Those start afresh every tile and are added here in
    // fp32: the fp8 wgmma accumulator keeps too few bits to carry a sum over thousands of keys (it lost 7% at 128k
    // tokens).
    auto &row_sum = softmax.row_sum;
    // Config::kLazyMax: per half, the largest x = t - reference of the tile in flight (-inf on an item's first tile,
    // which takes its exact max).

    // O += P V(stage): bf16 reads V as stored (MN-major), float16 P the widened copy (MN-major too); e4m3 codes
    // read the transposed copy (K-major) and the ones below it (VtLayout).
    // Stage 0's V^T (e4m3 codes, K-major) or V (MN-major).
    const uint64_t v_desc0 =
        Config::kPCodes  ? wgmma_desc_sw128(ptx::smem_addr(ss.vt[0]), 16)
        : Config::kPvF16 ? wgmma_desc_sw128(ptx::smem_addr(ss.vt[0]), Config::kBlockN * 128)
                         : wgmma_desc_sw128(ptx::smem_addr(ss.v[0]), Config::kBlockN * Config::kSwizzleV);
    // e4m3 codes at 192 keys: positions 128-191 of V^T in 64-byte rows (VtLayout).
    const uint64_t vt_tail_desc0 =
        wgmma_desc<64>(ptx::smem_addr(ss.vt[0]) + VtLayout<Config::kBlockN>::kTailOffset, 16);
    // The descriptors of the slot whose P.V is next (V^T's main and tail parts), carried from tile to tile by the
    // slots' distance: derived from the slot index each tile, ptxas rebuilt the shared-window base (S2UR and ~14
    // dependent instructions) inside the turn window.
    constexpr int32_t kVSlotBytes = Config::kIsFp8 ? Config::kTileVtBytes : Config::kTileVBytes;
    auto pv_descriptors = [&](int stage) {
        const uint32_t stage_bytes = stage * kVSlotBytes;
        return PvDescriptors{wgmma_desc_advance(v_desc0, stage_bytes), wgmma_desc_advance(vt_tail_desc0, stage_bytes)};
    };
    // S(n) = Q K(n)^T into s (issue_qk), or into s16 (issue_qk_f16: float16 scores).
    // Float16 scores (Config::kF16Scores): q's codes are brought within kF16ScoresQCodeMax, so that no partial sum
    // of S can pass float16's range, by a power of two 2^-shift per item and warpgroup (64 rows), the score scale
    // taking 2^shift back (exact: a power of two). shift: the least with every code's magnitude m (e4m3 codes
    // order as their magnitudes, 8 codes a binade) at most the bound, m - 8 shift <= max; 0 where they all fit.
    // The warpgroup agrees on the largest of its threads' by bar.red.or, bit by bit.
    const uint32_t vote = static_cast<uint32_t>(consumer_index == 0 ? NamedBarrier::kConsumer0Vote
                                                                    : NamedBarrier::kConsumer1Vote);
    if (consumer_index == 1)
        turns.pass();  // consumer 0 starts
    ptx::mbarrier_wait_parity(&ss.q_full, round & 1);
    // float16 scores: q's codes times 2^-q_shift, the score scale times 2^q_shift
    const int q_shift = Scores::q_code_shift(ss, consumer_index, thread, vote);
    auto load_q_fragments = [&]() { Scores::load_q_fragments(q_frag, ss, consumer_index, lane, warp); };
    load_q_fragments();
    if (q_shift != 0)  // uniform over the warpgroup
        Scores::scale_q(q_frag, q_shift);
    const float q_unshift = ldexpf(1.0f, q_shift);
    if constexpr (Config::kQInRegisters) {
        // Q is in registers: the next item's may come. ldmatrix read Q through the generic proxy and TMA writes the
        // next one through the async proxy, so the proxy fence comes before the release (as the converters' before
        // V's): without it the arrive could overtake the reads, and with bf16 at dim_qk 192 some warps' Q came out
        // of the next item's tile on short items (bench/results/2026-12-01-q-release-race/).
        ptx::fence_proxy_async_shared();
        ptx::mbarrier_arrive(&ss.q_empty);
    }

    float pending_rescale[2] = {1.0f, 1.0f};  // O's factor from the last softmax, applied before the next P.V
    int o_exponent = 0;  // O's unit: 2^o_exponent (set by the first P.V)
    int prev_vt = rings.vt().stage;  // the V^T (bf16: V) slot of the tile whose P.V is next
    PvDescriptors pv_desc = pv_descriptors(prev_vt);
    // Every KV tile but the last P.V, with S in s (f16: std::false_type) or in s16 (std::true_type).
    auto run_tiles = [&]() {
        Scores::clear(s);
        auto &s_regs = s;
        // float16 scores: times 2^q_shift, what q's codes gave up (exact)
        const float q_scale_factor = q_unshift;
        {  // iteration 0: no P.V yet
            const int stage = rings.kv.stage, vt = rings.vt().stage;
            const uint32_t phase = rings.kv.phase, vt_phase = rings.vt().phase;
            rings.advance();
            ptx::mbarrier_wait_parity(&ss.k_full[stage], phase);
            const float scale_log2 = Scores::scale_log2(k_tile_scale_log2(args, ss, stage), q_scale_factor);
            turns.take();
            ptx::wgmma_fence();
            Scores::issue(s_regs, q_frag, q_desc0, k_desc0, stage);
            turns.pass();
            ptx::wgmma_wait_group<0>();
            ptx::fence_registers(s_regs);
            ptx::mbarrier_arrive(&ss.k_empty[stage]);
            float rescale[2];  // O is still zero
            softmax.step(mask, 0, s_regs, scale_log2, rescale, p_run);
            mbarrier_wait_tested(Pv::full(ss, vt), vt_phase);  // for P(0) V(0), issued in the next iteration
            softmax.finish_first(s_regs, o, rescale);
            softmax.pack(s_regs, p_run);
        }
        for (int it = 1; it < range.end; ++it) {
            const int stage = rings.kv.stage, vt = rings.vt().stage;
            const uint32_t phase = rings.kv.phase, vt_phase = rings.vt().phase;
            rings.advance();
            ptx::mbarrier_wait_parity(&ss.k_full[stage], phase);
            const float scale_log2 = Scores::scale_log2(k_tile_scale_log2(args, ss, stage), q_scale_factor);
            turns.take();
            ptx::wgmma_fence();
            Scores::issue(s_regs, q_frag, q_desc0, k_desc0, stage);
            const int v_exponent = v_tile_exponent(ss, prev_vt);  // the unit P(n-1) V(n-1) adds in
            softmax.rescale_o_before_pv(pv, pending_rescale, it == 1 ? 0 : o_exponent - v_exponent);  // under S(n)
            o_exponent = v_exponent;
            ptx::wgmma_fence();
            pv.issue(pv_desc, p_run);
            ptx::wgmma_commit_group();
            turns.pass();

            ptx::wgmma_wait_group<1>();  // S(n) is done, P(n-1) V(n-1) may still run
            ptx::fence_registers(s_regs);
            ptx::mbarrier_arrive(&ss.k_empty[stage]);
            float rescale[2];
            softmax.step(mask, it, s_regs, scale_log2, rescale, p_new);  // codes into the free buffer; else p in s, packed below
            // V(n) for the next iteration's P.V. Waiting here also closes the softmax's basic block: ptxas
            // schedules within blocks, and put a wait_group in the same block as the softmax before all of it
            // (bench/NOTES.md v11), which left P(n-1) V(n-1) and the softmax without overlap.
            mbarrier_wait_tested(Pv::full(ss, vt), vt_phase);
            ptx::wgmma_wait_group<0>();
            ptx::fence_registers(p_run);
            ptx::fence_registers(o);
            ptx::mbarrier_arrive(Pv::empty(ss, prev_vt));
            pv.add_tile_sums(row_sum, rescale);
            softmax.finish(s_regs, o, rescale, pending_rescale);
            softmax.pack(s_regs, p_run);  // P(n-1) V(n-1) is done with it
            pv_desc.move<Pv::kSlotBytes>(prev_vt, vt);
            prev_vt = vt;
            // P(n) to the buffer the next P.V reads (16 moves; two buffers taking turns over a loop unrolled by two
            // let ptxas sink the softmax below the P(n-1) V(n-1) wait in one of the two copies).
            if constexpr (Config::kPDoubleBuffered) {
#pragma unroll
                for (int r = 0; r < kPRegs; ++r)
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
        ptx::fence_registers(o);
        ptx::mbarrier_arrive(Pv::empty(ss, stage));
        pv.add_last_sums(row_sum);
    }
    if (consumer_index == 0)
        turns.take();  // takes consumer 1's last hand-over, so none is left pending

    // Epilogue: O / rowsum (times the fp8 V descale and O's unit), bf16, from registers 16 bytes a store (o_store.cuh).
    const float v_descale = ldexpf(descale_factor(args.v_descale, batch, head_kv), o_exponent);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int query = query_half0 + 8 * h;
        const float sum = softmax.row_total(h);
        const bool in_range = query < args.seqlen_q;
        const float inv = v_descale / sum;
        __nv_bfloat16 *row = args.out + batch * args.out_stride_batch +
                             static_cast<int64_t>(in_range ? query : 0) * args.out_stride_seq +
                             head * args.out_stride_head;
        uint32_t packed[kAccRegs / 4];
#pragma unroll
        for (int j = 0; j < kAccRegs / 4; ++j)
            packed[j] = ptx::cvt_rn_bf16x2_f32(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
        store_row_bf16(row, packed, lane, in_range);
        if (in_range && args.lse != nullptr && lane % 4 == 0) {
            const float max_used = online_max.row_max[h] == -INFINITY ? 0.0f : online_max.row_max[h];
            args.lse[(static_cast<int64_t>(batch) * args.heads_q + head) * args.seqlen_q + query] =
                log_sum_exp(max_used, Input::kPOffsetLog2, sum);
        }
    }
}

}  // namespace fp
