// Tile configuration of the Hopper forward kernel.
// Every tuning constant lives here, with its reason.
#pragma once

#include <cstdint>

#include "flashprefill.h"

#include "fwd/vt_layout.cuh"

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

// The most dynamic shared memory one block may have on sm_90 (227 KiB); the launcher adds 1024 bytes of
// alignment slack.
constexpr int kMaxSharedBytes = 232448;

// An e4m3 code's magnitude (sign bit clear), at compile time.
constexpr double e4m3_magnitude(uint32_t code)
{
    const uint32_t exponent = (code >> 3) & 15, mantissa = code & 7;
    double scale = 1.0 / 512;  // 2^-9: subnormals are mantissa x 2^-9, normals (8 + mantissa) x 2^(exponent - 10)
    for (uint32_t e = 1; e < exponent; ++e)
        scale *= 2;
    return exponent == 0 ? mantissa * scale : (8 + mantissa) * scale;
}
static_assert(e4m3_magnitude(0x38) == 1.0 && e4m3_magnitude(0x7E) == 448.0 && e4m3_magnitude(0x01) == 1.0 / 512);

// The largest e4m3 code magnitude of q for which no partial sum of S = Q K^T can pass float16's largest finite
// value (65504), whatever k's codes (up to 448): magnitude x 448 x dim_qk <= 65504.
constexpr uint32_t f16_scores_q_code_max(int dim_qk)
{
    uint32_t code = 0;
    while (code + 1 <= 0x7E && e4m3_magnitude(code + 1) * 448.0 * dim_qk <= 65504.0)
        ++code;
    return code;
}
static_assert(e4m3_magnitude(f16_scores_q_code_max(128)) == 1.125 && e4m3_magnitude(f16_scores_q_code_max(192)) == 0.75,
              "flashprefill.h states these bounds");

template <flashprefill_dtype kDtype, int kDimQk, int kDimV,
          flashprefill_probabilities kProbabilities = FLASHPREFILL_PROBABILITIES_DEFAULT, int kKvTileKeys = 128,
          flashprefill_scores kScores = FLASHPREFILL_SCORES_FP32, bool kVPreparedLayout = false>
struct FwdConfig {
    using Input = InputType<kDtype>;
    static constexpr bool kIsFp8 = kDtype == FLASHPREFILL_DTYPE_FP8_E4M3;
    // P.V's operands. bf16: P as bf16, V as loaded. fp8: P as e4m3 codes computed exp-free (expfree.cuh), V
    // transposed (fp8_transpose.cuh); or, with FP16 probabilities, P as float16 and V widened to float16
    // (fp8_widen.cuh), P.V at the 16-bit rate.
    static constexpr bool kPvF16 = kProbabilities == FLASHPREFILL_PROBABILITIES_FP16;
    static constexpr bool kPCodes = kIsFp8 && !kPvF16;
    static constexpr int kPvMmaK = kPCodes ? 32 : 16;  // keys per P.V wgmma
    static_assert(!kPvF16 || kIsFp8, "float16 probabilities are an fp8 option");

    static constexpr int kHeadDimQk = kDimQk;
    static constexpr int kHeadDimV = kDimV;
    // 128 query rows per CTA, 64 per consumer warpgroup (the M of one wgmma). 128 keys per KV tile: the S
    // accumulator (64 fp32 per thread) plus O (64) plus P fit the consumers' 216-232 registers. e4m3 codes also come
    // with 192 keys per tile (FlashAttention-3 takes 224 at hd128, 160 at 192/128): the per-tile costs (the row
    // max's reduction, the turn, the barrier waits, O's rescale) spread over 1.5x the keys, at the price of S in 96
    // registers, P packed from S after P.V's wait (no second P buffer), the transposer moved into the producer
    // warpgroup so that the consumers get 232 registers, Q read from shared memory at dim_qk 192 with float32
    // scores (kQInRegisters), and two stages of K and V (three of V^T).
    static constexpr int kBlockM = 128;
    static constexpr int kBlockN = kKvTileKeys;
    static constexpr int kConsumerWarpgroups = 2;
    static constexpr int kRowsPerWarpgroup = kBlockM / kConsumerWarpgroups;
    static_assert(kBlockN == 128 || (kBlockN == 192 && kPCodes),
                  "192-key tiles exist for e4m3 codes only");
    // fp8 V is transposed (or widened) for P.V as it lands, so that it keeps pace with P.V: at 128 keys by a
    // warpgroup of its own (all four warps); at 192 by warps 1-3 of the producer warpgroup, whose warp 0 issues
    // the TMA loads (two lanes).
    static constexpr bool kTransposerInProducer = kBlockN == 192;
    // FLASHPREFILL_V_LAYOUT_PREPARED (e4m3 codes): v arrives as V^T in P's key order, which TMA loads straight into
    // V^T's slots (VtLayout): no V slots, no converting threads, so no converter warpgroup at 128 keys either.
    static constexpr bool kVPrepared = kVPreparedLayout;
    static_assert(!kVPrepared || kPCodes, "a prepared v holds e4m3 codes for e4m3 probabilities");
    static constexpr int kProducerWarpgroups = kIsFp8 && !kTransposerInProducer && !kVPrepared ? 2 : 1;
    static constexpr int kConverterThread0 = kTransposerInProducer ? 32 : 128;  // the first converting thread
    static constexpr int kConverterThreads = kTransposerInProducer ? 96 : 128;
    // e4m3 codes at 128 keys are computed into a second P buffer while P.V reads the first; elsewhere the
    // softmax leaves its values in S and P is packed from them once P.V is done with its registers.
    static constexpr bool kPDoubleBuffered = kPCodes && kBlockN == 128;
    // bf16 at dim_qk 128: each tile's exponentials are taken against the row's running max as it stood (a lazy
    // reference), raised only where the tile passes it by more than kLazySlackLog2 (p up to 2^8 is exact enough in
    // bf16 and float32): the row max's reduction leaves the path from S to P, and O is rescaled on the rare tile that
    // raises it. Measured 2-3% faster at dim_qk 128, 0-2% slower at 192 (bench/NOTES.md, twice), so 128 only.
    static constexpr bool kLazyMax = !kIsFp8 && kDimQk == 128;
    static constexpr float kLazySlackLog2 = 8.0f;
    // e4m3 codes: P's row sums by the P.V wgmma itself (m64n136: V^T and 8 rows of ones, VtLayout) at 192 keys; at
    // 128 the consumers' 216 registers hold no 68-register accumulator range (ptxas serializes the wgmma), so a
    // second wgmma (m64n8) per K step multiplies P by the ones.
    static constexpr bool kSumsInPv = kPCodes && kBlockN == 192;
    // FLASHPREFILL_SCORES_FP16: S accumulated in float16 (wgmma .f16: 48 registers at 192 keys), its row max by
    // packed three-input maxima and the codes by fma.relu.f16x2 (fwd_kernel.cuh); each warpgroup's item first brings
    // its 64 rows of q codes within kF16ScoresQCodeMax (then no partial sum of S can overflow), by a power of two
    // where they pass it (rounded to e4m3 again), which the score scale takes back.
    static constexpr bool kF16Scores = kScores == FLASHPREFILL_SCORES_FP16;
    static constexpr uint32_t kF16ScoresQCodeMax = f16_scores_q_code_max(kDimQk);
    static_assert(!kF16Scores || kSumsInPv, "float16 scores exist in the e4m3-code kernels with 192-key tiles");
    static constexpr int kThreads = 128 * (kProducerWarpgroups + kConsumerWarpgroups);
    // bf16: the consumer warpgroups issue their wgmma without taking turns, and one producer lane issues each tile's
    // K and then its V (fp8: two lanes, so that neither waits behind the other's free slot while the converters hold
    // V). Measured together, back to back against FA3 in one process, outputs bit-identical: dim_qk 192 0.984 ->
    // 1.004 at 16k, 1.008 -> 1.025 at 4k x 4, 0.992 -> 1.008 at 32k (no turns alone 0.991 / 1.007 / 0.999); hd128
    // 0.964 -> 0.979 at 16k, 0.960 -> 0.974 at 4k x 4, 0.967 -> 0.987 at 32k (no turns alone 0.968 / 0.973 / 0.972,
    // one lane alone 0.976 / 0.970 / 0.979). fp8 keeps its turns (bench/NOTES.md, session 20).
    static constexpr bool kTurns = kIsFp8;
    static constexpr bool kUniformConsumerIndex = kPCodes;
    static constexpr bool kKvFromOneLane = !kIsFp8;
    static constexpr int kTileQBytes = kBlockM * kDimQk * Input::kBytes;
    static constexpr int kTileKBytes = kBlockN * kDimQk * Input::kBytes;
    static constexpr int kTileVBytes = kBlockN * kDimV * Input::kBytes;
    // fp8: V made ready for P.V by the converting threads: transposed, with rows of ones below (VtLayout), or widened
    // to 2 bytes.
    static constexpr int kTileVtBytes = kPvF16    ? kBlockN * kDimV * 2
                                        : kPCodes ? static_cast<int>(VtLayout<kBlockN>::kBytes)
                                                  : kTileVBytes;
    // Stages of K and V in flight: three where they fit, so a tile is loaded two iterations ahead of its use
    // (hd128 bf16: Q and 3 x 64 KiB fill the 227 KiB; fp8 also waits for each V tile's transpose, whose copy
    // takes another tile per stage, two tiles widened). bf16 with dim_qk 192 needs 288 KiB for three, so it has
    // two (208 KiB), as FlashAttention-3 does for that shape; so has fp8 with float16 P at dim_qk 192 (168 KiB).
    // Beyond the tiles: the barriers and descale slots (under 1 KiB, the storage being 1 KiB aligned) and the
    // launcher's 1 KiB of slack.
    static constexpr int kTileVSlotBytes = kVPrepared ? 0 : kTileVBytes;  // V's own slots (none where prepared)
    static constexpr int kStages = kTileQBytes + 3 * (kTileKBytes + kTileVSlotBytes + (kIsFp8 ? kTileVtBytes : 0)) +
                                               2048 <=
                                           kMaxSharedBytes
                                       ? 3
                                       : 2;
    // V^T's ring (fp8): as deep as K's and V's, or three at 192 keys a tile, where it fits beside two of K and V
    // (hd128 190 KiB, 192/128 222 KiB): with two, the converter spent 5.5% of its stall samples waiting for a
    // free V^T slot and the consumers 4% waiting for V^T.
    static constexpr int kVtStages = kTransposerInProducer ? 3 : kStages;
    // setmaxnreg: producers need few registers; the consumers hold S (64; 96 at 192 keys), O (64), P (bf16 32,
    // fp8 16, twice at 128 keys; 24 at 192), Q (dim_qk / 16 x 4 bf16, dim_qk / 32 x 4 fp8: 32 / 16 at 128, 48 / 24
    // at 192) and addresses. bf16: 128 * 24 + 256 * 240 = 64512 (from 40 / 232: ~1% faster, bit-identical
    // outputs); fp8: 256 * 40 + 256 * 216 = 65536 (the whole register file); fp8 at 192 keys: 128 * 40 + 256 *
    // 232 = 64512 (a producer warpgroup at 32 spilled; at 48 the consumers' .inc hung: see kLaunchRegs).
    // Q is held in registers as the A operand of S = Q K^T (dim_qk * bytes / 8 per thread) where it fits beside S
    // in 112: then S reads only K from shared memory, and Q's slot is free for the next item's as soon as the
    // fragments are loaded. At dim_qk 192 that measured 3% faster in bf16 (S 64 + Q 48) and 2-3% at 16k-32k with
    // float16 scores (48 + 24; the same with v prepared, which has no transposer on shared memory's bandwidth).
    // S 96 + Q 24 (e4m3 codes at 192 keys, float32 scores) made ptxas serialize the wgmma and spill.
    static constexpr int kSRegisters = kF16Scores ? kBlockN / 4 : kBlockN / 2;
    static constexpr bool kQInRegisters = kSRegisters + kDimQk * Input::kBytes / 8 <= 112;
    static_assert(kQInRegisters || !kF16Scores, "float16 scores divide q's codes in its registers (fwd_kernel.cuh)");
    static constexpr int kProducerRegs = kIsFp8 ? 40 : 24;
    static constexpr int kConsumerRegs = kProducerWarpgroups == 2 ? 216 : kIsFp8 ? 232 : 240;

    // Tiles are stored as column chunks, each one swizzle atom wide (TMA box and wgmma descriptor alike): Q
    // and K in 128-byte rows where a row is whole 128-byte pieces, else 64-byte ones (fp8 dim 192: 192 bytes
    // = 3 x 64); V always 128.
    static constexpr int kSwizzleQk = kDimQk * Input::kBytes % 128 == 0 ? 128 : 64;
    static constexpr int kSwizzleV = 128;
    static constexpr int kAtomColsQk = kSwizzleQk / Input::kBytes;  // elements per chunk row
    static constexpr int kAtomColsV = kSwizzleV / Input::kBytes;
    static constexpr int kQkChunks = kDimQk / kAtomColsQk;
    static constexpr int kVChunks = kDimV / kAtomColsV;

    static_assert(kDimQk % kAtomColsQk == 0 && kDimV % kAtomColsV == 0, "dims must fill whole swizzle rows");
    static_assert(kDimQk % Input::kMmaK == 0 && kBlockN % kPvMmaK == 0, "K steps must tile");
    static_assert(kSwizzleQk % (Input::kMmaK * Input::kBytes) == 0, "a wgmma K step stays within a chunk");
    static_assert(kDimV == 128, "the m64n128 wgmma helpers of P.V fix N at 128");
    static_assert(kQInRegisters || kBlockN == 192, "S = Q K^T reads Q from shared memory at 192 keys only");
    // A CTA owns the registers it launched with: under __launch_bounds__(kThreads, 1) ptxas gives each thread the
    // register file's share rounded down to 8 (128 at 512 threads, 168 at 384), and setmaxnreg.inc waits, forever,
    // until the warpgroups' .dec have freed what it asks for. At 384 threads that is 64512, not 65536.
    static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
    static_assert((kProducerRegs * kProducerWarpgroups + kConsumerRegs * kConsumerWarpgroups) * 128 <=
                      kLaunchRegs * kThreads,
                  "setmaxnreg asks for more registers than the CTA launched with: the consumers' .inc would hang");
};

}  // namespace fp
