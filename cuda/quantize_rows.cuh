// The quantizers' rows (cuda/quantize.cu, cuda/quantize_paged.cu): one token row of one head spread over a few lanes
// of a warp, loaded, transformed as the numpy model does (flashprefill.prepare.transform), and stored as e4m3 codes;
// the exponent of a row's or block's largest magnitude.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ptx.cuh"

namespace fp {
namespace quantize_rows {

constexpr int kMinExponent = -127, kMaxExponent = 127;
constexpr int kZeroBlock = -128;  // below every real exponent: a block (or page) of zeros, or none
constexpr unsigned kFullWarp = 0xffffffffu;

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

// y = H diag(signs) (x - shift) of token rows of one head, in float32 with the butterflies of the numpy model
// (prepare.transform) in its order. A missing shift subtracts 0 (exact); without signs, no H.
template <int kDim>
struct RowTransform {
    using L = RowLayout<kDim>;
    // The signs live in registers, as sign bits: RawRow::widen flips them with the load's own integer op (times
    // -1 is exact, so diag(signs) (x - mean) = diag(signs) x - diag(signs) mean bit for bit). The (rare) subtracted
    // mean is read from global memory (L1) row by row, which keeps the kernels within their 64 registers with the
    // next row's loads in flight.
    uint32_t sign_bit[L::kSlots];  // 0 or 0x80000000
    const float *shift;            // this (batch, head)'s mean, or null
    bool rotate;

    // signs: dim floats or null; shift: this head's dim floats (flashprefill_quantize's subtract) or null.
    __device__ __forceinline__ RowTransform(const float *signs, const float *shift_or_null, int row_lane)
        : shift(shift_or_null), rotate(signs != nullptr)
    {
#pragma unroll
        for (int j = 0; j < L::kSlots; ++j)
            sign_bit[j] = rotate ? __float_as_uint(signs[L::element(j, row_lane)]) & 0x80000000u : 0u;
    }

    // y: this lane's slots of a row, signs already applied (RawRow::widen). Every lane of the warp takes part (the
    // butterflies across lanes shuffle within each row's kLanes lanes).
    __device__ __forceinline__ void apply(int row_lane, float (&y)[L::kSlots]) const
    {
        // (y - 0) is y exactly (-0 - +0 is -0 in round to nearest), so rows without a mean skip the subtraction.
        if (shift != nullptr) {
#pragma unroll
            for (int j = 0; j < L::kSlots; ++j)
                y[j] -= __uint_as_float(__float_as_uint(__ldg(shift + L::element(j, row_lane))) ^ sign_bit[j]);
        }
        if (!rotate)
            return;
        // Per part of n elements: butterflies (x_i, x_{i+h}) -> (x_i + x_{i+h}, x_i - x_{i+h}) for h = 1, 2, ...,
        // n / 2 (Sylvester order), within a lane while h < n / kLanes, then across lanes, where the lane holding
        // x_{i+h} computes other - y as fma(y, -1, other) (exact: one rounding of the same difference). The
        // transform's last step, times 1 / sqrt(n) (part_norm), is the caller's.
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
        }
    }

    // The multiplier of the part holding slot j: 1 / sqrt(n) rounded to float, 1 without rotation.
    __device__ __forceinline__ float part_norm(int j) const
    {
        return rotate ? static_cast<float>(1.0 / sqrt(static_cast<double>(L::part_size(j)))) : 1.0f;
    }
};

// This lane's slots of one token row as they are in memory (bf16 pairs or floats), by the widest vector load
// each part allows (every part of a lane is 4 << k bytes).
template <int kDim, class T>
struct RawRow {
    using L = RowLayout<kDim>;
    static constexpr int kWords = L::kSlots * static_cast<int>(sizeof(T)) / 4;
    uint32_t words[kWords];

    template <int kFirstSlot = 0>
    __device__ __forceinline__ void load(const T *row, int row_lane)
    {
        if constexpr (kFirstSlot < L::kSlots) {
            constexpr int kPartBytes = L::part_size(kFirstSlot) / L::kLanes * static_cast<int>(sizeof(T));
            constexpr int kVectorBytes = kPartBytes < 16 ? kPartBytes : 16;
            constexpr int kFirstWord = kFirstSlot * static_cast<int>(sizeof(T)) / 4;
            const char *part = reinterpret_cast<const char *>(row + L::element(kFirstSlot, row_lane));
#pragma unroll
            for (int byte = 0; byte < kPartBytes; byte += kVectorBytes) {
                uint32_t *w = words + kFirstWord + byte / 4;
                if constexpr (kVectorBytes == 16) {
                    const uint4 v = *reinterpret_cast<const uint4 *>(part + byte);
                    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
                } else if constexpr (kVectorBytes == 8) {
                    const uint2 v = *reinterpret_cast<const uint2 *>(part + byte);
                    w[0] = v.x, w[1] = v.y;
                } else {
                    w[0] = *reinterpret_cast<const uint32_t *>(part + byte);
                }
            }
            load<kFirstSlot + kPartBytes / static_cast<int>(sizeof(T))>(row, row_lane);
        }
    }

    // As floats (bf16 widened exactly), each sign flipped where its sign_bit is set: one integer op a value
    // (w * 2^16 + bit is (w << 16) ^ bit for bit = 0 or 2^31, as one IMAD).
    __device__ __forceinline__ void widen(const uint32_t (&sign_bit)[L::kSlots], float (&y)[L::kSlots]) const
    {
#pragma unroll
        for (int i = 0; i < kWords; ++i) {
            if constexpr (std::is_same<T, float>::value) {
                y[i] = __uint_as_float(words[i] ^ sign_bit[i]);
            } else {
                y[2 * i] = __uint_as_float(words[i] * 0x10000u + sign_bit[2 * i]);
                y[2 * i + 1] = __uint_as_float((words[i] & 0xffff0000u) ^ sign_bit[2 * i + 1]);
            }
        }
    }
};

// max |y| of this lane's slots of a row, each part's multiplier (the transform's last step) applied: NaN or inf where a
// slot holds either. Rounding is monotonic, so the largest normalized element is the largest one before
// normalization, normalized: one multiply a part, not an element.
template <int kDim>
__device__ __forceinline__ float row_amax(const RowTransform<kDim> &transform,
                                          const float (&y)[RowLayout<kDim>::kSlots])
{
    using L = RowLayout<kDim>;
    float amax = 0.0f, part_amax = 0.0f;
#pragma unroll
    for (int j = 0; j < L::kSlots; ++j) {
        part_amax = ptx::max_nan_f32(part_amax, fabsf(y[j]));
        if (j + 1 == L::kSlots || L::part_first_slot(j + 1) != L::part_first_slot(j)) {
            amax = ptx::max_nan_f32(amax, __fmul_rn(part_amax, transform.part_norm(j)));
            part_amax = 0.0f;
        }
    }
    return amax;
}

// The smallest e with amax <= code_max 2^e, clamped to [-127, 127]; 0 where amax is inf or NaN; kZeroBlock where it
// is 0. code_max = code_max_fraction 2^code_max_exponent, the fraction in [0.5, 1) (448 = 0.875 2^9).
__device__ __forceinline__ int block_exponent(float amax, float code_max_fraction, int code_max_exponent)
{
    if (!isfinite(amax))
        return 0;
    if (amax == 0.0f)
        return kZeroBlock;
    // amax = f 2^k, code_max = g 2^c, f and g in [0.5, 1): amax <= code_max 2^e  <=>  e >= k - c + (f > g)
    int k;
    const float f = frexpf(amax, &k);
    return min(max(k - code_max_exponent + (f > code_max_fraction), kMinExponent), kMaxExponent);
}

}  // namespace quantize_rows
}  // namespace fp
