// Who is who among the consumer warpgroups: a thread's warpgroup, lane and rows, and the turns the two warpgroups
// take issuing wgmma (named barriers).
#pragma once

#include <cstdint>

#include "ptx.cuh"

namespace fp {

// Named barriers (bar.sync ids; 0 is __syncthreads).
enum class NamedBarrier : uint32_t {
    kConsumer0Turn = 1,
    kConsumer1Turn = 2,
    kConsumer0Vote = 3,  // float16 scores: a warpgroup agrees on its q codes' shift (bar.red.or)
    kConsumer1Vote = 4,
    kVTailZeroed = 5,  // varlen: V's rows past a sequence's keys are zeroed before any thread reads the tile
};

// A consumer thread: its warpgroup (0 or 1, 64 query rows each), and its place in it.
template <class Config>
struct ConsumerThread {
    int index;
    uint32_t thread, lane, warp;

    __device__ __forceinline__ ConsumerThread()
    {
        // Taken from lane 0 (__shfl_sync) where Config::kUniformConsumerIndex: ptxas then knows it warp-uniform and
        // keeps the descriptors and barrier ids derived from it in uniform registers.
        const int warpgroup_index = static_cast<int>(threadIdx.x / 128) - Config::kProducerWarpgroups;
        index = Config::kUniformConsumerIndex ? __shfl_sync(0xffffffffu, warpgroup_index, 0) : warpgroup_index;
        thread = threadIdx.x % 128;
        lane = thread % 32;
        warp = thread / 32;
    }
};

// The consumer warpgroups take turns issuing their wgmma (kEnabled), so that one's softmax overlaps the other's
// matrix products: each waits for its turn and hands the other its turn once its wgmma are issued.
template <bool kEnabled, int kConsumerWarpgroups>
struct Turns {
    static constexpr uint32_t kThreads = 128 * kConsumerWarpgroups;
    uint32_t mine, yours;  // this warpgroup's turn barrier, the other's

    __device__ __forceinline__ void take() const
    {
        if constexpr (kEnabled)
            ptx::bar_sync(mine, kThreads);
    }
    __device__ __forceinline__ void pass() const
    {
        if constexpr (kEnabled)
            ptx::bar_arrive(yours, kThreads);
    }
};

}  // namespace fp
