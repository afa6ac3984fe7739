// flashprefill_quantize on Hopper (include/flashprefill.h): float rows, optionally smoothed and rotated, to e4m3
// codes with one power-of-two exponent per block of tokens. Three launches:
//   block_exponents:  each block's own exponent (all-zero blocks marked kZeroBlock);
//   finish_exponents: per (batch, head), the span floor and the zero blocks' exponent, in place;
//   encode_blocks:    the codes, transforming each row again.
// The transform runs in float32 with the butterflies of the numpy model (flashprefill.prepare.transform) in the
// same order, so codes and exponents are bit-identical to flashprefill.fp8.quantize_blocks of its result.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend.h"
#include "device.h"

namespace fp {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
// Rows in flight: kSetsInFlight sets of kRowsPerWarp rows a warp, kMinCtasPerSm CTAs an SM (registers capped at 64 a
// thread). More rows a warp with fewer CTAs measured slower (2 sets and 3 CTAs: +11% kernel time at 16k, 4 and 2:
// +32%, 8 and 1: +90%; bench/NOTES.md).
constexpr int kSetsInFlight = 1;
constexpr int kMinCtasPerSm = 4;
constexpr int kExponentSpan = 64;         // flashprefill.fp8.EXPONENT_SPAN
constexpr int kMinExponent = -127, kMaxExponent = 127;
constexpr int kZeroBlock = -128;          // below every real exponent
constexpr unsigned kFullWarp = 0xffffffffu;

struct QuantizeArgs {
    const void *x;
    bool x_fp32;
    int64_t x_stride_batch, x_stride_seq, x_stride_head;
    uint8_t *codes;
    int64_t codes_stride_batch, codes_stride_seq, codes_stride_head;
    int8_t *exponents;  // (batch, heads, blocks)
    float code_max_fraction;  // code_max = code_max_fraction 2^code_max_exponent, the fraction in [0.5, 1)
    int32_t code_max_exponent;
    const float *signs, *subtract;
    int32_t seqlen, heads, block_tokens, blocks;
};

// One token row of one head across kLanes lanes of a warp (8 up to dim 128, 16 beyond: at most 16 slots a lane),
// 32 / kLanes rows a warp. dim splits into power-of-two parts, largest first (192 = 128 + 64); row lane l holds, of
// each part of n elements, the n / kLanes consecutive ones from part_start + l * n / kLanes. Slot j of a lane walks
// the parts in order.
template <int kDim>
struct RowLayout {
    static_assert(kDim % 32 == 0 && kDim <= 256, "dim: a multiple of 32 up to 256");
    static constexpr int kLanes = kDim <= 128 ? 8 : 16;
    static constexpr int kRowsPerWarp = 32 / kLanes;
    static constexpr int kSlots = kDim / kLanes;
    // The part holding slot j: its size in elements (part_size) and its first slot (part_first_slot).
    __device__ static constexpr int part_size(int j)
    {
        int first_slot = 0;
        for (int bit = 3; bit >= 0; --bit) {
            const int slots = (kDim / 32 >> bit & 1) * (32 << bit) / kLanes;
            if (j < first_slot + slots)
                return 32 << bit;
            first_slot += slots;
        }
        return 0;
    }
    __device__ static constexpr int part_first_slot(int j)
    {
        int first_slot = 0;
        for (int bit = 3; bit >= 0; --bit) {
            const int slots = (kDim / 32 >> bit & 1) * (32 << bit) / kLanes;
            if (j < first_slot + slots)
                return first_slot;
            first_slot += slots;
        }
        return 0;
    }
    // The element held in slot j by row lane `row_lane` (parts start where the previous ones' elements end).
    __device__ static constexpr int element(int j, int row_lane)
    {
        const int per_lane = part_size(j) / kLanes, first = part_first_slot(j);
        return kLanes * first + row_lane * per_lane + (j - first);
    }
};

// c consecutive values from p as floats (bf16 widened exactly), with 16-byte vector loads where c allows.
template <int kCount, class T>
__device__ __forceinline__ void load_chunk(const T *p, float *out)
{
    constexpr int kBytes = kCount * static_cast<int>(sizeof(T));
    static_assert(kBytes % 2 == 0 && kBytes <= 64, "chunk size");
    if constexpr (kBytes > 16) {
        load_chunk<kCount / 2>(p, out);
        load_chunk<kCount / 2>(p + kCount / 2, out + kCount / 2);
    } else {
        using Vec = typename std::conditional<kBytes == 16, uint4, typename std::conditional<kBytes == 8, uint2,
                    typename std::conditional<kBytes == 4, uint32_t, uint16_t>::type>::type>::type;
        const Vec raw = *reinterpret_cast<const Vec *>(p);
        const T *values = reinterpret_cast<const T *>(&raw);
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
            if constexpr (std::is_same<T, float>::value)
                out[i] = values[i];
            else
                out[i] = __bfloat162float(values[i]);
        }
    }
}

// c e4m3 codes to p, with one store.
template <int kCount>
__device__ __forceinline__ void store_codes(uint8_t *p, const uint8_t *codes)
{
    using Vec = typename std::conditional<kCount == 16, uint4, typename std::conditional<kCount == 8, uint2,
                typename std::conditional<kCount == 4, uint32_t,
                typename std::conditional<kCount == 2, uint16_t, uint8_t>::type>::type>::type>::type;
    Vec packed;
    memcpy(&packed, codes, kCount);
    *reinterpret_cast<Vec *>(p) = packed;
}

// This lane's slots of one row of codes, part by part.
template <int kDim, int kFirstSlot>
__device__ __forceinline__ void store_parts(uint8_t *row, int row_lane, const uint8_t *codes)
{
    using L = RowLayout<kDim>;
    if constexpr (kFirstSlot < L::kSlots) {
        constexpr int kPerLane = L::part_size(kFirstSlot) / L::kLanes;
        store_codes<kPerLane>(row + L::element(kFirstSlot, row_lane), codes + kFirstSlot);
        store_parts<kDim, kFirstSlot + kPerLane>(row, row_lane, codes);
    }
}

// y = H diag(signs) (x - subtract) of token rows of one (batch, head), in float32 with the butterflies of the
// numpy model (prepare.transform) in its order. A missing subtract subtracts 0 (exact); without signs, no H.
template <int kDim>
struct RowTransform {
    using L = RowLayout<kDim>;
    float sign[L::kSlots], shift[L::kSlots];
    bool rotate;

    __device__ __forceinline__ RowTransform(const QuantizeArgs &a, int batch, int head, int row_lane)
        : rotate(a.signs != nullptr)
    {
        const int64_t mean = (static_cast<int64_t>(batch) * a.heads + head) * kDim;
#pragma unroll
        for (int j = 0; j < L::kSlots; ++j) {
            sign[j] = rotate ? a.signs[L::element(j, row_lane)] : 1.0f;
            shift[j] = a.subtract != nullptr ? a.subtract[mean + L::element(j, row_lane)] : 0.0f;
        }
    }

    // This lane's slots of row `token`, as floats.
    __device__ __forceinline__ static void load(const QuantizeArgs &a, int batch, int token, int head, int row_lane,
                                                float (&y)[L::kSlots])
    {
        const int64_t row = batch * a.x_stride_batch + token * a.x_stride_seq + head * a.x_stride_head;
        load_parts<0>(a, row, row_lane, y);
    }

    template <int kFirstSlot>
    __device__ __forceinline__ static void load_parts(const QuantizeArgs &a, int64_t row, int row_lane,
                                                      float (&y)[L::kSlots])
    {
        if constexpr (kFirstSlot < L::kSlots) {
            constexpr int kPerLane = L::part_size(kFirstSlot) / L::kLanes;
            const int64_t first = row + L::element(kFirstSlot, row_lane);
            if (a.x_fp32)
                load_chunk<kPerLane>(static_cast<const float *>(a.x) + first, y + kFirstSlot);
            else
                load_chunk<kPerLane>(static_cast<const __nv_bfloat16 *>(a.x) + first, y + kFirstSlot);
            load_parts<kFirstSlot + kPerLane>(a, row, row_lane, y);
        }
    }

    // Every lane of the warp takes part (the butterflies across lanes shuffle within each row's kLanes lanes).
    __device__ __forceinline__ void apply(int row_lane, float (&y)[L::kSlots]) const
    {
#pragma unroll
        for (int j = 0; j < L::kSlots; ++j)
            y[j] = (y[j] - shift[j]) * sign[j];
        if (!rotate)
            return;
        // Per part of n elements: butterflies (x_i, x_{i+h}) -> (x_i + x_{i+h}, x_i - x_{i+h}) for h = 1, 2, ...,
        // n / 2 (Sylvester order), within a lane while h < n / kLanes, then across lanes, where the lane holding
        // x_{i+h} computes other - y as fma(y, -1, other) (exact: one rounding of the same difference); then times
        // 1 / sqrt(n) rounded to float.
#pragma unroll
        for (int j0 = 0; j0 < L::kSlots; j0 += L::part_size(j0) / L::kLanes) {
            const int per_lane = L::part_size(j0) / L::kLanes;
#pragma unroll
            for (int h = 1; h < per_lane; h *= 2)
#pragma unroll
                for (int j = 0; j < per_lane; ++j)
                    if ((j & h) == 0) {
                        const float lo = y[j0 + j], hi = y[j0 + j + h];
                        y[j0 + j] = lo + hi;
                        y[j0 + j + h] = lo - hi;
                    }
#pragma unroll
            for (int d = 1; d < L::kLanes; d *= 2) {
                const float own_sign = (row_lane & d) ? -1.0f : 1.0f;
#pragma unroll
                for (int j = 0; j < per_lane; ++j)
                    y[j0 + j] = fmaf(y[j0 + j], own_sign, __shfl_xor_sync(kFullWarp, y[j0 + j], d));
            }
            const float norm = static_cast<float>(1.0 / sqrt(static_cast<double>(L::part_size(j0))));
#pragma unroll
            for (int j = 0; j < per_lane; ++j)
                y[j0 + j] = __fmul_rn(y[j0 + j], norm);
        }
    }
};

__device__ __forceinline__ int first_token(const QuantizeArgs &a) { return blockIdx.x * a.block_tokens; }
__device__ __forceinline__ int end_token(const QuantizeArgs &a)
{
    return min(a.seqlen, (static_cast<int>(blockIdx.x) + 1) * a.block_tokens);
}
__device__ __forceinline__ int8_t *exponent_of_block(const QuantizeArgs &a)
{
    return a.exponents + (static_cast<int64_t>(blockIdx.z) * a.heads + blockIdx.y) * a.blocks + blockIdx.x;
}

// The rows of this CTA's block, kSetsInFlight sets of kRowsPerWarp rows a warp at a time (all loaded before any is
// transformed): f(token, valid, y) for each row of this lane, y this lane's transformed slots, valid false for rows
// past the block's end (their y are not rows of x).
template <int kDim, class F>
__device__ __forceinline__ void for_each_row(const QuantizeArgs &a, F f)
{
    using L = RowLayout<kDim>;
    constexpr int kRowsPerSet = kWarps * L::kRowsPerWarp;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int row_lane = lane % L::kLanes, row_of_warp = lane / L::kLanes;
    const RowTransform<kDim> transform(a, blockIdx.z, blockIdx.y, row_lane);
    const int end = end_token(a);
    // `base` is the same for the whole warp, so every lane runs the shuffles of each set it takes.
    for (int base = first_token(a) + warp * L::kRowsPerWarp; base < end; base += kSetsInFlight * kRowsPerSet) {
        float y[kSetsInFlight][L::kSlots];
#pragma unroll
        for (int set = 0; set < kSetsInFlight; ++set) {
#pragma unroll
            for (int j = 0; j < L::kSlots; ++j)
                y[set][j] = 0.0f;
            const int token = base + set * kRowsPerSet + row_of_warp;
            if (token < end)
                RowTransform<kDim>::load(a, blockIdx.z, token, blockIdx.y, row_lane, y[set]);
        }
#pragma unroll
        for (int set = 0; set < kSetsInFlight; ++set) {
            if (base + set * kRowsPerSet >= end)
                break;
            const int token = base + set * kRowsPerSet + row_of_warp;
            transform.apply(row_lane, y[set]);
            f(token, token < end, y[set]);
        }
    }
}

// Grid (blocks, heads, batch): the smallest e with max |y| <= code_max * 2^e, clamped to [-127, 127]; 0 where the
// block holds inf or NaN; kZeroBlock where it is all zeros.
template <int kDim>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm) block_exponents(const __grid_constant__ QuantizeArgs a)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float amax = 0.0f;
    bool nonfinite = false;
    for_each_row<kDim>(a, [&](int, bool valid, const float (&y)[RowLayout<kDim>::kSlots]) {
        if (!valid)
            return;
#pragma unroll
        for (int j = 0; j < RowLayout<kDim>::kSlots; ++j) {
            nonfinite |= !isfinite(y[j]);
            amax = isfinite(y[j]) ? fmaxf(amax, fabsf(y[j])) : amax;
        }
    });
    for (int d = 16; d > 0; d /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(kFullWarp, amax, d));
    nonfinite = __any_sync(kFullWarp, nonfinite);
    __shared__ float warp_amax[kWarps];
    __shared__ bool warp_nonfinite[kWarps];
    if (lane == 0) {
        warp_amax[warp] = amax;
        warp_nonfinite[warp] = nonfinite;
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    for (int w = 1; w < kWarps; ++w) {
        amax = fmaxf(amax, warp_amax[w]);
        nonfinite |= warp_nonfinite[w];
    }
    int exponent = kZeroBlock;
    if (nonfinite) {
        exponent = 0;
    } else if (amax > 0.0f) {
        // amax = f 2^k and code_max = g 2^c, f and g in [0.5, 1): amax <= code_max 2^e  <=>  e >= k - c + (f > g)
        // (448 = 0.875 2^9).
        int k;
        const float f = frexpf(amax, &k);
        exponent = min(max(k - a.code_max_exponent + (f > a.code_max_fraction), kMinExponent), kMaxExponent);
    }
    *exponent_of_block(a) = static_cast<int8_t>(exponent);
}

// One warp per (batch, head) row of exponents: zero blocks take the row's largest exponent (0 if none), the
// others at least that minus kExponentSpan.
__global__ void __launch_bounds__(kThreads) finish_exponents(const __grid_constant__ QuantizeArgs a, int rows)
{
    const int lane = threadIdx.x % 32, row = blockIdx.x * kWarps + threadIdx.x / 32;
    if (row >= rows)
        return;
    int8_t *e = a.exponents + static_cast<int64_t>(row) * a.blocks;
    int top = INT_MIN;
    for (int b = lane; b < a.blocks; b += 32)
        top = e[b] == kZeroBlock ? top : max(top, static_cast<int>(e[b]));
    for (int d = 16; d > 0; d /= 2)
        top = max(top, __shfl_xor_sync(kFullWarp, top, d));
    if (top == INT_MIN)
        top = 0;
    for (int b = lane; b < a.blocks; b += 32)
        e[b] = static_cast<int8_t>(e[b] == kZeroBlock ? top : max(static_cast<int>(e[b]), top - kExponentSpan));
}

// Grid (blocks, heads, batch): codes = e4m3(y * 2^-e) (the product is exact but for float32 subnormals, where
// it rounds once), round to nearest even, saturating at 448.
template <int kDim>
__global__ void __launch_bounds__(kThreads, kMinCtasPerSm) encode_blocks(const __grid_constant__ QuantizeArgs a)
{
    using L = RowLayout<kDim>;
    const int row_lane = threadIdx.x % L::kLanes;
    const float scale = ldexpf(1.0f, -static_cast<int>(*exponent_of_block(a)));
    for_each_row<kDim>(a, [&](int token, bool valid, const float (&y)[L::kSlots]) {
        if (!valid)
            return;
        uint8_t codes[L::kSlots];
#pragma unroll
        for (int j = 0; j < L::kSlots; ++j)
            codes[j] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(y[j], scale), __NV_SATFINITE, __NV_E4M3));
        uint8_t *row = a.codes + blockIdx.z * a.codes_stride_batch + token * a.codes_stride_seq +
                       blockIdx.y * a.codes_stride_head;
        store_parts<kDim, 0>(row, row_lane, codes);
    });
}

template <int kDim>
cudaError_t launch(const QuantizeArgs &a, int batch, cudaStream_t stream)
{
    const dim3 grid(a.blocks, a.heads, batch);
    block_exponents<kDim><<<grid, kThreads, 0, stream>>>(a);
    const int rows = batch * a.heads;
    finish_exponents<<<(rows + kWarps - 1) / kWarps, kThreads, 0, stream>>>(a, rows);
    encode_blocks<kDim><<<grid, kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace
}  // namespace fp

extern "C" flashprefill_status fp_backend_quantize(const flashprefill_quantize_params *p, void *stream)
{
    flashprefill_status s;
    if ((s = fp_check_quantize_device(p)))
        return s;
    constexpr int kMaxGridYz = 65535;
    if (p->heads > kMaxGridYz || p->batch > kMaxGridYz || static_cast<int64_t>(p->batch) * p->heads > INT_MAX)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "heads = %d or batch = %d exceeds the quantizer's grid limit "
                       "of %d", p->heads, p->batch, kMaxGridYz);
    fp::QuantizeArgs a{};
    a.x = p->x;
    a.x_fp32 = p->x_dtype == FLASHPREFILL_DTYPE_FP32;
    a.x_stride_batch = p->x_stride_batch, a.x_stride_seq = p->x_stride_seq, a.x_stride_head = p->x_stride_head;
    a.codes = static_cast<uint8_t *>(p->codes);
    a.codes_stride_batch = p->codes_stride_batch, a.codes_stride_seq = p->codes_stride_seq;
    a.codes_stride_head = p->codes_stride_head;
    a.exponents = p->exponents;
    a.signs = p->signs, a.subtract = p->subtract;
    a.seqlen = p->seqlen, a.heads = p->heads, a.block_tokens = p->block_tokens;
    a.blocks = (p->seqlen + p->block_tokens - 1) / p->block_tokens;
    a.code_max_fraction = frexpf(p->code_max == 0.0f ? 448.0f : p->code_max, &a.code_max_exponent);
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    cudaError_t err;
    switch (p->dim) {
    case 32: err = fp::launch<32>(a, p->batch, st); break;
    case 64: err = fp::launch<64>(a, p->batch, st); break;
    case 96: err = fp::launch<96>(a, p->batch, st); break;
    case 128: err = fp::launch<128>(a, p->batch, st); break;
    case 160: err = fp::launch<160>(a, p->batch, st); break;
    case 192: err = fp::launch<192>(a, p->batch, st); break;
    case 224: err = fp::launch<224>(a, p->batch, st); break;
    case 256: err = fp::launch<256>(a, p->batch, st); break;
    default:  // fp_validate_quantize refused every other dim
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "dim = %d", p->dim);
    }
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "quantizer launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
