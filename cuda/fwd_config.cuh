// Tile configuration, shared-memory map and wgmma descriptors of the Hopper forward kernel.
// Every tuning constant lives here, with its reason.
#pragma once

#include <cstdint>

#include "flashprefill.h"

// Ablation builds (`make ablation`, `tools/bench.py --ablation`) each switch one idea off; the library proper
// is built with both at 0.
#ifndef FP_ABLATE_EXPFREE
#define FP_ABLATE_EXPFREE 0  // 1: fp8 probabilities by ex2.approx and cvt.e4m3x2 (MUFU), not exp-free codes
#endif
#ifndef FP_ABLATE_PINGPONG
#define FP_ABLATE_PINGPONG 0  // 1: the consumer warpgroups issue their wgmma without taking turns
#endif

namespace fp {

// Element types of the two input precisions.
template <flashprefill_dtype kDtype>
struct InputType;
template <>
struct InputType<FLASHPREFILL_DTYPE_BF16> {
    static constexpr int kBytes = 2;
    static constexpr int kMmaK = 16;  // wgmma m64nNk16 for bf16
    static constexpr int kPOffsetLog2 = 0;  // P in [0, 1]: bf16 has the exponent range
};
template <>
struct InputType<FLASHPREFILL_DTYPE_FP8_E4M3> {
    static constexpr int kBytes = 1;
    static constexpr int kMmaK = 32;  // wgmma m64nNk32 for e4m3
    // P = 2^(t + 8) in [0, 256]: the row max lands on code 256 (0x78) and small probabilities keep
    // 8 more binades before e4m3's subnormals (2^-9) than P in [0, 1] would.
    static constexpr int kPOffsetLog2 = 8;
};

template <flashprefill_dtype kDtype, int kDim>
struct FwdConfig {
    using Input = InputType<kDtype>;
    static constexpr bool kIsFp8 = kDtype == FLASHPREFILL_DTYPE_FP8_E4M3;

    static constexpr int kHeadDim = kDim;   // dim_qk
    static constexpr int kHeadDimV = kDim;  // dim_v
    // 128 query rows per CTA, 64 per consumer warpgroup (the M of one wgmma); 128 keys per KV tile: the
    // S accumulator (64 fp32 per thread) plus O (64) plus P fit the consumers' 232 registers.
    static constexpr int kBlockM = 128;
    static constexpr int kBlockN = 128;
    static constexpr int kConsumerWarpgroups = 2;
    static constexpr int kRowsPerWarpgroup = kBlockM / kConsumerWarpgroups;
    // Producer warpgroups: one issues the TMA loads (two lanes of its warp 0); fp8 adds one that transposes
    // each V tile (fp8_transpose.cuh), all four of its warps, so the transpose keeps pace with P.V.
    static constexpr int kProducerWarpgroups = kIsFp8 ? 2 : 1;
    static constexpr int kThreads = 128 * (kProducerWarpgroups + kConsumerWarpgroups);
    // Stages of K and V in flight: three, so a tile is loaded two iterations ahead of its use (bf16: Q and
    // 3 x 64 KiB fill the 227 KiB of shared memory; fp8 also waits for each V tile's transpose).
    static constexpr int kStages = 3;
    // setmaxnreg: producers need few registers; the consumers hold S (64), O (64), P (bf16 32, fp8 16),
    // Q (bf16 32, fp8 16) and addresses.
    // bf16: 128 * 40 + 256 * 232 = 64512; fp8: 256 * 40 + 256 * 216 = 65536 (the whole register file).
    static constexpr int kProducerRegs = 40;
    static constexpr int kConsumerRegs = kIsFp8 ? 216 : 232;

    // 128-byte swizzle everywhere: a tile row of 128 bytes is one swizzle atom row.
    static constexpr int kSwizzleBytes = 128;
    static constexpr int kAtomCols = kSwizzleBytes / Input::kBytes;  // elements per 128-byte row
    static constexpr int kDimChunks = kHeadDim / kAtomCols;            // 128-byte column chunks per row

    static constexpr int kTileQBytes = kBlockM * kHeadDim * Input::kBytes;
    static constexpr int kTileKBytes = kBlockN * kHeadDim * Input::kBytes;
    static constexpr int kTileVBytes = kBlockN * kHeadDimV * Input::kBytes;

    static_assert(kHeadDim % kAtomCols == 0, "head dim must fill whole 128-byte swizzle rows");
    static_assert(kHeadDim % Input::kMmaK == 0 && kBlockN % Input::kMmaK == 0, "K steps must tile");
    static_assert(kBlockN == 128 && kHeadDimV == 128, "the m64n128 wgmma helpers fix N at 128");
    static_assert((kProducerRegs * kProducerWarpgroups + kConsumerRegs * kConsumerWarpgroups) * 128 <= 65536,
                  "register file");
};

constexpr int kOnesBytes = 8 * 128;
constexpr uint32_t kE4m3OneX4 = 0x38383838u;  // four e4m3 codes of 1.0

// Shared memory of one CTA; every tile 1024-byte aligned (the 128-byte swizzle repeats every 8 rows).
template <class Config>
struct alignas(1024) FwdSharedStorage {
    alignas(1024) uint8_t q[Config::kTileQBytes];
    alignas(1024) uint8_t k[Config::kStages][Config::kTileKBytes];
    alignas(1024) uint8_t v[Config::kStages][Config::kTileVBytes];
    // fp8: V transposed to (dim, keys) for the K-major B operand of P.V (see fp8_transpose.cuh).
    alignas(1024) uint8_t vt[Config::kIsFp8 ? Config::kStages : 0][Config::kTileVBytes];
    // fp8: 8 rows of 128 e4m3 ones, the B operand that turns P into its row sums (expfree.cuh).
    alignas(1024) uint8_t ones[Config::kIsFp8 ? kOnesBytes : 0];
    // fp8: each stage's K score scale and V block exponent (fwd_kernel.cuh, producer).
    float k_scale_log2[Config::kIsFp8 ? Config::kStages : 0];
    int32_t v_exponent[Config::kIsFp8 ? Config::kStages : 0];
    uint64_t q_full;
    uint64_t k_full[Config::kStages];
    uint64_t v_full[Config::kStages];
    uint64_t vt_full[Config::kStages];
    uint64_t k_empty[Config::kStages];
    uint64_t v_empty[Config::kStages];
};

// The most dynamic shared memory one block may have on sm_90 (227 KiB); the launcher adds 1024 bytes of
// alignment slack.
constexpr int kMaxSharedBytes = 232448;
template <class Config>
constexpr bool fits_shared_memory = sizeof(FwdSharedStorage<Config>) + 1024 <= kMaxSharedBytes;

// Named barriers (bar.sync ids; 0 is __syncthreads). The two consumer warpgroups take turns issuing wgmma.
enum class NamedBarrier : uint32_t {
    kConsumer0Turn = 1,
    kConsumer1Turn = 2,
};

// A wgmma shared-memory matrix descriptor (PTX ISA 9.7.15.5.1) for a 128-byte-swizzled operand.
//   K-major (rows of 128 bytes along K):   lbo unused, sbo = 1024 (next group of 8 rows).
//   MN-major (rows of 128 bytes along MN): lbo = bytes to the next 128-byte column chunk of MN,
//                                          sbo = 1024 (next group of 8 rows along K).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes)
{
    constexpr uint64_t kSbo = 1024;
    constexpr uint64_t kSwizzle128 = 1;
    return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
           ((kSbo >> 4) << 32) | (kSwizzle128 << 62);
}

// Byte offset of (row, byte column) in a 128-byte-swizzled tile of 128-byte rows (TMA SWIZZLE_128B):
// 16-byte chunk c of row r lives at chunk c ^ (r % 8).
__device__ __forceinline__ uint32_t sw128_offset(uint32_t row, uint32_t byte_col)
{
    return row * 128 + ((((byte_col >> 4) ^ row) & 7) << 4) + (byte_col & 15);
}

}  // namespace fp
