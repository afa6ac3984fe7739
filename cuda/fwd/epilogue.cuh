// The epilogue of one consumer thread's two rows: O / row sum (times the fp8 V descale and O's unit) as bf16, 16
// bytes a store (o_store.cuh), and the log-sum-exp where asked for.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "fwd/args.cuh"
#include "fwd/o_store.cuh"
#include "fwd/softmax.cuh"
#include "fwd/work_order.cuh"
#include "ptx.cuh"

namespace fp {

// o: this thread's accumulators of O (the first kAccRegs); o_exponent: O's unit, 2^o_exponent.
template <class Config, int kORegs, class Softmax>
__device__ __forceinline__ void store_rows(const FwdArgs &args, int batch, int head, int head_kv, int query_half0,
                                           uint32_t lane, const float (&o)[kORegs], const Softmax &softmax,
                                           int o_exponent)
{
    const float v_descale = ldexpf(descale_factor(args.v_descale, batch, head_kv), o_exponent);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int query = query_half0 + 8 * h;
        const float sum = softmax.row_total(h);
        const bool in_range = query < args.seqlen_q;
        const float inv = v_descale / sum;
        __nv_bfloat16 *row = args.out + batch * args.out_stride_batch +
                             static_cast<int64_t>(in_range ? query : 0) * args.out_stride_seq +
                             head * args.out_stride_head;
        uint32_t packed[kAccRegs / 4];
#pragma unroll
        for (int j = 0; j < kAccRegs / 4; ++j)
            packed[j] = ptx::cvt_rn_bf16x2_f32(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
        store_row_bf16(row, packed, lane, in_range);
        if (in_range && args.lse != nullptr && lane % 4 == 0) {
            const float max_used = softmax.online_max.row_max[h] == -INFINITY ? 0.0f : softmax.online_max.row_max[h];
            args.lse[(static_cast<int64_t>(batch) * args.heads_q + head) * args.seqlen_q + query] =
                log_sum_exp(max_used, Config::Input::kPOffsetLog2, sum);
        }
    }
}

}  // namespace fp
