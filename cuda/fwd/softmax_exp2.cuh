// Softmax policies whose probabilities are floats, p = 2^(t - max) by ex2 (MUFU), packed to 16 bits for P.V:
//   Exp2Softmax:     against the row's running max; bf16 P (bf16 at dim_qk 192), float16 P (fp8 with FP16 P)
//   LazyExp2Softmax: against a lazy reference (bf16 at dim_qk 128, Config::kLazyMax)
// Each keeps this thread's part of its rows' sums (of its columns), quad-reduced at the end.
//
// The interface of a softmax policy (also softmax_codes.cuh), in the order the main loop calls it per tile:
//   step(mask, it, s, scale_log2, rescale, p_new)  under the running P.V: mask, row max, P's values (in s or p_new);
//                                                 rescale: the factor for everything accumulated before
//   finish_first(s, o, rescale)                  tile 0, once V(0) has landed: the lazy max's exponentials
//   finish(s, o, rescale, pending)               once P.V is done with O: the lazy max's exponentials (and O's
//                                                 rescale); elsewhere O's factor kept in `pending` for the next P.V
//   rescale_o_before_pv(pv, pending, unit_shift) O times that factor, under the next S
//   pack(s, p)                                   P's A fragments from what step left in s
//   row_total(h)                                 the row's whole sum, for the epilogue
#pragma once

#include <cmath>
#include <cstdint>

#include "fwd/mask.cuh"
#include "fwd/softmax.cuh"
#include "ptx.cuh"

namespace fp {

// The rows' running max and sums. O's factor from a tile's softmax (rescale) is applied before the next P.V
// accumulates (finish keeps it in `pending`, rescale_o_before_pv applies it); on an item's first tile O is still zero.
struct SoftmaxRows {
    OnlineMax online_max;
    float row_sum[2] = {0.0f, 0.0f};

    template <class S, class Accumulator>
    __device__ __forceinline__ void finish_first(S &, Accumulator &, float (&)[2])
    {
    }
    template <class S, class Accumulator>
    __device__ __forceinline__ void finish(S &, Accumulator &, const float (&rescale)[2], float (&pending)[2])
    {
        pending[0] = rescale[0];
        pending[1] = rescale[1];
    }
    template <class Pv>
    __device__ __forceinline__ void rescale_o_before_pv(Pv &pv, const float (&pending)[2], int unit_shift)
    {
        pv.rescale(pending, unit_shift);
    }
};

template <class Config>
struct Exp2Softmax : SoftmaxRows {
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ void step(const TileMask<Config::kBlockN> &mask, int it, float (&s)[kRegs],
                                         float scale_log2, float (&rescale)[2], uint32_t (&)[kPRegs])
    {
        mask.apply(s, it);
        float max_used[2];
        online_max.update(s, scale_log2, rescale, max_used);
        float tile_sum[2];
        exp2_in_place(s, scale_log2, max_used, Config::Input::kPOffsetLog2, tile_sum);
#pragma unroll
        for (int h = 0; h < 2; ++h)
            row_sum[h] = row_sum[h] * rescale[h] + tile_sum[h];
    }
    // A step's 8 pairs of values as the A fragment of a k16 wgmma (PTX ISA 9.7.15.5.1).
    template <int kRegs, int kPRegs>
    __device__ __forceinline__ void pack(const float (&s)[kRegs], uint32_t (&p)[kPRegs]) const
    {
#pragma unroll
        for (int step = 0; step < kPRegs / 4; ++step)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const float lo = s[8 * step + 2 * r], hi = s[8 * step + 2 * r + 1];
                p[4 * step + r] = Config::kPvF16 ? ptx::cvt_rn_f16x2_f32(lo, hi) : ptx::cvt_rn_bf16x2_f32(lo, hi);
            }
    }
    __device__ __forceinline__ float row_total(int h) const { return quad_sum(row_sum[h]); }
};

// Each tile's exponentials are taken against the row's running max as it stood (a lazy reference), raised only
// where the tile passes it by more than Config::kLazySlackLog2: the row max's reduction leaves the path from S to P,
// and O is rescaled on the rare tile that raises it. step measures x = t - reference (an item's first tile against
// its exact max); finish takes p = 2^x once P.V is done with O.
template <class Config>
struct LazyExp2Softmax : Exp2Softmax<Config> {
    float lazy_over[2];  // per half, the largest x of the tile in flight (-inf on an item's first tile)

    template <int kRegs, int kPRegs>
    __device__ __forceinline__ void step(const TileMask<Config::kBlockN> &mask, int it, float (&s)[kRegs],
                                         float scale_log2, float (&rescale)[2], uint32_t (&)[kPRegs])
    {
        mask.apply(s, it);
        if (it > 0) {  // x against the row's reference, and x's max over the tile
            const float reference[2] = {this->online_max.reference(0), this->online_max.reference(1)};
            float part_max[2][4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                rescale[h] = 1.0f;
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    part_max[h][c] = -INFINITY;
            }
#pragma unroll
            for (int e = 0; e < kRegs; ++e) {
                s[e] = fmaf(s[e], scale_log2, -reference[acc_half(e)]);
                part_max[acc_half(e)][acc_chain(e)] = fmaxf(part_max[acc_half(e)][acc_chain(e)], s[e]);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h)
                lazy_over[h] = quad_max(fmaxf(fmaxf(part_max[h][0], part_max[h][1]),
                                              fmaxf(part_max[h][2], part_max[h][3])));
            return;
        }
        float max_used[2];  // an item's first tile: x against its exact max
        this->online_max.update(s, scale_log2, rescale, max_used);
#pragma unroll
        for (int e = 0; e < kRegs; ++e)
            s[e] = fmaf(s[e], scale_log2, -max_used[acc_half(e)]);
        lazy_over[0] = lazy_over[1] = -INFINITY;
    }
    template <int kRegs, int kORegs>
    __device__ __forceinline__ void finish_first(float (&s)[kRegs], float (&o)[kORegs], float (&rescale)[2])
    {
        exponentiate(s, o, rescale);
    }
    template <int kRegs, int kORegs>
    __device__ __forceinline__ void finish(float (&s)[kRegs], float (&o)[kORegs], float (&rescale)[2], float (&)[2])
    {
        exponentiate(s, o, rescale);
    }
    template <class Pv>
    __device__ __forceinline__ void rescale_o_before_pv(Pv &, const float (&)[2], int)
    {
    }

  private:
    // Where a row's tile passed its reference by more than the slack, or where a row sees its first keys (its
    // reference, 0, stands for no key: scores far below 0 would all underflow), the reference moves to the tile's
    // max and x, O and the row sum with it (the warp's rows together); then p = 2^x in place, and the row sums.
    template <int kRegs, int kORegs>
    __device__ __forceinline__ void exponentiate(float (&s)[kRegs], float (&o)[kORegs], float (&rescale)[2])
    {
        OnlineMax &online_max = this->online_max;
        bool raise[2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
            raise[h] = lazy_over[h] > Config::kLazySlackLog2 ||
                       (online_max.row_max[h] == -INFINITY && lazy_over[h] != -INFINITY);
        if (__any_sync(0xffffffffu, raise[0] || raise[1])) {
            float shift[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                shift[h] = raise[h] ? lazy_over[h] : 0.0f;
                // a row without keys so far holds O = 0 and a zero sum: 0, not 2^-shift (which may be infinite)
                rescale[h] = online_max.row_max[h] == -INFINITY ? 0.0f : ptx::ex2_approx_ftz(-shift[h]);
                if (raise[h])
                    online_max.raise(h, shift[h]);
            }
#pragma unroll
            for (int e = 0; e < kRegs; ++e)
                s[e] -= shift[acc_half(e)];
#pragma unroll
            for (int e = 0; e < kAccRegs; ++e)
                o[e] *= rescale[acc_half(e)];
        }
        float part_sum[2][4] = {};
#pragma unroll
        for (int e = 0; e < kRegs; ++e) {
            s[e] = ptx::ex2_approx_ftz(s[e]);
            part_sum[acc_half(e)][acc_chain(e)] += s[e];
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
            this->row_sum[h] = this->row_sum[h] * rescale[h] + ((part_sum[h][0] + part_sum[h][1]) +
                                                                (part_sum[h][2] + part_sum[h][3]));
    }
};

}  // namespace fp
