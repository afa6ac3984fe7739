// The varlen plan kernel: checks a varlen or paged call's device arrays and lists its (sequence, query tile, kv head)
// work items in the workspace (cuda/fwd/varlen.cuh) for the forward kernel launched after it.
//
// The order is the equal-length kernels' (work_order.cuh) over (sequence, kv head) pairs: pairs cut into L2 sections
// in order, each section's K and V within 30% of L2 and its items at least three rounds of the grid; within a
// section the items sorted by the KV tiles they visit, costliest first in the last section and every second one
// before it, cheapest first in the others. Without sections every round read the K and V of all sequences again
// from DRAM. The sections' size is the least that meets those bounds unless the forward kernel's snaking rounds over
// that order would leave a CTA's items more than 2% above the mean cost (an item's cost: its KV tiles and its own
// work, rounds_load): then sizes up to twice it are tried in turn while each saves more than a pass costs, until one
// leaves at most 1% or the excess left is worth less than further passes. (Modelled on the host, 132 CTAs: with 16
// kv heads of one query head each, 16 x 4k and 4 x 4k tokens left 7% and 16% above the mean at the least size, 0.1%
// and 2.1% so; the 64k mixed batch in bf16 8%, 1.6%.)
//
// Query tiles that see no key (a sequence without keys, or causal rows above the diagonal of one with more queries than
// keys) are not listed: the plan writes their out 0 and lse -inf itself, so that the forward kernel's consumers have
// one path (a branch around their main loop took its wgmma descriptors out of the uniform registers).
//
// One CTA: the list has a few entries per sequence and kv head, and a CTA's shared memory holds the counting sort's
// buckets, one per (section, KV tile count). Its walks go per (sequence, run of kv heads in one section, query tile),
// not per item. On invalid arrays it lists nothing and writes NaN to every element of out and lse, so that a caller
// who does not read the workspace back still sees the failure.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "fwd/varlen.cuh"
#include "ptx.cuh"
#include "varlen_plan.cuh"

namespace fp {
namespace {

constexpr int kPlanThreads = 512;  // 128 registers a thread: the walks over the pairs hold int64 sums

// What the plan keeps of a sequence between its passes, in the workspace after the list (one per sequence).
struct alignas(16) SeqRecord {
    int32_t q_start, k_start, seqlen_q, seqlen_k;  // seqlen_q -1: the sequence is at fault
    int64_t bytes_before;                          // the K and V bytes of the (sequence, kv head) pairs before it
};

struct PlanArgs {
    const int32_t *cu_seqlens_q, *cu_seqlens_k, *seqused_k, *block_table;
    int32_t batch, total_q, total_k, max_seqlen_q, max_seqlen_k;
    int32_t block_table_stride, page_size, num_pages;
    int32_t causal, levels;
    int32_t heads_kv, group;  // heads_q / heads_kv
    int64_t kv_row_bytes;      // one key's K and V bytes of one kv head
    int64_t l2_bytes;
    int32_t grid;
    VarlenHeader *header;
    VarlenTile *tiles;
    SeqRecord *records;
    __nv_bfloat16 *out;
    int64_t out_stride_seq, out_stride_head;
    float *lse;
    int32_t heads_q, dim_v;
};

// A sequence's lengths, or the first fault found in its offsets and lengths (error != FP_VARLEN_OK, value the offending
// number); its pages are checked apart (page_fault).
struct SeqCheck {
    int32_t error, value, q_start, k_start, seqlen_q, seqlen_k;
};


__device__ SeqCheck check_sequence(const PlanArgs &a, int b)
{
    const int32_t q0 = a.cu_seqlens_q[b], q1 = a.cu_seqlens_q[b + 1];
    if (q0 < 0 || q1 < q0 || q1 > a.total_q)
        return {FP_VARLEN_CU_SEQLENS_Q, q0 < 0 || q1 < q0 ? q0 : q1};
    if (q1 - q0 > a.max_seqlen_q)
        return {FP_VARLEN_SEQLEN_Q, q1 - q0};
    int32_t k0 = 0, rows = a.block_table_stride * a.page_size;  // the keys the sequence may hold
    if (a.cu_seqlens_k != nullptr) {
        const int32_t k1 = a.cu_seqlens_k[b + 1];
        k0 = a.cu_seqlens_k[b];
        if (k0 < 0 || k1 < k0 || k1 > a.total_k)
            return {FP_VARLEN_CU_SEQLENS_K, k0 < 0 || k1 < k0 ? k0 : k1};
        rows = k1 - k0;
    }
    const int32_t seqlen_k = a.seqused_k != nullptr ? a.seqused_k[b] : rows;
    if (a.seqused_k != nullptr && (seqlen_k < 0 || seqlen_k > rows))
        return {FP_VARLEN_SEQUSED_K, seqlen_k};
    if (seqlen_k > a.max_seqlen_k)
        return {FP_VARLEN_SEQLEN_K, seqlen_k};
    return {FP_VARLEN_OK, 0, q0, k0, q1 - q0, seqlen_k};
}

// The first page id of sequence b outside [0, num_pages), by one warp (lanes over its pages); entries past the
// sequence's keys are not read.
struct PageFault {
    bool found;
    int32_t page;
};
__device__ PageFault page_fault(const PlanArgs &a, int b, int seqlen_k, int lane)
{
    const int32_t *pages = a.block_table + static_cast<int64_t>(b) * a.block_table_stride;
    const int count = (seqlen_k + a.page_size - 1) / a.page_size;
    for (int j0 = 0; j0 < count; j0 += 32) {
        const int32_t page = j0 + lane < count ? pages[j0 + lane] : 0;
        const uint32_t bad = __ballot_sync(0xffffffffu, page < 0 || page >= a.num_pages);
        if (bad != 0)
            return {true, __shfl_sync(0xffffffffu, page, __ffs(bad) - 1)};
    }
    return {false, 0};
}

// Out 0 and lse -inf for the queries of query tile m of sequence r and the query heads of kv_head, by one lane.
__device__ void write_keyless(const PlanArgs &a, const SeqRecord &r, int m, int kv_head)
{
    const int first = m * kVarlenTileRows, last = min(r.seqlen_q, first + kVarlenTileRows);
    for (int row = first; row < last; ++row)
        for (int h = kv_head * a.group; h < (kv_head + 1) * a.group; ++h) {
            __nv_bfloat16 *o = a.out + static_cast<int64_t>(r.q_start + row) * a.out_stride_seq + h * a.out_stride_head;
            for (int d = 0; d < a.dim_v; d += 8)  // rows 16-byte aligned (validation), dim_v a multiple of 8
                *reinterpret_cast<uint4 *>(o + d) = make_uint4(0, 0, 0, 0);
            if (a.lse != nullptr)
                a.lse[static_cast<int64_t>(h) * a.total_q + r.q_start + row] = -INFINITY;
        }
}

// Every element of out (total_q, heads_q, dim_v) and lse (heads_q, total_q) to NaN.
__device__ void poison_outputs(const PlanArgs &a)
{
    const __nv_bfloat16 nan = __float2bfloat16(NAN);
    const int64_t elements = static_cast<int64_t>(a.total_q) * a.heads_q * a.dim_v;
    for (int64_t i = threadIdx.x; i < elements; i += kPlanThreads) {
        const int64_t row = i / a.dim_v, d = i % a.dim_v;
        a.out[row / a.heads_q * a.out_stride_seq + row % a.heads_q * a.out_stride_head + d] = nan;
    }
    if (a.lse != nullptr)
        for (int64_t i = threadIdx.x; i < static_cast<int64_t>(a.total_q) * a.heads_q; i += kPlanThreads)
            a.lse[i] = NAN;
}

// The inclusive prefix sum of `value` over the lanes of a warp (every lane takes part).
template <class T>
__device__ T warp_inclusive_scan(T value, int lane)
{
    for (int d = 1; d < 32; d *= 2) {
        const T other = __shfl_up_sync(0xffffffffu, value, d);
        if (lane >= d)
            value += other;
    }
    return value;
}

// An int64 sum over the CTA: each thread's value, the exclusive prefix of thread order and the total.
struct BlockScan {
    int64_t before, total;
};
__device__ BlockScan block_scan(int64_t value, int64_t *warp_sums)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t inclusive = warp_inclusive_scan(value, lane);
    if (lane == 31)
        warp_sums[warp] = inclusive;
    __syncthreads();
    int64_t before_warp = 0, total = 0;
    for (int w = 0; w < kPlanThreads / 32; ++w) {
        before_warp += w < warp ? warp_sums[w] : 0;
        total += warp_sums[w];
    }
    __syncthreads();  // warp_sums reusable
    return {before_warp + inclusive - value, total};
}

// The sections and buckets of the call (see the top of the file).
struct Sections {
    int64_t budget_bytes;  // a pair belongs to section (K and V bytes of the pairs before it) / budget_bytes
    int count, levels;     // count: sections there may be (buckets count * levels)
    int last;              // the last section that lists an item: costliest first, and every second one before it
    // The bucket of an item of `section` visiting `tiles` KV tiles.
    __device__ int bucket(int section, int tiles) const { return section * levels + tiles; }
    // The bucket whose items come at place i of the buckets' order: sections in order, each's tile counts in its
    // direction. (The direction from the last section that lists items: from the count of sections the bytes allow,
    // one more than there were where the bytes fill whole sections, the last section ran cheapest first and the
    // snaking rounds ended 3-6% unbalanced on single long prompts.)
    __device__ int bucket_at(int i) const
    {
        const int section = i / levels, within = i % levels;
        const bool costliest_first = (last - section) % 2 == 0;
        return bucket(section, costliest_first ? levels - 1 - within : within);
    }
};

// The kv heads of sequence record r in runs of one section: f(section, first head, end head). A pair's K and V lie in
// one section, so a sequence spans a few runs and the plan's walks are per (run, query tile), not per item.
template <class F>
__device__ void for_each_run_of(const PlanArgs &a, const SeqRecord &r, int64_t budget_bytes, F &&f)
{
    const int64_t pair_bytes = r.seqlen_k * a.kv_row_bytes;
    if (pair_bytes == 0) {
        f(static_cast<int>(r.bytes_before / budget_bytes), 0, a.heads_kv);
        return;
    }
    for (int h = 0; h < a.heads_kv;) {
        const int64_t first_byte = r.bytes_before + h * pair_bytes;
        const int64_t section = first_byte / budget_bytes;
        // the heads whose first byte lies before the next section's
        const int64_t end = h + 1 + ((section + 1) * budget_bytes - 1 - first_byte) / pair_bytes;
        const int h_end = static_cast<int>(min(end, int64_t{a.heads_kv}));
        f(static_cast<int>(section), h, h_end);
        h = h_end;
    }
}

// Section budgets tried (see the plan kernel): 1, 1.125, 1.25, 1.375, 1.5, 1.75 and 2 times the least (the smaller
// the sections, the more of their K and V stays in L2); and the grids whose CTAs' loads the plan models (one
// unsigned of shared memory each).
constexpr int kBudgets = 7;
__device__ int64_t budget_of(int64_t least, int candidate)
{
    return least * (candidate < 5 ? 8 + candidate : 4 + 2 * candidate) / 8;
}
constexpr int kPlanMaxGrid = 1024;
// A pass of the search (sort and rounds' loads, a few microseconds) in half KV tiles of one CTA's work.
constexpr unsigned long long kPassHalfTiles = 8;

struct RoundsLoad {
    unsigned long long most, sum;
};

// Each CTA's cost in the forward kernel's snaking rounds (scheduler.cuh's work_index) over the buckets' order, in
// half KV tiles: an item's tiles, and about a tile and a half of its own work (entry, Q, the last P.V, the output).
// A bucket's items cost the same and lie in a range of the list: whole rounds add to every CTA, its first and last
// rounds' parts to a range of CTAs (differences over the CTAs, summed once). A CTA's cost fits 32 bits (a million
// query items of 8192 KV tiles, over 132 CTAs, is 2^27), which the differences wrap around; shared memory's 64-bit
// atomics are compare-and-swap loops.
__device__ RoundsLoad rounds_load(const PlanArgs &a, const Sections &sections, const int *counts, const int *start,
                                  unsigned *difference)
{
    constexpr int kWarps = kPlanThreads / 32;
    __shared__ unsigned every;
    __shared__ unsigned long long warp_sums[kWarps], warp_most[kWarps];
    __shared__ int64_t scan_sums[kWarps];
    const int grid = a.grid, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int c = threadIdx.x; c <= grid; c += kPlanThreads)
        difference[c] = 0;
    if (threadIdx.x == 0)
        every = 0;
    __syncthreads();
    // cost to the CTAs of positions [first, end) of round `round`, in a round's order
    auto add_positions = [&](int64_t round, int first, int end, unsigned cost) {
        const bool reversed = round % 2 != 0;
        atomicAdd(&difference[reversed ? grid - end : first], cost);
        atomicAdd(&difference[reversed ? grid - first : end], 0u - cost);
    };
    unsigned long long own_sum = 0;
    for (int bucket = threadIdx.x; bucket < sections.count * sections.levels; bucket += kPlanThreads) {
        if (counts[bucket] == 0)
            continue;
        const unsigned cost = 2 * (bucket % sections.levels) + 3;
        const int64_t first = int64_t{start[bucket]} * a.group, end = first + int64_t{counts[bucket]} * a.group;
        own_sum += static_cast<unsigned long long>(cost) * (end - first);
        const int64_t round_first = first / grid, round_last = (end - 1) / grid;
        if (round_first == round_last) {
            add_positions(round_first, static_cast<int>(first - round_first * grid),
                          static_cast<int>(end - round_first * grid), cost);
            continue;
        }
        add_positions(round_first, static_cast<int>(first - round_first * grid), grid, cost);
        add_positions(round_last, 0, static_cast<int>(end - round_last * grid), cost);
        if (round_last - round_first > 1)
            atomicAdd(&every, cost * static_cast<unsigned>(round_last - round_first - 1));
    }
    for (int d = 16; d > 0; d /= 2)
        own_sum += __shfl_xor_sync(0xffffffffu, own_sum, d);
    if (lane == 0)
        warp_sums[warp] = own_sum;
    __syncthreads();
    // each thread's CTAs (consecutive), their loads from the differences' prefix sums
    constexpr int kPerThread = (kPlanMaxGrid + kPlanThreads - 1) / kPlanThreads;
    const int c0 = threadIdx.x * kPerThread;
    unsigned own = 0;
    for (int c = c0; c < min(c0 + kPerThread, grid); ++c)
        own += difference[c];
    unsigned running = every + static_cast<unsigned>(block_scan(own, scan_sums).before), own_most = 0;
    for (int c = c0; c < min(c0 + kPerThread, grid); ++c) {
        running += difference[c];
        own_most = max(own_most, running);
    }
    for (int d = 16; d > 0; d /= 2)
        own_most = max(own_most, __shfl_xor_sync(0xffffffffu, own_most, d));
    if (lane == 0)
        warp_most[warp] = own_most;
    __syncthreads();
    RoundsLoad load{0, 0};
    for (int w = 0; w < kWarps; ++w) {
        load.most = max(load.most, warp_most[w]);
        load.sum += warp_sums[w];
    }
    __syncthreads();  // warp_most and warp_sums reusable
    return load;
}

template <int kBlockN>
__global__ void __launch_bounds__(kPlanThreads) varlen_plan_kernel(const PlanArgs a)
{
    extern __shared__ int buckets[];  // per bucket: its items, then the place of the next one; kVarlenMaxBuckets
    __shared__ int start[kVarlenMaxBuckets];  // where each bucket's items begin
    __shared__ int64_t warp_sums[kPlanThreads / 32];
    static_assert(FP_VARLEN_ERRORS <= 8, "a fault is b * 8 + error");
    __shared__ int first_fault;  // the least b * 8 + error over faulty sequences
    __shared__ Sections sections;
    __shared__ int64_t least_budget;
    __shared__ int listed;
    __shared__ unsigned grid_difference[kPlanMaxGrid + 1];
    ptx::griddepcontrol_launch_dependents();  // the forward kernel sets up meanwhile, then waits for this grid
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = kPlanThreads / 32;
    if (threadIdx.x == 0)
        first_fault = INT_MAX;
    __syncthreads();

    // Each sequence's offsets and lengths checked, its record written with the K and V bytes before it (a thread a
    // sequence, kPlanThreads sequences a step); the items counted.
    int64_t bytes_total = 0, items_total = 0;
    for (int base = 0; base < a.batch; base += kPlanThreads) {
        const int b = base + threadIdx.x;
        SeqCheck c{FP_VARLEN_OK};
        if (b < a.batch) {
            c = check_sequence(a, b);
            if (c.error != FP_VARLEN_OK)
                atomicMin(&first_fault, b * 8 + c.error);
        }
        const bool counted = b < a.batch && c.error == FP_VARLEN_OK;
        const BlockScan bytes = block_scan(counted ? c.seqlen_k * a.kv_row_bytes * a.heads_kv : 0, warp_sums);
        const BlockScan items = block_scan(
            counted ? (c.seqlen_q + kVarlenTileRows - 1) / kVarlenTileRows * int64_t{a.heads_kv} : 0, warp_sums);
        if (b < a.batch)
            a.records[b] = {c.q_start, c.k_start, counted ? c.seqlen_q : -1, c.seqlen_k, bytes_total + bytes.before};
        bytes_total += bytes.total;
        items_total += items.total;
    }
    __syncthreads();  // the records
    if (a.block_table != nullptr)
        for (int b = warp; b < a.batch; b += warps) {
            const SeqRecord r = a.records[b];
            if (r.seqlen_q >= 0 && page_fault(a, b, r.seqlen_k, lane).found && lane == 0)
                atomicMin(&first_fault, b * 8 + FP_VARLEN_BLOCK_TABLE);
        }
    __syncthreads();
    if (first_fault != INT_MAX) {
        if (threadIdx.x < 32) {
            const int b = first_fault / 8, error = first_fault % 8;
            const int32_t value = error == FP_VARLEN_BLOCK_TABLE ? page_fault(a, b, a.records[b].seqlen_k, lane).page
                                                       : check_sequence(a, b).value;
            if (lane == 0)
                *a.header = {error, b, value, 0};
        }
        poison_outputs(a);
        return;
    }
    if (threadIdx.x == 0) {
        // 30% of L2 a section, at least three rounds of items (items counted per query head), and no more sections
        // than the buckets hold
        constexpr int kMinRounds = 3;
        const int64_t query_items = items_total * a.group;
        int64_t budget = a.l2_bytes * 3 / 10;
        if (query_items > 0)
            budget = max(budget, bytes_total * kMinRounds * a.grid / query_items + 1);
        least_budget = max(budget, bytes_total / (kVarlenMaxBuckets / a.levels) + 1);
    }
    __syncthreads();

    auto tiles_of = [&](const SeqRecord &r, int m) {
        return kv_range_of<kVarlenTileRows, kBlockN>(m, r.seqlen_q, r.seqlen_k, a.causal);
    };
    // The buckets' counts and starts for sections of `budget` bytes (its direction from the items listed): a warp a
    // sequence, its lanes over query tiles, each run of heads counted at once.
    auto sort_with = [&](int64_t budget) {
        if (threadIdx.x == 0)
            sections = {budget, static_cast<int>(bytes_total / budget) + 1, a.levels, 0};
        __syncthreads();
        const int used = sections.count * sections.levels;
        for (int i = threadIdx.x; i < used; i += kPlanThreads)
            buckets[i] = 0;
        __syncthreads();
        for (int b = warp; b < a.batch; b += warps) {
            const SeqRecord r = a.records[b];
            const int m_blocks = (r.seqlen_q + kVarlenTileRows - 1) / kVarlenTileRows;
            for_each_run_of(a, r, budget, [&](int section, int h_first, int h_end) {
                for (int m = lane; m < m_blocks; m += 32) {
                    const int tiles = tiles_of(r, m).end;
                    if (tiles > 0)
                        atomicAdd(&buckets[sections.bucket(section, tiles)], h_end - h_first);
                }
                // every sequence with queries and keys lists its last query tile
                if (lane == 0 && m_blocks > 0 && r.seqlen_k > 0 && h_end == a.heads_kv)
                    atomicMax(&sections.last, section);
            });
        }
        __syncthreads();
        // start[bucket] = the items of the buckets before it in their order: each thread a run of consecutive places
        const int per_thread = (used + kPlanThreads - 1) / kPlanThreads, i0 = threadIdx.x * per_thread;
        int own = 0;
        for (int i = i0; i < min(i0 + per_thread, used); ++i)
            own += buckets[sections.bucket_at(i)];
        const BlockScan places = block_scan(own, warp_sums);
        int next = static_cast<int>(places.before);
        for (int i = i0; i < min(i0 + per_thread, used); ++i) {
            const int bucket = sections.bucket_at(i);
            start[bucket] = next;
            next += buckets[bucket];
        }
        if (threadIdx.x == 0)
            listed = static_cast<int>(places.total);
        __syncthreads();
    };

    // The least budget first (K and V within L2); where the snaking rounds over its order leave a CTA's items more
    // than 2% above the mean cost, larger sections (budget_of) until one leaves at most 1%, keeping the order of the
    // smallest largest total. A pass costs about kPassHalfTiles of a CTA's work: the next is tried only while the
    // best order's largest CTA is more than twice the passes made above the mean, and a larger size is kept only
    // where it saves more than a pass (its larger sections keep less K and V in L2, which the loads do not see);
    // the first that does not ends the search.
    int chosen = 0, sorted = 0;
    unsigned long long best = ULLONG_MAX;
    for (int c = 0; c < kBudgets; ++c) {
        sort_with(budget_of(least_budget, c));
        sorted = c;
        if (a.grid > kPlanMaxGrid)
            break;
        const RoundsLoad load = rounds_load(a, sections, buckets, start, grid_difference);
        const bool better = c == 0 || load.most + kPassHalfTiles < best;
        if (better) {
            best = load.most;
            chosen = c;
        }
        const unsigned long long grid = a.grid, passes = c + 1;
        if (!better || load.most * grid * 100 <= load.sum * (c == 0 ? 102 : 101) ||
            best * grid <= load.sum + 2 * kPassHalfTiles * passes * grid)
            break;
    }
    if (chosen != sorted)
        sort_with(budget_of(least_budget, chosen));
    for (int i = threadIdx.x; i < sections.count * sections.levels; i += kPlanThreads)
        buckets[i] = 0;  // from here the place of each bucket's next item
    if (threadIdx.x == 0)
        *a.header = {FP_VARLEN_OK, 0, 0, listed};
    __syncthreads();

    for (int b = warp; b < a.batch; b += warps) {
        const SeqRecord r = a.records[b];
        const int m_blocks = (r.seqlen_q + kVarlenTileRows - 1) / kVarlenTileRows;
        for_each_run_of(a, r, sections.budget_bytes, [&](int section, int h_first, int h_end) {
            for (int m = lane; m < m_blocks; m += 32) {
                const KvRange range = tiles_of(r, m);
                if (range.end == 0) {
                    for (int h = h_first; h < h_end; ++h)
                        write_keyless(a, r, m, h);
                    continue;
                }
                const int bucket = sections.bucket(section, range.end);
                VarlenTile *place = a.tiles + start[bucket] + atomicAdd(&buckets[bucket], h_end - h_first);
                for (int h = h_first; h < h_end; ++h)
                    *place++ = {r.q_start, r.k_start, r.seqlen_q, r.seqlen_k, b, m, h,
                                range.end | range.mask_from << 16};
            }
        });
    }
}

}  // namespace

flashprefill_status varlen_plan(const flashprefill_params *p, int kv_tile_keys, int grid, int l2_bytes,
                                cudaStream_t stream)
{
    PlanArgs a{};
    a.cu_seqlens_q = p->cu_seqlens_q;
    a.cu_seqlens_k = p->cu_seqlens_k;
    a.seqused_k = p->seqused_k;
    a.block_table = p->block_table;
    a.batch = p->batch;
    a.total_q = p->total_q;
    a.total_k = p->total_k;
    a.max_seqlen_q = p->seqlen_q;
    a.max_seqlen_k = p->seqlen_k;
    a.block_table_stride = p->block_table_stride;
    a.page_size = p->page_size;
    a.num_pages = p->num_pages;
    a.causal = p->causal;
    a.levels = varlen_levels(p->seqlen_k, kv_tile_keys);
    a.heads_kv = p->heads_kv;
    a.group = p->heads_q / p->heads_kv;
    a.kv_row_bytes = static_cast<int64_t>(p->dim_qk + p->dim_v) * fp_dtype_bytes(p->in_dtype);
    a.l2_bytes = l2_bytes;
    a.grid = grid;
    a.header = static_cast<VarlenHeader *>(p->workspace);
    a.tiles = reinterpret_cast<VarlenTile *>(static_cast<uint8_t *>(p->workspace) + sizeof(VarlenHeader));
    a.records = reinterpret_cast<SeqRecord *>(a.tiles + fp_varlen_tiles_max(p) * p->heads_kv);
    a.out = static_cast<__nv_bfloat16 *>(p->out);
    a.out_stride_seq = p->out_stride_seq;
    a.out_stride_head = p->out_stride_head;
    a.lse = p->lse;
    a.heads_q = p->heads_q;
    a.dim_v = p->dim_v;
    const auto kernel = kv_tile_keys == 128 ? varlen_plan_kernel<128> : varlen_plan_kernel<192>;
    constexpr int kBucketBytes = kVarlenMaxBuckets * sizeof(int);
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBucketBytes);
    if (err == cudaSuccess) {
        kernel<<<1, kPlanThreads, kBucketBytes, stream>>>(a);
        err = cudaGetLastError();
    }
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "varlen plan launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}

}  // namespace fp
