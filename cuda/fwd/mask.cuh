// The causal and sequence-end mask of a KV tile's scores: -inf where a thread's row may not see the key.
#pragma once

#include <cmath>
#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/scheduler.cuh"
#include "fwd/softmax.cuh"

namespace fp {

// Per half: the last visible column of the tile starting at key0, minus the lane's own offset 2 (lane % 4), so that
// element e is masked where acc_col(e, 0) > last_col[acc_half(e)].
__device__ __forceinline__ void mask_limits(uint32_t lane, int query_half0, int key0, int seqlen_k, bool causal,
                                            int causal_offset, int (&last_col)[2])
{
    const int key_base = key0 + acc_col(0, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        last_col[h] = seqlen_k - 1 - key_base;
        if (causal)
            last_col[h] = min(last_col[h], query_half0 + 8 * h + causal_offset - key_base);
    }
}

// Sets s to -inf where key `key0 + col` may not be seen by the thread's query of that half: past seqlen_k, or, when
// causal, past the bottom-right-aligned diagonal (key <= query + causal_offset). Element e's column is 2 (lane % 4)
// plus a constant of e, so both conditions fold into one limit per half, and each element costs one compare with
// an immediate and one select (about 3.5 instructions before).
template <int kRegs>
__device__ __forceinline__ void apply_mask(float (&s)[kRegs], uint32_t lane, int query_half0, int key0,
                                           int seqlen_k, bool causal, int causal_offset)
{
    int last_col[2];
    mask_limits(lane, query_half0, key0, seqlen_k, causal, causal_offset, last_col);
#pragma unroll
    for (int e = 0; e < kRegs; ++e)
        if (acc_col(e, 0) > last_col[acc_half(e)])
            s[e] = -INFINITY;
}

// Sets the float16 scores to -inf where apply_mask sets float32 ones: one column limit per half.
template <int kRegs>
__device__ __forceinline__ void apply_mask_f16x2(uint32_t (&s)[kRegs], uint32_t lane, int query_half0, int key0,
                                                 int seqlen_k, bool causal, int causal_offset)
{
    constexpr uint32_t kNegInf = 0xfc00u;
    int last_col[2];
    mask_limits(lane, query_half0, key0, seqlen_k, causal, causal_offset, last_col);
#pragma unroll
    for (int j = 0; j < kRegs; ++j) {
        const int col = acc_col(2 * j, 0), half = acc_half(2 * j);
        const bool off_lo = col > last_col[half], off_hi = col + 1 > last_col[half];
        s[j] = off_lo ? (kNegInf << 16 | kNegInf) : off_hi ? (s[j] & 0xffffu) | kNegInf << 16 : s[j];
    }
}

// The mask of one consumer thread's two rows over an item's KV tiles; only tiles from range.mask_from on need it.
template <int kBlockN>
struct TileMask {
    const FwdArgs &args;
    KvRange range;
    uint32_t lane;
    int query_half0;    // the query of the thread's first row (the second's is 8 further)
    int seqlen_k;       // the keys of the item's sequence
    int causal_offset;  // keys <= query + causal_offset are visible (bottom-right aligned)

    // Visit `it` of the item (tiles are visited from the last one down).
    template <int kRegs>
    __device__ __forceinline__ void apply(float (&s)[kRegs], int it) const
    {
        const int n_block = range.end - 1 - it;
        if (n_block >= range.mask_from)
            apply_mask(s, lane, query_half0, n_block * kBlockN, seqlen_k, args.causal, causal_offset);
    }
    template <int kRegs>
    __device__ __forceinline__ void apply(uint32_t (&s16)[kRegs], int it) const
    {
        const int n_block = range.end - 1 - it;
        if (n_block >= range.mask_from)
            apply_mask_f16x2(s16, lane, query_half0, n_block * kBlockN, seqlen_k, args.causal, causal_offset);
    }
};

}  // namespace fp
