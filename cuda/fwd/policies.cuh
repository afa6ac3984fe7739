// The scores, softmax and P.V policies of a kernel, one per enum value its configuration picks (config.cuh).
#pragma once

#include "fwd/config.cuh"
#include "fwd/pv.cuh"
#include "fwd/scores.cuh"
#include "fwd/scores_f16.cuh"
#include "fwd/softmax_codes.cuh"
#include "fwd/softmax_exp2.cuh"

namespace fp {

template <class Config, ScoreKind>
struct ScoresOf;
template <class Config>
struct ScoresOf<Config, ScoreKind::kF32> {
    using type = F32Scores<Config>;
};
template <class Config>
struct ScoresOf<Config, ScoreKind::kF16> {
    using type = F16Scores<Config>;
};

template <class Config, SoftmaxKind>
struct SoftmaxOf;
template <class Config>
struct SoftmaxOf<Config, SoftmaxKind::kExp2> {
    using type = Exp2Softmax<Config>;
};
template <class Config>
struct SoftmaxOf<Config, SoftmaxKind::kLazyExp2> {
    using type = LazyExp2Softmax<Config>;
};
template <class Config>
struct SoftmaxOf<Config, SoftmaxKind::kCodes> {
    using type = CodesSoftmax<Config>;
};
template <class Config>
struct SoftmaxOf<Config, SoftmaxKind::kF16Codes> {
    using type = F16CodesSoftmax<Config>;
};

template <class Config, PKind>
struct PvOf;
template <class Config>
struct PvOf<Config, PKind::kBf16> {
    using type = Bf16Pv<Config>;
};
template <class Config>
struct PvOf<Config, PKind::kF16> {
    using type = F16Pv<Config>;
};
template <class Config>
struct PvOf<Config, PKind::kE4m3Codes> {
    using type = CodesPv<Config>;
};

template <class Config>
struct Policies {
    using Scores = typename ScoresOf<Config, Config::kScores>::type;
    using Softmax = typename SoftmaxOf<Config, Config::kSoftmax>::type;
    using Pv = typename PvOf<Config, Config::kP>::type;
};

}  // namespace fp
