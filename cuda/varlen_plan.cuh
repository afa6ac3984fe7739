// The varlen plan kernel's launcher (varlen_plan.cu) and its limits, for the forward launcher.
#pragma once

#include <cuda_runtime.h>

#include "backend.h"
#include "launch_common.h"

namespace fp {

constexpr int kVarlenTileRows = FP_VARLEN_TILE_ROWS;
// KV tile counts the plan sorts by: seqlen_k up to 4095 tiles of 128 keys; and (section, count) buckets, one int
// of shared memory each.
constexpr int kVarlenMaxLevels = 4096;
constexpr int kVarlenMaxBuckets = 8192;

// The buckets of a call: tile counts 0 .. ceil(seqlen_k / kv_tile_keys).
constexpr int varlen_levels(int seqlen_k, int kv_tile_keys)
{
    return (seqlen_k + kv_tile_keys - 1) / kv_tile_keys + 1;
}

// Enqueues the plan of p (varlen) for a forward kernel of kv_tile_keys (128 or 192) keys a tile on a grid of `grid`
// CTAs, on a device of l2_bytes of L2.
flashprefill_status varlen_plan(const flashprefill_params *p, int kv_tile_keys, int grid, int l2_bytes,
                                cudaStream_t stream);

}  // namespace fp
