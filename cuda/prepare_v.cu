// flashprefill_prepare_v: fp8 V (batch, seq, heads, dim) rewritten as FLASHPREFILL_V_LAYOUT_PREPARED, the rows of
// keys that the Hopper kernel loads as V^T (fwd/vt_layout.cuh) without transposing V itself. Within each
// group of 16 keys the positions follow the order in which a consumer thread's registers hold P's keys
// (fwd/transpose_v.cuh): position 4c + i holds key 2c + {0, 1, 8, 9}[i].
//
// One CTA per 64 positions of one (batch, head): per 64 dims, V's 64 x 64 bytes through shared memory, read as 16
// bytes of dims and written as 16 positions (one group of keys), each thread one of each. Positions of keys >=
// seqlen are written 0. dim a multiple of 16 (whole 16-byte pieces; the fp8 kernels take dim_v 128).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "backend.h"
#include "launch_common.h"

namespace fp {
namespace {

constexpr int kTileKeys = 64, kTileDims = 64, kPiece = 16, kThreads = kTileKeys * kTileDims / kPiece;
static_assert(kTileDims == kTileKeys, "a thread loads piece `piece` of key `row` and stores the same of dim `row`");
static_assert(kTileKeys % 16 == 0 && kPiece == 16, "a stored piece is one group of 16 keys");

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
    __shared__ alignas(16) uint8_t tile[kTileKeys][kTileDims];  // [key][dim]
    const int key0 = blockIdx.x * kTileKeys, head = blockIdx.y, batch = blockIdx.z;
    const uint8_t *v = a.v + batch * a.v_stride_batch + head * a.v_stride_head;
    uint8_t *prepared = a.prepared + batch * a.prepared_stride_batch + head * a.prepared_stride_head;
    constexpr int kPiecesPerRow = kTileDims / kPiece;
    const int row = threadIdx.x / kPiecesPerRow, piece = threadIdx.x % kPiecesPerRow;
    for (int d0 = 0; d0 < a.dim; d0 += kTileDims) {
        const int key = key0 + row, dim = d0 + kPiece * piece;  // load: 16 dims of key `row`
        uint4 x = make_uint4(0, 0, 0, 0);
        if (key < a.seqlen && dim < a.dim)
            x = *reinterpret_cast<const uint4 *>(v + key * a.v_stride_seq + dim);
        *reinterpret_cast<uint4 *>(&tile[row][kPiece * piece]) = x;
        __syncthreads();
        const int out_dim = d0 + row, position = key0 + kPiece * piece;  // store: 16 positions of dim `row`
        if (out_dim < a.dim && position < a.positions) {
            alignas(16) uint8_t bytes[kPiece];
#pragma unroll
            for (int p = 0; p < kPiece; ++p)
                bytes[p] = tile[kPiece * piece + key_at(p)][row];
            *reinterpret_cast<uint4 *>(prepared + out_dim * a.prepared_stride_dim + position) =
                *reinterpret_cast<const uint4 *>(bytes);
        }
        __syncthreads();
    }
}

}  // namespace
}  // namespace fp

extern "C" flashprefill_status fp_backend_check_prepare_v(const flashprefill_prepare_v_params *p)
{
    static_assert(fp::kPiece == FP_PREPARED_GROUP_KEYS, "fp_validate_prepare_v admits dims of whole 16-byte pieces");
    flashprefill_status s;
    if ((s = fp_check_grid_yz("heads", p->heads, p->batch, "prepare_v's")))
        return s;
    if (fp_prepared_positions(p->seqlen) > INT_MAX)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "seqlen = %d rounds up past 2^31 - 1 positions", p->seqlen);
    return FLASHPREFILL_SUCCESS;
}

extern "C" flashprefill_status fp_backend_prepare_v(const flashprefill_prepare_v_params *p, void *stream)
{
    fp::PrepareVArgs a{};
    a.v = static_cast<const uint8_t *>(p->v);
    a.v_stride_batch = p->v_stride_batch, a.v_stride_seq = p->v_stride_seq, a.v_stride_head = p->v_stride_head;
    a.prepared = static_cast<uint8_t *>(p->prepared);
    a.prepared_stride_batch = p->prepared_stride_batch, a.prepared_stride_head = p->prepared_stride_head;
    a.prepared_stride_dim = p->prepared_stride_dim;
    a.seqlen = p->seqlen, a.dim = p->dim;
    const int64_t positions = fp_prepared_positions(p->seqlen);  // fp_backend_check_prepare_v: fits int32
    a.positions = static_cast<int32_t>(positions);
    const dim3 grid(static_cast<unsigned>((positions + fp::kTileKeys - 1) / fp::kTileKeys), p->heads, p->batch);
    fp::prepare_v_kernel<<<grid, fp::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "prepare_v launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
