// Shared memory of one CTA of the forward kernel.
#pragma once

#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/config.cuh"

namespace fp {

// Shared memory of one CTA; every tile 1024-byte aligned (the 128-byte swizzle repeats every 8 rows).
template <class Config>
struct alignas(1024) FwdSharedStorage {
    alignas(1024) uint8_t q[Config::kTileQSlotBytes];
    alignas(1024) uint8_t q_bf16[Config::kTileQBf16Bytes];     // bf16 q as loaded (q_from_bf16.cuh)
    alignas(1024) uint8_t q_rotation[Config::kQRotationBytes];  // its rotation's B, written once (q_from_bf16.cuh)
    alignas(1024) uint8_t k[Config::kStages][Config::kTileKBytes];
    alignas(1024) uint8_t v[Config::kTileVSlotBytes ? Config::kStages : 0][Config::kTileVBytes];
    // fp8: V transposed to (dim, keys) for the K-major B operand of P.V, with rows of ones (vt_layout.cuh,
    // transpose_v.cuh); fp8 with float16 P: V widened to float16 (widen_v.cuh).
    alignas(1024) uint8_t vt[Config::kIsFp8 ? Config::kVtStages : 0][Config::kTileVtBytes];
    // fp8: each stage's K score scale and V block exponent (producer.cuh), and the V block exponent passed on with
    // V^T (converter.cuh).
    float k_scale_log2[Config::kIsFp8 ? Config::kStages : 0];
    // bf16 q: each consumer warp's max |q|, by the parity of the CTA's item (a warp may write the next item's while
    // another still reads this one's)
    float q_amax[Config::kQBf16 ? 2 : 0][Config::kConsumerWarpgroups][4];
    int32_t v_exponent[Config::kIsFp8 ? Config::kStages : 0];
    int32_t vt_exponent[Config::kIsFp8 ? Config::kVtStages : 0];
    uint64_t q_full;
    uint64_t q_empty;
    uint64_t k_full[Config::kStages];
    uint64_t v_full[Config::kStages];
    uint64_t vt_full[Config::kVtStages];
    uint64_t vt_empty[Config::kVtStages];
    uint64_t k_empty[Config::kStages];
    uint64_t v_empty[Config::kStages];
};

template <class Config>
constexpr bool fits_shared_memory = sizeof(FwdSharedStorage<Config>) + 1024 <= kMaxSharedBytes;

// The descales that travel with the tiles (fp8; the producer writes them before the arrive that releases the tile):
// a K tile's score scale with its block exponent applied, a V tile's block exponent (passed on with V^T).
template <class Config>
__device__ __forceinline__ float k_tile_scale_log2(const FwdArgs &args, const FwdSharedStorage<Config> &ss, int stage)
{
    if constexpr (Config::kIsFp8)
        return ss.k_scale_log2[stage];
    else
        return args.softmax_scale_log2;
}
template <class Config>
__device__ __forceinline__ int v_tile_exponent(const FwdSharedStorage<Config> &ss, int stage)
{
    if constexpr (Config::kIsFp8)
        return ss.vt_exponent[stage];
    else
        return 0;
}

}  // namespace fp
