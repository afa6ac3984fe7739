// flashprefill_quantize_paged on Hopper (include/flashprefill.h): new token rows of k or v, optionally rotated, into an
// e4m3 paged cache with one power-of-two exponent per (page, kv head). One launch, a warp per (token, head): the warp
// of the first token of each run (the consecutive tokens of one page) is the only writer of that (page, head):
//   1. the run's end, 2. the exponent its rows need, 3. the page's new exponent (exponents read and written once),
//   4. where it grew, the page's codes re-encoded in place, 5. the run's rows encoded at it.
// Every other warp returns at once. A warp, not a CTA, per run: a decode step's runs are one token each, and a
// prompt's runs are a page each, a few passes of a warp's rows; no barrier but the warp's. The transform is
// quantize.cu's (quantize_rows.cuh), so codes are bit-identical to flashprefill.paged.quantize_paged_model.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend.h"
#include "launch_common.h"
#include "ptx.cuh"
#include "quantize_rows.cuh"

namespace fp {
namespace {

using namespace quantize_rows;

constexpr int kWarps = 8;  // tokens a CTA
constexpr int kThreads = 32 * kWarps;
constexpr int kPageEmpty = FLASHPREFILL_PAGE_EMPTY;
static_assert(kPageEmpty == kZeroBlock, "an empty page needs no exponent, as a block of zeros");
// 448 = 0.875 2^9: the exponent rule of flashprefill_quantize with code_max 448
constexpr float kCodeMaxFraction = 0.875f;
constexpr int kCodeMaxExponent = 9;
// A re-encoding by more than this many binades gives +-0 from every code (|code| <= 448 < 2^9, below 2^-31), as the
// exact product would: the multiplier 2^-d stays a normal float.
constexpr int kMaxShift = 40;

struct PagedArgs {
    const void *x;  // bf16 or float32 (the kernel's T)
    int64_t x_stride_token, x_stride_head;
    const int32_t *slot_mapping;
    uint8_t *codes;
    int64_t codes_stride_page, codes_stride_row, codes_stride_head;
    int8_t *exponents;  // (num_pages, heads_kv)
    const float *signs;
    int32_t tokens, heads_kv, page_size, num_pages;
};

// Token t's page, or -1 where its slot skips it (< 0, or past the cache).
__device__ __forceinline__ int page_of(const PagedArgs &a, int t)
{
    const int32_t slot = a.slot_mapping[t];
    return slot >= 0 && slot / a.page_size < a.num_pages ? slot / a.page_size : -1;
}

// The first token after `first` that is not of `page` (a.tokens if none), 32 tokens at a time; every lane of the
// warp gets the same answer.
__device__ __forceinline__ int run_end(const PagedArgs &a, int first, int page, int lane)
{
    for (int base = first + 1; base < a.tokens; base += 32) {
        const bool inside = lane < a.tokens - base;  // base + lane < tokens, without overflow
        const unsigned other = __ballot_sync(kFullWarp, inside && page_of(a, base + lane) != page);
        if (other != 0)
            return base + __ffs(other) - 1;
    }
    return a.tokens;
}

// f(transform, token, y) for each token row of the run [first, end) of head `head`, kRowsPerWarp rows at a time, y
// its slots after transform.apply (f multiplies by part_norm). Every lane takes part in every round (the
// butterflies shuffle); rows past the run are not passed to f.
template <int kDim, class T, class F>
__device__ __forceinline__ void for_each_run_row(const PagedArgs &a, int first, int end, int head, int lane, F f)
{
    using L = RowLayout<kDim>;
    const int row_lane = lane % L::kLanes;
    const RowTransform<kDim> transform(a.signs, nullptr, row_lane);
    const T *x = static_cast<const T *>(a.x) + head * a.x_stride_head;
    for (int round_first = first; round_first < end; round_first += L::kRowsPerWarp) {
        const int token = round_first + lane / L::kLanes;
        RawRow<kDim, T> raw{};
        if (token < end)
            raw.load(x + token * a.x_stride_token, row_lane);
        float y[L::kSlots];
        raw.widen(transform.sign_bit, y);
        transform.apply(row_lane, y);
        if (token < end)
            f(transform, token, y);
    }
}

// The page's codes of one head, every row, from exponent `from` to the larger `to`: code' = e4m3(decode(code) *
// 2^(from - to)), round to nearest even (exact but where the result is subnormal), 16 codes a lane at a time.
template <int kDim>
__device__ __forceinline__ void reencode_page(uint8_t *page_head, int64_t stride_row, int page_size, int from, int to,
                                              int lane)
{
    constexpr int kChunks = kDim / 16;
    const float scale = ldexpf(1.0f, -min(to - from, kMaxShift));
    for (int c = lane; c < page_size * kChunks; c += 32) {
        uint4 *chunk = reinterpret_cast<uint4 *>(page_head + c / kChunks * stride_row + c % kChunks * 16);
        const uint4 old = *chunk;
        const uint32_t old_words[4] = {old.x, old.y, old.z, old.w};
        uint32_t words[4];
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            uint32_t word = 0;
#pragma unroll
            for (int pair = 0; pair < 2; ++pair) {
                const uint32_t halves = ptx::cvt_rn_f16x2_e4m3x2(static_cast<uint16_t>(old_words[w] >> 16 * pair));
                const float2 values = __half22float2(*reinterpret_cast<const __half2 *>(&halves));
                const uint32_t codes = ptx::cvt_rn_satfinite_e4m3x2_f32(__fmul_rn(values.x, scale),
                                                                       __fmul_rn(values.y, scale));
                word |= codes << 16 * pair;
            }
            words[w] = word;
        }
        *chunk = make_uint4(words[0], words[1], words[2], words[3]);
    }
}

// Grid (ceil(tokens / kWarps), heads_kv): warp w of CTA x takes token x kWarps + w.
template <int kDim, class T>
__global__ void __launch_bounds__(kThreads) write_runs(const __grid_constant__ PagedArgs a)
{
    using L = RowLayout<kDim>;
    const int lane = threadIdx.x % 32, head = blockIdx.y;
    const int first = blockIdx.x * kWarps + threadIdx.x / 32;
    if (first >= a.tokens)
        return;
    const int page = page_of(a, first);
    if (page < 0 || (first > 0 && page_of(a, first - 1) == page))
        return;  // a skipped token, or not the first of its run
    const int end = run_end(a, first, page, lane);

    // 2. max |y| over the run's rows, NaN or inf if one holds either
    float amax = 0.0f;
    for_each_run_row<kDim, T>(a, first, end, head, lane, [&](const RowTransform<kDim> &transform, int,
                                                             const float (&y)[L::kSlots]) {
        amax = ptx::max_nan_f32(amax, row_amax<kDim>(transform, y));
    });
    for (int d = 16; d > 0; d /= 2)
        amax = ptx::max_nan_f32(amax, __shfl_xor_sync(kFullWarp, amax, d));

    // 3. the page's exponent only grows; an empty page given only zero rows takes the smallest
    int8_t *exponent = a.exponents + static_cast<int64_t>(page) * a.heads_kv + head;
    const int from = *exponent, need = block_exponent(amax, kCodeMaxFraction, kCodeMaxExponent);
    const int to = max(max(from, need), kMinExponent);
    __syncwarp();  // every lane has read the exponent before it is written
    if (lane == 0)
        *exponent = static_cast<int8_t>(to);
    uint8_t *page_head = a.codes + page * a.codes_stride_page + head * a.codes_stride_head;

    // 4. the codes already there, at the grown exponent (an empty page holds none)
    if (from != kPageEmpty && to > from) {
        reencode_page<kDim>(page_head, a.codes_stride_row, a.page_size, from, to, lane);
        __syncwarp();  // before the run's rows are written over some of them
    }

    // 5. the run's rows: e4m3(y * 2^-to), as encode_blocks
    const float scale = ldexpf(1.0f, -to);
    const int row_lane = lane % L::kLanes;
    for_each_run_row<kDim, T>(a, first, end, head, lane, [&](const RowTransform<kDim> &transform, int token,
                                                             const float (&y)[L::kSlots]) {
        static_assert(L::kSlots % 2 == 0, "codes convert in pairs");
        uint8_t codes[L::kSlots];
#pragma unroll
        for (int j = 0; j < L::kSlots; j += 2) {
            const uint16_t pair = ptx::cvt_rn_satfinite_e4m3x2_f32(
                __fmul_rn(__fmul_rn(y[j], transform.part_norm(j)), scale),
                __fmul_rn(__fmul_rn(y[j + 1], transform.part_norm(j + 1)), scale));
            codes[j] = static_cast<uint8_t>(pair);
            codes[j + 1] = static_cast<uint8_t>(pair >> 8);
        }
        store_parts<kDim, 0>(page_head + a.slot_mapping[token] % a.page_size * a.codes_stride_row, row_lane, codes);
    });
}

template <int kDim>
cudaError_t launch(const PagedArgs &a, bool x_fp32, cudaStream_t stream)
{
    const dim3 grid((a.tokens + kWarps - 1) / kWarps, a.heads_kv);
    if (x_fp32)
        write_runs<kDim, float><<<grid, kThreads, 0, stream>>>(a);
    else
        write_runs<kDim, __nv_bfloat16><<<grid, kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

using LaunchFn = cudaError_t (*)(const PagedArgs &, bool, cudaStream_t);
// By fp_quantize_dim_index: one kernel per dim, as the quantizer's.
constexpr LaunchFn kLaunchers[] = {launch<32>, launch<64>, launch<96>, launch<128>,
                                   launch<160>, launch<192>, launch<224>, launch<256>};
static_assert(FP_QUANTIZE_DIM_STEP == 32 && sizeof kLaunchers / sizeof kLaunchers[0] == FP_QUANTIZE_DIM_MAX / 32,
              "one launcher per dim fp_validate_quantize_paged admits");

}  // namespace
}  // namespace fp

extern "C" flashprefill_status fp_backend_check_quantize_paged(const flashprefill_quantize_paged_params *p)
{
    if (p->heads_kv > FP_MAX_GRID_YZ)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "heads_kv = %d exceeds the paged quantizer's grid limit of %d",
                       (int)p->heads_kv, FP_MAX_GRID_YZ);
    return FLASHPREFILL_SUCCESS;
}

extern "C" flashprefill_status fp_backend_quantize_paged(const flashprefill_quantize_paged_params *p, void *stream)
{
    fp::PagedArgs a{};
    a.x = p->x;
    a.x_stride_token = p->x_stride_token, a.x_stride_head = p->x_stride_head;
    a.slot_mapping = p->slot_mapping;
    a.codes = static_cast<uint8_t *>(p->codes);
    a.codes_stride_page = p->codes_stride_page, a.codes_stride_row = p->codes_stride_row;
    a.codes_stride_head = p->codes_stride_head;
    a.exponents = p->exponents;
    a.signs = p->signs;
    a.tokens = p->tokens, a.heads_kv = p->heads_kv;
    a.page_size = p->page_size, a.num_pages = p->num_pages;
    const bool x_fp32 = p->x_dtype == FLASHPREFILL_DTYPE_FP32;
    const cudaError_t err =
        fp::kLaunchers[fp_quantize_dim_index(p->dim)](a, x_fp32, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "paged quantizer launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
