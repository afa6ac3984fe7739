// The configuration of a Hopper forward kernel: from the call's options (dtype, dims, probabilities, KV tile, scores,
// v layout) FwdConfig picks what S is, what P is, how V reaches P.V and which softmax turns one into the other
// (enums, each with its reason), then the tile sizes, stages and register budgets. Every tuning constant lives here.
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

// What S = Q K^T accumulates into.
enum class ScoreKind {
    kF32,  // float32 accumulators
    kF16,  // float16 pairs (FLASHPREFILL_SCORES_FP16): half S's registers and a packed row max (scores_f16.cuh)
};
// What P is as P.V's A operand.
enum class PKind {
    kBf16,       // bf16 inputs
    kF16,        // fp8 with FLASHPREFILL_PROBABILITIES_FP16: float16 P, P.V at the 16-bit rate
    kE4m3Codes,  // fp8: e4m3 codes computed exp-free (expfree.cuh), P.V at the fp8 rate
};
// How V reaches P.V's B operand.
enum class VOperand {
    kAsLoaded,    // bf16: V as TMA stores it (MN-major)
    kWidened,     // float16 P: widened to float16 by converting threads (widen_v.cuh; MN-major)
    kTransposed,  // e4m3 codes: V^T by converting threads (transpose_v.cuh; fp8 wgmma takes B K-major only)
    kPrepared,    // e4m3 codes, FLASHPREFILL_V_LAYOUT_PREPARED: v is V^T already, loaded by TMA (prepare_v.cu)
};
// Which softmax turns S into P (softmax_exp2.cuh, softmax_codes.cuh).
enum class SoftmaxKind {
    kExp2,      // p = 2^(t - max) by ex2
    kLazyExp2,  // the same against a lazy reference max, raised only on the tiles that pass it by kLazySlackLog2
    kCodes,     // e4m3 codes from float32 scores
    kF16Codes,  // e4m3 codes from float16 scores
};
// Which threads convert V for P.V.
enum class ConverterPlace {
    kNone,           // bf16, prepared v
    kOwnWarpgroup,   // 128 keys a tile: a warpgroup of its own
    kProducerWarps,  // 192 keys a tile: warps 1-3 of the producer warpgroup (warp 0 issues the loads)
};

template <flashprefill_dtype kDtypeArg, int kDimQk, int kDimV,
          flashprefill_probabilities kProbabilitiesArg = FLASHPREFILL_PROBABILITIES_DEFAULT, int kKvTileKeys = 128,
          flashprefill_scores kScoresArg = FLASHPREFILL_SCORES_FP32, bool kVPreparedLayout = false,
          bool kVarlenArg = false, bool kQBf16Arg = false>
struct FwdConfig {
    // The call's options this kernel serves (its entry in the kernel table: fwd_launch.cu).
    static constexpr flashprefill_dtype kDtype = kDtypeArg;
    static constexpr flashprefill_probabilities kProbabilities = kProbabilitiesArg;
    static constexpr flashprefill_scores kScoresOption = kScoresArg;
    using Input = InputType<kDtype>;
    static constexpr bool kIsFp8 = kDtype == FLASHPREFILL_DTYPE_FP8_E4M3;
    static constexpr int kHeadDimQk = kDimQk;
    static constexpr int kHeadDimV = kDimV;
    static_assert(kIsFp8 || kProbabilities == FLASHPREFILL_PROBABILITIES_DEFAULT, "float16 P is an fp8 option");

    static constexpr PKind kP = !kIsFp8 ? PKind::kBf16
                                : kProbabilities == FLASHPREFILL_PROBABILITIES_FP16 ? PKind::kF16
                                                                                    : PKind::kE4m3Codes;
    static constexpr ScoreKind kScores = kScoresArg == FLASHPREFILL_SCORES_FP16 ? ScoreKind::kF16 : ScoreKind::kF32;
    static constexpr VOperand kV = kP == PKind::kBf16 ? VOperand::kAsLoaded
                                   : kP == PKind::kF16 ? VOperand::kWidened
                                   : kVPreparedLayout  ? VOperand::kPrepared
                                                       : VOperand::kTransposed;
    static_assert(!kVPreparedLayout || kP == PKind::kE4m3Codes, "a prepared v holds e4m3 codes for e4m3 P");
    // Varlen and paged calls: items from the plan kernel's list, q, k, v and out as packed rows (varlen.cuh).
    static constexpr bool kVarlen = kVarlenArg;
    static_assert(!kVarlen || !kVPreparedLayout, "a prepared v is laid out per batch, not as packed rows");
    // q in bf16 against fp8 k and v: the consumers round q to e4m3 codes themselves (q_from_bf16.cuh); varlen
    // kernels with e4m3 P at dim_qk 128.
    static constexpr bool kQBf16 = kQBf16Arg;
    static_assert(!kQBf16 || (kVarlen && kIsFp8 && kDimQk == 128), "bf16 q: varlen fp8 kernels at dim_qk 128");
    // The lazy max takes the row max's reduction off the path from S to P: faster at bf16 dim_qk 128, slower at 192.
    static constexpr SoftmaxKind kSoftmax = kScores == ScoreKind::kF16     ? SoftmaxKind::kF16Codes
                                            : kP == PKind::kE4m3Codes      ? SoftmaxKind::kCodes
                                            : !kIsFp8 && kDimQk == 128     ? SoftmaxKind::kLazyExp2
                                                                           : SoftmaxKind::kExp2;
    static constexpr float kLazySlackLog2 = 8.0f;  // p up to 2^8 is exact enough in bf16 and float32
    // Shorthands of the choices above.
    static constexpr bool kPvF16 = kP == PKind::kF16;
    static constexpr bool kPCodes = kP == PKind::kE4m3Codes;
    static constexpr bool kVPrepared = kV == VOperand::kPrepared;
    static constexpr bool kLazyMax = kSoftmax == SoftmaxKind::kLazyExp2;
    static constexpr bool kF16Scores = kScores == ScoreKind::kF16;
    static constexpr int kPvMmaK = kPCodes ? 32 : 16;  // keys per P.V wgmma

    // 128 query rows per CTA, 64 per consumer warpgroup (the M of one wgmma). 128 keys per KV tile: S (64 fp32 per
    // thread), O (64) and P fit the consumers' registers. e4m3 codes also come with 192 keys a tile: the per-tile
    // costs (the row max's reduction, the turn, the waits, O's rescale) spread over 1.5x the keys, at the price of
    // S in 96 registers, P packed from S after P.V's wait, the converter in the producer warpgroup, Q read from
    // shared memory at dim_qk 192 with float32 scores, and two stages of K and V (three of V^T).
    static constexpr int kBlockM = 128;
    static constexpr int kBlockN = kKvTileKeys;
    static constexpr int kConsumerWarpgroups = 2;
    static constexpr int kRowsPerWarpgroup = kBlockM / kConsumerWarpgroups;
    static_assert(kBlockN == 128 || (kBlockN == 192 && kPCodes), "192-key tiles exist for e4m3 codes only");
    static_assert(kScores == ScoreKind::kF32 || kPCodes, "float16 scores exist in the e4m3-code kernels");
    static constexpr uint32_t kF16ScoresQCodeMax = f16_scores_q_code_max(kDimQk);
    // The largest magnitude of the codes bf16 q is rounded to: its float16 scores' bound, else e4m3's largest.
    static constexpr float kQCodeMax =
        kScores == ScoreKind::kF16 ? static_cast<float>(e4m3_magnitude(kF16ScoresQCodeMax)) : 448.0f;

    // fp8 V is converted for P.V as it lands, so that it keeps pace with P.V.
    static constexpr ConverterPlace kConverter = kV == VOperand::kAsLoaded || kV == VOperand::kPrepared
                                                     ? ConverterPlace::kNone
                                                 : kBlockN == 192 ? ConverterPlace::kProducerWarps
                                                                  : ConverterPlace::kOwnWarpgroup;
    static constexpr int kProducerWarpgroups = kConverter == ConverterPlace::kOwnWarpgroup ? 2 : 1;
    // The converting threads where there are any (the 192-key values also count V's empty barriers of a prepared v).
    static constexpr int kConverterThread0 = kBlockN == 192 ? 32 : 128;  // the first converting thread
    static constexpr int kConverterThreads = kBlockN == 192 ? 96 : 128;
    static constexpr int kThreads = 128 * (kProducerWarpgroups + kConsumerWarpgroups);
    // e4m3 codes from float32 scores at 128 keys are computed into a second P buffer while P.V reads the first;
    // elsewhere (float16 scores encode in place) the softmax leaves its values in S and P is packed from them once
    // P.V is done with its registers.
    static constexpr bool kPDoubleBuffered = kPCodes && kBlockN == 128 && kScores == ScoreKind::kF32;
    // e4m3 codes: P's row sums by the P.V wgmma itself (m64n136: V^T and 8 rows of ones, vt_layout.cuh) at 192 keys;
    // at 128 the consumers' 216 registers hold no 68-register accumulator range (ptxas serializes the wgmma), so a
    // second wgmma (m64n8) per K step multiplies P by the ones.
    static constexpr bool kSumsInPv = kPCodes && kBlockN == 192;
    // fp8: the consumer warpgroups take turns issuing their wgmma, and two producer lanes issue K and V, so that
    // neither waits behind the other's free slot while the converters hold V. bf16 measured faster with neither.
    static constexpr bool kTurns = kIsFp8;
    // Varlen: the whole of warp 0 issues K and V together: every lane waits for each slot, lane 0 writes the descale
    // and expects the bytes; a paged tile's box j comes from lane j, which loaded its page id (kBoxPerLane), else
    // every box from lane 0 (one lane loading and issuing a tile's boxes in turn kept paged fp8 at 0.8-0.9x of
    // contiguous, a box a lane 0.98-0.99x). The float32-score 192-key fp8 kernel keeps lane 0: a page-id load per
    // lane made ptxas spill its consumers.
    static constexpr bool kWarpIssues = kVarlen;
    static constexpr bool kBoxPerLane = kVarlen && !(kIsFp8 && kBlockN == 192 && kScores == ScoreKind::kF32);
    static_assert(!kBoxPerLane || kBlockN / 16 <= 32, "a paged tile's boxes (pages of 16 rows or more) a lane each");
    static constexpr bool kKvTogether = !kIsFp8 || kWarpIssues;  // K and V from the same issuer
    static constexpr uint32_t kIssuingThreads = kWarpIssues ? 32 : 2;  // of warp 0: the issuers

    static constexpr int kTileQBytes = kBlockM * kDimQk * Input::kBytes;
    static constexpr int kTileKBytes = kBlockN * kDimQk * Input::kBytes;
    static constexpr int kTileVBytes = kBlockN * kDimV * Input::kBytes;
    // fp8: V made ready for P.V: transposed, with rows of ones below (vt_layout.cuh), or widened to 2 bytes.
    static constexpr int kTileVtBytes = kPvF16    ? kBlockN * kDimV * 2
                                        : kPCodes ? static_cast<int>(VtLayout<kBlockN>::kBytes)
                                                  : kTileVBytes;
    // Stages of K and V in flight: three where they fit (a tile loaded two iterations ahead of its use), else two
    // (bf16 and float16 P at dim_qk 192, as FlashAttention-3 for that shape). Beyond the tiles: the barriers and
    // descale slots (under 1 KiB, the storage being 1 KiB aligned) and the launcher's 1 KiB of slack.
    static constexpr int kTileVSlotBytes = kVPrepared ? 0 : kTileVBytes;  // V's own slots (none where prepared)
    // bf16 q: the tile as loaded, and the two 64 x 64 bf16 matrices of its rotation (q_from_bf16.cuh); its codes go
    // straight to registers, so Q's own slot goes.
    static constexpr int kTileQBf16Bytes = kQBf16 ? kBlockM * kDimQk * 2 : 0;
    static constexpr int kQRotationBytes = kQBf16 ? 2 * 64 * 64 * 2 : 0;
    static constexpr int kTileQSlotBytes = kQBf16 ? 0 : kTileQBytes;
    static constexpr int kStages = kTileQSlotBytes + kTileQBf16Bytes + kQRotationBytes +
                                               3 * (kTileKBytes + kTileVSlotBytes + (kIsFp8 ? kTileVtBytes : 0)) +
                                               2048 <=
                                           kMaxSharedBytes
                                       ? 3
                                       : 2;
    // V^T's ring (fp8): as deep as K's and V's, or three at 192 keys a tile, where it fits beside two of K and V:
    // with two the converter waited for free V^T slots and the consumers for V^T.
    static constexpr int kVtStages = kBlockN == 192 ? 3 : kStages;
    // Q is held in registers as the A operand of S = Q K^T where it fits beside S in 112: S then reads only K from
    // shared memory, and Q's slot is free for the next item's as soon as the fragments are loaded. S 96 + Q 24 (e4m3
    // codes at 192 keys, float32 scores, dim_qk 192) made ptxas serialize the wgmma and spill. The bf16 varlen kernel
    // at dim_qk 192 (S 64 + Q 48) also holds its sequence's bounds, and its consumers spilled 172 bytes in the loop.
    static constexpr int kSRegisters = kF16Scores ? kBlockN / 4 : kBlockN / 2;
    static constexpr bool kQInRegisters =
        kSRegisters + kDimQk * Input::kBytes / 8 <= 112 && !(kVarlen && !kIsFp8 && kDimQk == 192);
    static_assert(kQInRegisters || !kF16Scores, "float16 scores scale q's codes in its registers (scores_f16.cuh)");
    // e4m3 codes, and Q read from shared memory: the consumer warpgroup's index from lane 0 (__shfl_sync), which ptxas
    // knows to be warp-uniform: the descriptors and barrier ids derived from it live in uniform registers (bf16 and
    // float16 P with Q in registers measured slower; with Q's descriptor per thread, an R2UR before every S wgmma).
    static constexpr bool kUniformConsumerIndex = kPCodes || !kQInRegisters;
    // setmaxnreg: producers need few registers; the consumers hold S (64; 96 at 192 keys), O (64), P (bf16 32, fp8
    // 16, twice at 128 keys; 24 at 192), Q (32 / 16 at dim_qk 128, 48 / 24 at 192, bf16 / fp8) and addresses.
    // bf16 varlen: the issuing lane holds its sequence's rows and a tile's page ids (at 24 it spilled, and paged loads
    // waited on local memory); its consumers measured as fast at 232 as at 240 (Q from shared memory at dim_qk 192).
    static constexpr int kProducerRegs = kIsFp8 || kVarlen ? 40 : 24;
    static constexpr int kConsumerRegs = kProducerWarpgroups == 2 ? 216 : kIsFp8 || kVarlen ? 232 : 240;

    // Tiles are stored as column chunks, each one swizzle atom wide (TMA box and wgmma descriptor alike): Q and K in
    // 128-byte rows where a row is whole 128-byte pieces, else 64-byte ones (fp8 dim 192: 3 x 64); V always 128.
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
    static_assert(kQInRegisters || kBlockN == 192 || !kIsFp8, "fp8 S = Q K^T reads Q from shared memory at 192 keys only");
    // A CTA owns the registers it launched with: under __launch_bounds__(kThreads, 1) ptxas gives each thread the
    // register file's share rounded down to 8 (128 at 512 threads, 168 at 384), and setmaxnreg.inc waits, forever,
    // until the warpgroups' .dec have freed what it asks for. At 384 threads that is 64512, not 65536.
    static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
    static_assert((kProducerRegs * kProducerWarpgroups + kConsumerRegs * kConsumerWarpgroups) * 128 <=
                      kLaunchRegs * kThreads,
                  "setmaxnreg asks for more registers than the CTA launched with: the consumers' .inc would hang");
};

}  // namespace fp
