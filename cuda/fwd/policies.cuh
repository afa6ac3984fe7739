// Which scores, softmax and P.V policies a kernel's configuration takes.
#pragma once

#include <type_traits>

#include "fwd/pv.cuh"
#include "fwd/scores.cuh"
#include "fwd/scores_f16.cuh"
#include "fwd/softmax_codes.cuh"
#include "fwd/softmax_exp2.cuh"

namespace fp {

template <class Config>
struct Policies {
    using Scores = std::conditional_t<Config::kF16Scores, F16Scores<Config>, F32Scores<Config>>;
    using Softmax = std::conditional_t<
        Config::kF16Scores, F16CodesSoftmax<Config>,
        std::conditional_t<Config::kPCodes, CodesSoftmax<Config>,
                           std::conditional_t<Config::kLazyMax, LazyExp2Softmax<Config>, Exp2Softmax<Config>>>>;
    using Pv = std::conditional_t<Config::kPCodes, CodesPv<Config>,
                                  std::conditional_t<Config::kPvF16, F16Pv<Config>, Bf16Pv<Config>>>;
};

}  // namespace fp
