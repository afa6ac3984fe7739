// The forward kernel's parameters (one __grid_constant__ struct) and the fp8 descales they carry.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "fwd/varlen.cuh"

namespace fp {

// An fp8 descale as the kernel reads it (flashprefill_descale): a factor, factors[batch * stride_batch +
// head_kv * stride_head] (PER_TENSOR, PER_HEAD; q's are per kv head too); or a power of two per block of
// tokens, 2^exponents[batch * stride_batch + head * stride_head + token / block_tokens] (PER_BLOCK; head is
// the tensor's own: the query head for q); or neither (descale 1).
struct DescaleArg {
    const float *factors;
    const int8_t *exponents;
    int64_t stride_batch;
    int64_t stride_head;
    int32_t block_tokens;
};

struct FwdArgs {
    CUtensorMap tm_q;  // (dim_qk, seqlen_q, heads_q, batch), box (kSwizzleQk bytes, kBlockM, 1, 1)
    CUtensorMap tm_k;  // (dim_qk, seqlen_k, heads_kv, batch), box (kSwizzleQk bytes, kBlockN, 1, 1)
    CUtensorMap tm_v;  // (dim_v, seqlen_k, heads_kv, batch), box (kSwizzleV bytes, kBlockN, 1, 1); prepared v
                       // (kVPrepared): (positions, dim_v, heads_kv, batch), box (128 positions, dim_v, 1, 1), sw128
    CUtensorMap tm_v_tail;  // prepared v at 192 keys a tile: the same, box (64 positions, dim_v, 1, 1), sw64
    __nv_bfloat16 *out;
    int64_t out_stride_batch, out_stride_seq, out_stride_head;
    float *lse;  // NULL or (batch, heads_q, seqlen_q)
    DescaleArg q_descale, k_descale, v_descale;
    int32_t seqlen_q, seqlen_k, heads_q, heads_per_kv, batch;
    int32_t m_blocks;  // query tiles per (batch, head)
    int32_t items;     // work items: m_blocks * heads_q * batch (< 2^31, the launcher checks)
    int32_t section_heads;  // (batch, head) pairs per L2 section (work_order.cuh)
    int32_t causal;
    float softmax_scale_log2;  // softmax_scale * log2(e)
    // Varlen and paged calls (FwdConfig::kVarlen): the plan kernel's list (varlen.cuh); q, k, v and out as one
    // batch of packed rows, lse (heads_q, total_q). Paged k and v (block_table not NULL): their maps are
    // (dim, 2^page_shift, heads_kv, num_pages) with boxes of 2^box_shift rows, each within one page.
    const VarlenHeader *varlen_header;
    const VarlenTile *varlen_tiles;
    int32_t total_q;
    const int32_t *block_table;
    int32_t block_table_stride, page_shift, box_shift;
    const float *q_rotation_signs;  // bf16 q (FwdConfig::kQBf16): NULL, or dim_qk signs of the rotation
};

__device__ __forceinline__ float descale_factor(const DescaleArg &d, int batch, int head_kv)
{
    return d.factors == nullptr ? 1.0f : d.factors[batch * d.stride_batch + head_kv * d.stride_head];
}

// The exponent of the block holding `token`, 0 without per-block exponents.
__device__ __forceinline__ int descale_exponent(const DescaleArg &d, int batch, int head, int token)
{
    return d.exponents == nullptr ? 0 : __ldg(d.exponents + batch * d.stride_batch + head * d.stride_head +
                                               token / d.block_tokens);
}

// The score scale of query tile m_block in log2 units: softmax_scale * log2(e) times q's and k's descale
// factors and 2^(q's block exponent) (a block spans the whole query tile). k's block exponents are applied
// per KV tile on top of it.
__device__ __forceinline__ float score_scale_log2(const FwdArgs &args, int batch, int head, int m_block,
                                                  int query_tile_rows)
{
    const int head_kv = head / args.heads_per_kv;
    return ldexpf(args.softmax_scale_log2 * descale_factor(args.q_descale, batch, head_kv) *
                      descale_factor(args.k_descale, batch, head_kv),
                  descale_exponent(args.q_descale, batch, head, m_block * query_tile_rows));
}

}  // namespace fp
