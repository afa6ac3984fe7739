// flashprefill_prepare_v: fp8 V (batch, seq, heads, dim) rewritten as FLASHPREFILL_V_LAYOUT_PREPARED, the rows of
// keys that the Hopper kernel loads as V^T (fwd_config.cuh, VtLayout) without transposing V itself. Within each
// group of 16 keys the positions follow the order in which a consumer thread's registers hold P's keys
// (fp8_transpose.cuh): position 4c + i holds key 2c + {0, 1, 8, 9}[i].
//
// One CTA per 64 positions of one (batch, head): per 64 dims, V's 64 x 64 bytes through shared memory, read along
// dims and written along positions, both coalesced. Positions of keys >= seqlen are written 0.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "backend.h"
#include "device.h"

namespace fp {
namespace {

constexpr int kTileKeys = 64, kTileDims = 64, kThreads = 256;
static_assert(kTileKeys % 16 == 0, "whole groups of 16 keys a tile");

struct PrepareVArgs {
    const uint8_t *v;
    int64_t v_stride_batch, v_stride_seq, v_stride_head;
    uint8_t *prepared;
    int64_t prepared_stride_batch, prepared_stride_head, prepared_stride_dim;
    int32_t seqlen, positions, dim;
};

// The key at position p of a group of 16.
__device__ __forceinline__ int key_at(int p)
{
    const int c = p / 4, i = p % 4;
    return 2 * c + (i & 1) + 8 * (i >> 1);
}

__global__ void __launch_bounds__(kThreads) prepare_v_kernel(const PrepareVArgs a)
{
    __shared__ uint8_t tile[kTileKeys][kTileDims + 4];
    const int key0 = blockIdx.x * kTileKeys, head = blockIdx.y, batch = blockIdx.z;
    const uint8_t *v = a.v + batch * a.v_stride_batch + head * a.v_stride_head;
    uint8_t *prepared = a.prepared + batch * a.prepared_stride_batch + head * a.prepared_stride_head;
    const int lane_dim = threadIdx.x % kTileDims, first_row = threadIdx.x / kTileDims;
    constexpr int kRowStep = kThreads / kTileDims;
    for (int d0 = 0; d0 < a.dim; d0 += kTileDims) {
        const int dim = d0 + lane_dim;
        for (int key = first_row; key < kTileKeys; key += kRowStep) {
            const int j = key0 + key;
            tile[key][lane_dim] = j < a.seqlen && dim < a.dim ? v[j * a.v_stride_seq + dim] : 0;
        }
        __syncthreads();
        const int position = lane_dim, group = position / 16 * 16;
        for (int row = first_row; row < kTileDims; row += kRowStep) {
            if (d0 + row < a.dim && key0 + position < a.positions)
                prepared[(d0 + row) * a.prepared_stride_dim + key0 + position] =
                    tile[group + key_at(position % 16)][row];
        }
        __syncthreads();
    }
}

}  // namespace
}  // namespace fp

extern "C" flashprefill_status fp_backend_prepare_v(const flashprefill_prepare_v_params *p, void *stream)
{
    flashprefill_status s;
    if ((s = fp_check_prepare_v_device(p)))
        return s;
    constexpr int kMaxGridYz = 65535;
    if (p->heads > kMaxGridYz || p->batch > kMaxGridYz)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "heads = %d or batch = %d exceeds prepare_v's grid limit of %d",
                       p->heads, p->batch, kMaxGridYz);
    fp::PrepareVArgs a{};
    a.v = static_cast<const uint8_t *>(p->v);
    a.v_stride_batch = p->v_stride_batch, a.v_stride_seq = p->v_stride_seq, a.v_stride_head = p->v_stride_head;
    a.prepared = static_cast<uint8_t *>(p->prepared);
    a.prepared_stride_batch = p->prepared_stride_batch, a.prepared_stride_head = p->prepared_stride_head;
    a.prepared_stride_dim = p->prepared_stride_dim;
    a.seqlen = p->seqlen, a.dim = p->dim;
    const int64_t positions = (static_cast<int64_t>(p->seqlen) + 15) / 16 * 16;
    if (positions > INT_MAX)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "seqlen = %d rounds up past 2^31 - 1 positions", p->seqlen);
    a.positions = static_cast<int32_t>(positions);
    const dim3 grid(static_cast<unsigned>((positions + fp::kTileKeys - 1) / fp::kTileKeys), p->heads, p->batch);
    fp::prepare_v_kernel<<<grid, fp::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "prepare_v launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
