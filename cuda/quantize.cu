// flashprefill_quantize on Hopper (include/flashprefill.h): float rows, optionally smoothed and rotated, to e4m3
// codes with one power-of-two exponent per block of tokens, of equal-length or packed (varlen) sequences. Three
// launches, each CTA one block of one head of one sequence:
//   block_exponents:  each block's own exponent (all-zero blocks marked kZeroBlock);
//   finish_exponents: per (batch, head), the span floor and the zero blocks' exponent, in place;
//   encode_blocks:    the codes, transforming each row again; as every tensor or in v's prepared layout.
// The transform runs in float32 with the butterflies of the numpy model (flashprefill.prepare.transform) in the
// same order, so codes and exponents are bit-identical to flashprefill.fp8.quantize_blocks of its result.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "backend.h"
#include "launch_common.h"
#include "ptx.cuh"
#include "quantize_rows.cuh"

namespace fp {
namespace {

using namespace quantize_rows;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
// kMinCtasPerSm CTAs an SM (registers capped at 64 a thread), each lane transforming one row at a time while the
// next one loads: more rows a warp in registers with fewer CTAs measured slower, and so did rows staged through
// shared memory by cp.async (bench/NOTES.md). A row of more than kLoadAheadMaxWords words a lane (float32 beyond
// dim 64) loads when its turn comes: its next row would not fit the registers.
constexpr int kMinCtasPerSm = 4;
constexpr int kLoadAheadMaxWords = 8;
constexpr int kExponentSpan = 64;  // flashprefill.fp8.EXPONENT_SPAN
constexpr int kInvalidSequence = -128;  // every exponent slot of a varlen sequence whose bounds are not valid

struct QuantizeArgs {
    const void *x;  // bf16 or float32 (the kernels' T)
    int64_t x_stride_batch, x_stride_seq, x_stride_head;
    uint8_t *codes;
    int64_t codes_stride_batch, codes_stride_seq, codes_stride_head;
    int64_t codes_stride_dim;  // codes in FLASHPREFILL_V_LAYOUT_PREPARED: the row pitch (else 1, unused)
    int8_t *exponents;  // (batch, heads, blocks)
    float code_max_fraction;  // code_max = code_max_fraction 2^code_max_exponent, the fraction in [0.5, 1)
    int32_t code_max_exponent;
    const float *signs, *subtract;
    int32_t seqlen, heads, block_tokens, blocks;  // varlen: seqlen max_seqlen, blocks ceil(max_seqlen / block_tokens)
    const int32_t *cu_seqlens;  // varlen: batch + 1 row bounds (x_stride_batch and codes_stride_batch 0), else null
    int32_t total;              // varlen: rows of x and codes
};

// One sequence's rows: x's and codes' rows first_row .. first_row + seqlen - 1 of its batch; seqlen < 0 where the
// varlen bounds are not valid (flashprefill_quantize_params: the sequence is not quantized).
struct Sequence {
    int32_t first_row, seqlen;
    __device__ __forceinline__ bool valid() const { return seqlen >= 0; }
};

__device__ __forceinline__ Sequence sequence_of(const QuantizeArgs &a, int batch)
{
    if (a.cu_seqlens == nullptr)
        return {0, a.seqlen};
    const int32_t begin = a.cu_seqlens[batch], end = a.cu_seqlens[batch + 1];
    const bool valid = 0 <= begin && begin <= end && end <= a.total && end - begin <= a.seqlen;
    return {begin, valid ? end - begin : -1};
}

// The per-(batch, head) exponents of this CTA's sequence and head (a.blocks slots).
__device__ __forceinline__ int8_t *exponents_of_head(const QuantizeArgs &a)
{
    return a.exponents + (static_cast<int64_t>(blockIdx.z) * a.heads + blockIdx.y) * a.blocks;
}

// store_parts (quantize_rows.cuh) into a row whose 16-byte chunk c lies at chunk (c + rotation) % (kDim / 16) (the
// prepared encoder's rows in shared memory; a lane's part is at most one chunk).
template <int kDim, int kFirstSlot>
__device__ __forceinline__ void store_parts_rotated(uint8_t *row, int row_lane, const uint8_t *codes, int rotation)
{
    using L = RowLayout<kDim>;
    if constexpr (kFirstSlot < L::kSlots) {
        constexpr int kPerLane = L::part_size(kFirstSlot) / L::kLanes;
        static_assert(16 % kPerLane == 0, "a lane's part lies within one chunk");
        const int e = L::element(kFirstSlot, row_lane);
        store_codes<kPerLane>(row + (e / 16 + rotation) % (kDim / 16) * 16 + e % 16, codes + kFirstSlot);
        store_parts_rotated<kDim, kFirstSlot + kPerLane>(row, row_lane, codes, rotation);
    }
}

// This CTA's block: tokens first_token .. end_token - 1 of its sequence (none past the sequence's end).
__device__ __forceinline__ int first_token(const QuantizeArgs &a) { return blockIdx.x * a.block_tokens; }
__device__ __forceinline__ int end_token(const QuantizeArgs &a, Sequence s)
{
    return min(s.seqlen, (static_cast<int>(blockIdx.x) + 1) * a.block_tokens);
}

// The rows of this CTA's block of sequence s, kRowsPerWarp a warp at a time: f(transform, set, token, valid, y) for
// each row of this lane, y its slots after transform.apply (f multiplies by part_norm), valid false for rows past the
// block's end (their y are not rows of x). Set s is the block's tokens [first + s kRowsPerSet, + kRowsPerSet), warp w's
// kRowsPerWarp of them from w kRowsPerWarp on. The sets a warp takes, and so its shuffles, are warp-uniform; with
// kCtaUniformSets every warp takes every set that holds a token of the block (so that f may synchronise the CTA),
// else only the sets that hold one of its own rows. Where a lane's row is at most 32 bytes, the next set's loads are
// issued before this one is transformed (kLoadAhead).
template <int kDim, class T, bool kCtaUniformSets = false, class F>
__device__ __forceinline__ void for_each_row(const QuantizeArgs &a, Sequence s, F f)
{
    using L = RowLayout<kDim>;
    using Raw = RawRow<kDim, T>;
    constexpr int kRowsPerSet = kWarps * L::kRowsPerWarp;
    constexpr bool kLoadAhead = Raw::kWords <= kLoadAheadMaxWords;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int row_lane = lane % L::kLanes, row_of_warp = lane / L::kLanes;
    const float *mean = a.subtract != nullptr ? a.subtract + (static_cast<int64_t>(blockIdx.z) * a.heads + blockIdx.y)
                                                               * kDim : nullptr;
    const RowTransform<kDim> transform(a.signs, mean, row_lane);
    const int end = end_token(a, s), warp_first = first_token(a) + warp * L::kRowsPerWarp;
    const int sets_from = kCtaUniformSets ? first_token(a) : warp_first;
    const int sets = sets_from < end ? (end - sets_from + kRowsPerSet - 1) / kRowsPerSet : 0;
    const int first = warp_first + row_of_warp;
    const T *x = static_cast<const T *>(a.x) + blockIdx.z * a.x_stride_batch + s.first_row * a.x_stride_seq +
                 blockIdx.y * a.x_stride_head;
    Raw next{};
    if (kLoadAhead && first < end)
        next.load(x + first * a.x_stride_seq, row_lane);
    for (int set = 0; set < sets; ++set) {
        const int token = first + set * kRowsPerSet;
        Raw raw{};
        if constexpr (kLoadAhead) {
            raw = next;
            if (token + kRowsPerSet < end)
                next.load(x + (token + kRowsPerSet) * a.x_stride_seq, row_lane);
        } else if (token < end) {
            raw.load(x + token * a.x_stride_seq, row_lane);
        }
        float y[L::kSlots];
        raw.widen(transform.sign_bit, y);
        transform.apply(row_lane, y);
        f(transform, set, token, token < end, y);
    }
}

// Grid (blocks, heads, batch): the smallest e with max |y| <= code_max * 2^e, clamped to [-127, 127]; 0 where the
// block holds inf or NaN; kZeroBlock where it is all zeros (block_exponent). Varlen: blocks past the sequence's end
// are not written; a sequence whose bounds are not valid gets kInvalidSequence in every slot.
template <int kDim, class T>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm) block_exponents(const __grid_constant__ QuantizeArgs a)
{
    using L = RowLayout<kDim>;
    const Sequence s = sequence_of(a, blockIdx.z);
    if (!s.valid()) {
        if (threadIdx.x == 0)
            exponents_of_head(a)[blockIdx.x] = static_cast<int8_t>(kInvalidSequence);
        return;
    }
    if (first_token(a) >= s.seqlen)
        return;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // max |y| over the block, NaN or inf if the block holds either
    float amax = 0.0f;
    for_each_row<kDim, T>(a, s, [&](const RowTransform<kDim> &transform, int, int, bool valid,
                                    const float (&y)[L::kSlots]) {
        if (valid)
            amax = ptx::max_nan_f32(amax, row_amax<kDim>(transform, y));
    });
    for (int d = 16; d > 0; d /= 2)
        amax = ptx::max_nan_f32(amax, __shfl_xor_sync(kFullWarp, amax, d));
    __shared__ float warp_amax[kWarps];
    if (lane == 0)
        warp_amax[warp] = amax;
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    for (int w = 1; w < kWarps; ++w)
        amax = ptx::max_nan_f32(amax, warp_amax[w]);
    exponents_of_head(a)[blockIdx.x] =
        static_cast<int8_t>(block_exponent(amax, a.code_max_fraction, a.code_max_exponent));
}

// One warp per (batch, head) row of exponents, over its sequence's blocks: zero blocks take the row's largest
// exponent (0 if none), the others at least that minus kExponentSpan. Rows of invalid sequences stay as they are.
__global__ void __launch_bounds__(kThreads) finish_exponents(const __grid_constant__ QuantizeArgs a, int rows)
{
    const int lane = threadIdx.x % 32, row = blockIdx.x * kWarps + threadIdx.x / 32;
    if (row >= rows)
        return;
    const Sequence s = sequence_of(a, row / a.heads);
    if (!s.valid())
        return;
    const int blocks = (s.seqlen + a.block_tokens - 1) / a.block_tokens;
    int8_t *e = a.exponents + static_cast<int64_t>(row) * a.blocks;
    int top = INT_MIN;
    for (int b = lane; b < blocks; b += 32)
        top = e[b] == kZeroBlock ? top : max(top, static_cast<int>(e[b]));
    for (int d = 16; d > 0; d /= 2)
        top = max(top, __shfl_xor_sync(kFullWarp, top, d));
    if (top == INT_MIN)
        top = 0;
    for (int b = lane; b < blocks; b += 32)
        e[b] = static_cast<int8_t>(e[b] == kZeroBlock ? top : max(static_cast<int>(e[b]), top - kExponentSpan));
}

// The key at position p of a prepared row's group of 16 (FLASHPREFILL_V_LAYOUT_PREPARED; as prepare_v.cu).
__device__ __forceinline__ int prepared_key_at(int p) { return 2 * (p / 4) + (p & 1) + 8 * (p % 4 / 2); }

// encode_blocks' shared memory: for the prepared layout, two buffers of kRows tokens' codes [row][dim].
template <bool kPrepared, int kRows, int kDim>
struct FlushCodes {
    alignas(16) uint8_t rows[2][kRows][kDim];
};
template <int kRows, int kDim>
struct FlushCodes<false, kRows, kDim> {};

// Grid (blocks, heads, batch): codes = e4m3(y * 2^-e) (the product is exact but for float32 subnormals, where
// it rounds once), round to nearest even, saturating at 448. kPrepared: written in FLASHPREFILL_V_LAYOUT_PREPARED
// (codes_stride_dim the row pitch, positions contiguous): kFlushRows tokens at a time go through shared memory
// (two buffers, one barrier each), their 16-byte chunks rotated by group of 16 rows so that the reads below
// spread over the banks, then leave as rows of kFlushRows positions, a thread 4 dims of one group (read as 16
// words, 4 dims of one key each, and transposed by byte permutes); positions of keys past seqlen in the last group
// are 0. Needs block_tokens a multiple of 16 (a group within one block).
template <int kDim, class T, bool kPrepared>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm) encode_blocks(const __grid_constant__ QuantizeArgs a)
{
    using L = RowLayout<kDim>;
    constexpr int kRowsPerSet = kWarps * L::kRowsPerWarp;
    constexpr int kFlushRows = kDim <= 128 ? 128 : 64;  // 2 x kFlushRows x kDim <= 32 KiB a CTA
    constexpr int kSetsPerFlush = kFlushRows / kRowsPerSet;
    constexpr int kGroupsPerFlush = kFlushRows / 16, kChunks = kDim / 16;
    static_assert(kFlushRows % kRowsPerSet == 0 && kRowsPerSet % 16 == 0, "flushes of whole sets of whole groups");
    __shared__ FlushCodes<kPrepared, kFlushRows, kDim> flush_codes;
    const Sequence s = sequence_of(a, blockIdx.z);
    if (first_token(a) >= s.seqlen)  // past the sequence's end, or an invalid sequence
        return;
    const int row_lane = threadIdx.x % L::kLanes;
    const float scale = ldexpf(1.0f, -static_cast<int>(exponents_of_head(a)[blockIdx.x]));
    const int first = first_token(a), end = end_token(a, s);
    const int sets = (end - first + kRowsPerSet - 1) / kRowsPerSet;  // every warp's (kCtaUniformSets)
    uint8_t *codes_bh = a.codes + blockIdx.z * a.codes_stride_batch + s.first_row * a.codes_stride_seq +
                        blockIdx.y * a.codes_stride_head;
    for_each_row<kDim, T, kPrepared>(a, s, [&](const RowTransform<kDim> &transform, int set, int token, bool valid,
                                            const float (&y)[L::kSlots]) {
        if (!kPrepared && !valid)
            return;
        static_assert(L::kSlots % 2 == 0, "codes convert in pairs");
        uint8_t codes[L::kSlots];
#pragma unroll
        for (int j = 0; j < L::kSlots; j += 2) {
            // the transform's last step (times the part's 1 / sqrt(n)), then the block's scale
            const uint16_t pair = ptx::cvt_rn_satfinite_e4m3x2_f32(
                __fmul_rn(__fmul_rn(y[j], transform.part_norm(j)), scale),
                __fmul_rn(__fmul_rn(y[j + 1], transform.part_norm(j + 1)), scale));
            codes[j] = valid ? static_cast<uint8_t>(pair) : 0;
            codes[j + 1] = valid ? static_cast<uint8_t>(pair >> 8) : 0;
        }
        if constexpr (!kPrepared) {
            store_parts<kDim, 0>(codes_bh + token * a.codes_stride_seq, row_lane, codes);
        } else {
            const int flush = set / kSetsPerFlush, flush_first = first + flush * kFlushRows;
            uint8_t(&rows)[kFlushRows][kDim] = flush_codes.rows[flush % 2];
            const int row = token - flush_first;
            store_parts_rotated<kDim, 0>(rows[row], row_lane, codes, row / 16);
            if (set % kSetsPerFlush != kSetsPerFlush - 1 && set != sets - 1)
                return;
            __syncthreads();
            for (int piece = threadIdx.x; piece < kDim / 4 * kGroupsPerFlush; piece += kThreads) {
                // groups fastest: a warp's stores fill whole rows of kFlushRows positions (dims fastest, each
                // 16 bytes of a different row, measured 1.6x slower)
                const int group = piece % kGroupsPerFlush, dim4 = piece / kGroupsPerFlush;
                if (flush_first + 16 * group >= end)  // the next block's keys, or none
                    continue;
                const int word_offset = (dim4 / 4 + group) % kChunks * 16 + dim4 % 4 * 4;  // of the rotated chunk
                uint32_t out[4][4];  // [dim of the 4][word of the 16 positions]
#pragma unroll
                for (int w = 0; w < 4; ++w) {
                    uint32_t key[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        key[i] = *reinterpret_cast<const uint32_t *>(
                            &rows[16 * group + prepared_key_at(4 * w + i)][word_offset]);
                    // a 4 x 4 byte transpose: pairs of keys interleaved, then pairs of pairs
                    const uint32_t lo01 = __byte_perm(key[0], key[1], 0x5140);
                    const uint32_t hi01 = __byte_perm(key[0], key[1], 0x7362);
                    const uint32_t lo23 = __byte_perm(key[2], key[3], 0x5140);
                    const uint32_t hi23 = __byte_perm(key[2], key[3], 0x7362);
                    out[0][w] = __byte_perm(lo01, lo23, 0x5410), out[1][w] = __byte_perm(lo01, lo23, 0x7632);
                    out[2][w] = __byte_perm(hi01, hi23, 0x5410), out[3][w] = __byte_perm(hi01, hi23, 0x7632);
                }
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    *reinterpret_cast<uint4 *>(codes_bh + (4 * dim4 + c) * a.codes_stride_dim + flush_first +
                                               16 * group) = make_uint4(out[c][0], out[c][1], out[c][2], out[c][3]);
            }
        }
    });
}

template <int kDim, class T>
cudaError_t launch_typed(const QuantizeArgs &a, int batch, bool prepared, cudaStream_t stream)
{
    const dim3 grid(a.blocks, a.heads, batch);
    block_exponents<kDim, T><<<grid, kThreads, 0, stream>>>(a);
    const int rows = batch * a.heads;
    finish_exponents<<<(rows + kWarps - 1) / kWarps, kThreads, 0, stream>>>(a, rows);
    if (prepared)
        encode_blocks<kDim, T, true><<<grid, kThreads, 0, stream>>>(a);
    else
        encode_blocks<kDim, T, false><<<grid, kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

template <int kDim>
cudaError_t launch(const QuantizeArgs &a, bool x_fp32, int batch, bool prepared, cudaStream_t stream)
{
    return x_fp32 ? launch_typed<kDim, float>(a, batch, prepared, stream)
                  : launch_typed<kDim, __nv_bfloat16>(a, batch, prepared, stream);
}

using LaunchFn = cudaError_t (*)(const QuantizeArgs &, bool, int, bool, cudaStream_t);
// By fp_quantize_dim_index: one kernel per dim, a multiple of FP_QUANTIZE_DIM_STEP.
constexpr LaunchFn kLaunchers[] = {launch<32>, launch<64>, launch<96>, launch<128>,
                                   launch<160>, launch<192>, launch<224>, launch<256>};
static_assert(FP_QUANTIZE_DIM_STEP == 32 && sizeof kLaunchers / sizeof kLaunchers[0] == FP_QUANTIZE_DIM_MAX / 32,
              "one launcher per dim fp_validate_quantize admits");

}  // namespace
}  // namespace fp

extern "C" flashprefill_status fp_backend_check_quantize(const flashprefill_quantize_params *p)
{
    flashprefill_status s;
    if ((s = fp_check_grid_yz("heads", p->heads, p->batch, "the quantizer's")))
        return s;
    if (static_cast<int64_t>(p->batch) * p->heads > INT_MAX)  // finish_exponents' rows, counted in int32
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "batch x heads = %lld exceeds the quantizer's limit of "
                       "2^31 - 1 rows", static_cast<long long>(p->batch) * p->heads);
    return FLASHPREFILL_SUCCESS;
}

extern "C" flashprefill_status fp_backend_quantize(const flashprefill_quantize_params *p, void *stream)
{
    fp::QuantizeArgs a{};
    a.x = p->x;
    const bool x_fp32 = p->x_dtype == FLASHPREFILL_DTYPE_FP32;
    a.x_stride_batch = p->x_stride_batch, a.x_stride_seq = p->x_stride_seq, a.x_stride_head = p->x_stride_head;
    a.codes = static_cast<uint8_t *>(p->codes);
    a.codes_stride_batch = p->codes_stride_batch, a.codes_stride_seq = p->codes_stride_seq;
    a.codes_stride_head = p->codes_stride_head;
    a.exponents = p->exponents;
    a.signs = p->signs, a.subtract = p->subtract;
    a.seqlen = p->cu_seqlens != nullptr ? p->max_seqlen : p->seqlen;
    a.heads = p->heads, a.block_tokens = p->block_tokens;
    a.blocks = (a.seqlen + p->block_tokens - 1) / p->block_tokens;
    a.cu_seqlens = p->cu_seqlens, a.total = p->total;
    a.code_max_fraction = frexpf(fp_quantize_code_max(p), &a.code_max_exponent);
    a.codes_stride_dim = p->codes_stride_dim;
    const bool prepared = p->codes_layout == FLASHPREFILL_V_LAYOUT_PREPARED;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    const cudaError_t err = fp::kLaunchers[fp_quantize_dim_index(p->dim)](a, x_fp32, p->batch, prepared, st);
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "quantizer launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
