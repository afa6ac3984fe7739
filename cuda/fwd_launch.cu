// The CUDA backend's kernels (src/backend.h table) and their launcher.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend.h"
#include "fwd/kernel.cuh"
#include "launch_common.h"
#include "tensor_map.cuh"
#include "varlen_plan.cuh"

namespace fp {
namespace {

// heads and seqlen: the descaled tensor's own (heads_q and seqlen_q for q). block_tokens 1 where there are no
// exponents: a divisor, never 0.
DescaleArg descale_arg(const flashprefill_descale &d, int heads_kv, int heads, int seqlen)
{
    const fp_descale_layout l = fp_descale_layout_of(&d, heads_kv, heads, seqlen);
    return {l.factors, l.exponents, l.stride_batch, l.stride_head, l.exponents ? l.block_tokens : 1};
}

// How the maps see the rows of a call: dense, each batch's seqlen rows; varlen, the packed rows as one batch; paged k
// and v, pages as batches, loaded in boxes of page_box_rows rows (a divisor of the page and of the KV tile).
struct RowsView {
    int64_t q_rows, q_batches, kv_rows, kv_batches;
    int kv_box_rows;  // 0: the kernel's KV tile
};
// The largest power of two dividing both (page_size: a power of two >= 16, validation): the tile's whole at pages of
// 128 keys or more of the 128-key kernels, a third of it at pages of 64 or more of the 192-key ones.
inline int page_box_rows(int page_size, int kv_tile_keys)
{
    const int tile_power = kv_tile_keys & -kv_tile_keys;
    return page_size < tile_power ? page_size : tile_power;
}
inline int log2_of(int power_of_two)
{
    int shift = 0;
    while ((1 << shift) < power_of_two)
        ++shift;
    return shift;
}
inline RowsView rows_view(const flashprefill_params *p, int kv_tile_keys)
{
    if (!fp_is_varlen(p))
        return {p->seqlen_q, p->batch, p->seqlen_k, p->batch, 0};
    if (p->block_table == nullptr)
        return {p->total_q, 1, p->total_k, 1, 0};
    return {p->total_q, 1, p->page_size, p->num_pages, page_box_rows(p->page_size, kv_tile_keys)};
}

// v's tensor maps: V's tiles as every tensor's, or a prepared v's rows of positions (FwdConfig::kVPrepared), read as
// V^T's parts (VtLayout): positions 0-127 of a tile under the 128-byte swizzle, 128-191 under the 64-byte one.
template <class Config>
flashprefill_status encode_v_maps(FwdArgs &args, const flashprefill_params *p, CUtensorMapDataType type,
                                  const RowsView &view)
{
    constexpr int kBytes = Config::Input::kBytes;
    if constexpr (!Config::kVPrepared) {
        return encode_tensor_map(&args.tm_v, "v", p->v, type, kBytes,
                                 {p->dim_v, view.kv_rows, p->heads_kv, view.kv_batches},
                                 {1, p->v_stride_seq, p->v_stride_head, p->v_stride_batch}, Config::kAtomColsV,
                                 view.kv_box_rows ? view.kv_box_rows : Config::kBlockN, Config::kSwizzleV);
    } else {
        const int64_t positions = (static_cast<int64_t>(p->seqlen_k) + 15) / 16 * 16;
        const int64_t extent[4] = {positions, p->dim_v, p->heads_kv, p->batch};
        const int64_t stride[4] = {1, p->v_stride_dim, p->v_stride_head, p->v_stride_batch};
        flashprefill_status s = encode_tensor_map(&args.tm_v, "v", p->v, type, kBytes, extent, stride, 128,
                                                  Config::kHeadDimV, 128);
        if (s == FLASHPREFILL_SUCCESS && VtLayout<Config::kBlockN>::kTailBytes > 0)
            s = encode_tensor_map(&args.tm_v_tail, "v", p->v, type, kBytes, extent, stride, 64, Config::kHeadDimV, 64);
        return s;
    }
}

template <class Config>
flashprefill_status launch_config(const flashprefill_params *p, void *stream)
{
    static_assert(fits_shared_memory<Config>, "tiles and stages exceed the shared memory of sm_90");
    const CUtensorMapDataType type =
        Config::kIsFp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    constexpr int kBytes = Config::Input::kBytes;

    FwdArgs args{};
    flashprefill_status s;
    const RowsView view = rows_view(p, Config::kBlockN);
    // bf16 q (Config::kQBf16): loaded as bf16 in chunks of 64 columns, rounded to codes by the consumers
    const CUtensorMapDataType q_type = Config::kQBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : type;
    constexpr int kQBytes = Config::kQBf16 ? 2 : kBytes, kQBoxCols = Config::kQBf16 ? 64 : Config::kAtomColsQk;
    if ((s = encode_tensor_map(&args.tm_q, "q", p->q, q_type, kQBytes,
                               {p->dim_qk, view.q_rows, p->heads_q, view.q_batches},
                               {1, p->q_stride_seq, p->q_stride_head, p->q_stride_batch}, kQBoxCols, Config::kBlockM,
                               Config::kQBf16 ? 128 : Config::kSwizzleQk)) ||
        (s = encode_tensor_map(&args.tm_k, "k", p->k, type, kBytes,
                               {p->dim_qk, view.kv_rows, p->heads_kv, view.kv_batches},
                               {1, p->k_stride_seq, p->k_stride_head, p->k_stride_batch}, Config::kAtomColsQk,
                               view.kv_box_rows ? view.kv_box_rows : Config::kBlockN, Config::kSwizzleQk)) ||
        (s = encode_v_maps<Config>(args, p, type, view)))
        return s;
    args.out = static_cast<__nv_bfloat16 *>(p->out);
    args.out_stride_batch = p->out_stride_batch;
    args.out_stride_seq = p->out_stride_seq;
    args.out_stride_head = p->out_stride_head;
    args.lse = p->lse;
    // varlen: the sequences index the descales as batches, seqlen_q and seqlen_k their largest lengths; paged
    // PER_BLOCK k and v: one exponent per (page, kv head), a page being one block (flashprefill.h)
    const bool paged = fp_is_varlen(p) && p->block_table != nullptr;
    const int kv_descale_tokens = paged ? p->page_size : p->seqlen_k;
    args.q_descale = descale_arg(p->q_descale, p->heads_kv, p->heads_q, p->seqlen_q);
    args.k_descale = descale_arg(p->k_descale, p->heads_kv, p->heads_kv, kv_descale_tokens);
    args.v_descale = descale_arg(p->v_descale, p->heads_kv, p->heads_kv, kv_descale_tokens);
    args.seqlen_q = p->seqlen_q;
    args.seqlen_k = p->seqlen_k;
    args.heads_q = p->heads_q;
    args.heads_per_kv = p->heads_q / p->heads_kv;
    args.batch = p->batch;
    args.m_blocks = (p->seqlen_q + Config::kBlockM - 1) / Config::kBlockM;
    // check_items: fits. Varlen: at most this many; the kernel reads the plan's count.
    args.items = Config::kVarlen ? static_cast<int32_t>(fp_varlen_tiles_max(p) * p->heads_q)  // entries x group
                                 : args.m_blocks * p->heads_q * p->batch;
    if constexpr (Config::kVarlen) {
        static_assert(Config::kBlockM == kVarlenTileRows, "the plan lists tiles of the kernel's query rows");
        args.varlen_header = static_cast<const VarlenHeader *>(p->workspace);
        args.varlen_tiles = reinterpret_cast<const VarlenTile *>(static_cast<const uint8_t *>(p->workspace) +
                                                                 sizeof(VarlenHeader));
        args.total_q = p->total_q;
        args.block_table = p->block_table;
        args.block_table_stride = p->block_table_stride;
        args.page_shift = view.kv_box_rows ? log2_of(p->page_size) : 0;
        args.box_shift = view.kv_box_rows ? log2_of(view.kv_box_rows) : 0;
        args.q_rotation_signs = p->q_rotation_signs;
    }

    args.causal = p->causal;
    args.softmax_scale_log2 = p->softmax_scale * static_cast<float>(M_LOG2E);

    const auto kernel = fwd_kernel<Config>;
    const int smem_bytes = static_cast<int>(sizeof(FwdSharedStorage<Config>)) + 1024;  // + alignment slack
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "cudaFuncSetAttribute(%d bytes of shared memory): %s", smem_bytes,
                       cudaGetErrorString(err));
    // Persistent: one CTA per SM (each takes all of an SM's shared memory), none idle.
    int device = 0, sms = 0;
    if ((err = cudaGetDevice(&device)) != cudaSuccess ||
        (err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "the SM count: %s", cudaGetErrorString(err));
    const int grid = args.items < sms ? args.items : sms;  // sms < 65536: check_items' margin
    int l2_bytes = 0;
    if ((err = cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device)) != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "the L2 size: %s", cudaGetErrorString(err));
    args.section_heads = section_heads_for(args.m_blocks, p->heads_q, p->heads_kv, p->batch,
                                           static_cast<int64_t>(p->seqlen_k) * (p->dim_qk + p->dim_v) * kBytes,
                                           l2_bytes, grid);
    if (Config::kVarlen && (s = varlen_plan(p, Config::kBlockN, grid, l2_bytes, static_cast<cudaStream_t>(stream))))
        return s;
    // Varlen: the forward kernel is launched while the plan kernel runs (programmatic dependent launch), its CTAs
    // setting up until the plan is complete (kernel.cuh), so that the plan costs no launch gap.
    cudaLaunchConfig_t launch{};
    launch.gridDim = dim3(grid);
    launch.blockDim = dim3(Config::kThreads);
    launch.dynamicSmemBytes = smem_bytes;
    launch.stream = static_cast<cudaStream_t>(stream);
    cudaLaunchAttribute overlap{};
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    launch.attrs = &overlap;
    launch.numAttrs = Config::kVarlen ? 1 : 0;
    err = cudaLaunchKernelEx(&launch, kernel, args);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "kernel launch: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}

// A kernel, its varlen twin for varlen and paged calls, and an e4m3-code one again for v in
// FLASHPREFILL_V_LAYOUT_PREPARED (VOperand::kPrepared).
template <class Config, bool kQBf16 = false>
using VarlenOf = FwdConfig<Config::kDtype, Config::kHeadDimQk, Config::kHeadDimV, Config::kProbabilities,
                           Config::kBlockN, Config::kScoresOption, false, true, kQBf16>;
template <class Config, bool kWithVarlen, bool kWithBf16Q>
flashprefill_status launch_fwd(const flashprefill_params *p, void *stream)
{
    if constexpr (kWithBf16Q) {
        if (p->q_dtype == FLASHPREFILL_DTYPE_BF16 && p->in_dtype != FLASHPREFILL_DTYPE_BF16)
            return launch_config<VarlenOf<Config, true>>(p, stream);
    }
    if constexpr (kWithVarlen) {
        if (fp_is_varlen(p))
            return launch_config<VarlenOf<Config>>(p, stream);
    }
    if constexpr (Config::kPCodes) {
        using Prepared = FwdConfig<Config::kDtype, Config::kHeadDimQk, Config::kHeadDimV, Config::kProbabilities,
                                   Config::kBlockN, Config::kScoresOption, true>;
        if (p->v_layout == FLASHPREFILL_V_LAYOUT_PREPARED)
            return launch_config<Prepared>(p, stream);
    }
    return launch_config<Config>(p, stream);
}

// The work items (query tiles of 128 rows x heads_q x batch; both kernels' kBlockM) are counted in int32, and
// a CTA's last round (work_index) may look up to one grid (< 2^16 CTAs, one per SM) past them: indices stay
// below 2^31 - 2^16 + 2^16 - 1.
constexpr int64_t kMaxItems = (int64_t{1} << 31) - (1 << 16);
flashprefill_status check_items(const flashprefill_params *p)
{
    const int64_t items = fp_is_varlen(p) ? fp_varlen_tiles_max(p) * p->heads_q
                                          : (static_cast<int64_t>(p->seqlen_q) + 127) / 128 * p->heads_q * p->batch;
    if (items > kMaxItems)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "%lld work items (query tiles of 128 rows x heads_q = %d x batch = %d) exceed this kernel's "
                       "limit of 2^31 - 65536",
                       static_cast<long long>(items), p->heads_q, p->batch);
    if (fp_is_varlen(p) && varlen_levels(p->seqlen_k, 128) > kVarlenMaxLevels)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "varlen calls take seqlen_k (the longest sequence's keys) up to %d, got %d",
                       (kVarlenMaxLevels - 1) * 128, p->seqlen_k);
    return FLASHPREFILL_SUCCESS;
}
static_assert(FwdConfig<FLASHPREFILL_DTYPE_BF16, 128, 128>::kBlockM == 128 &&
                  FwdConfig<FLASHPREFILL_DTYPE_FP8_E4M3, 192, 128>::kBlockM == 128,
              "check_items counts tiles of 128 rows");

constexpr uint32_t kFp8Descales = FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE) |
                                  FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_TENSOR) |
                                  FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_HEAD) |
                                  FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_BLOCK);
// PER_BLOCK: a block may hold several query or KV tiles, never part of one: a multiple of both tiles.
constexpr int lcm(int a, int b)
{
    int x = a, y = b;
    while (y != 0) {
        const int r = x % y;
        x = y;
        y = r;
    }
    return a / x * b;
}
// The v layouts a kernel reads: every e4m3-code kernel also a prepared v.
constexpr uint32_t kVDefault = 1u << FLASHPREFILL_V_LAYOUT_DEFAULT;
constexpr uint32_t kVAny = kVDefault | 1u << FLASHPREFILL_V_LAYOUT_PREPARED;
constexpr uint32_t kDense = FP_FORM_BIT(FP_FORM_DENSE);
constexpr uint32_t kAllForms = kDense | FP_FORM_BIT(FP_FORM_VARLEN) | FP_FORM_BIT(FP_FORM_PAGED);

// A kernel's table entry: every field but its name from its configuration; kWithVarlen: a varlen twin is built;
// kWithBf16Q: one more for bf16 q against fp8 k and v (varlen forms only).
template <class Config, bool kWithVarlen = true, bool kWithBf16Q = false>
constexpr fp_kernel_entry kernel_entry(const char *name)
{
    return {name,
            Config::kDtype,
            FLASHPREFILL_DTYPE_BF16,
            Config::kHeadDimQk,
            Config::kHeadDimV,
            Config::kIsFp8 ? kFp8Descales : FP_DESCALE_BIT(FLASHPREFILL_DESCALE_NONE),
            Config::kIsFp8 ? lcm(Config::kBlockM, Config::kBlockN) : 0,
            Config::kProbabilities,
            Config::kScoresOption,
            Config::kPCodes ? kVAny : kVDefault,
            kWithVarlen ? kAllForms : kDense,
            (1u << Config::kDtype) | (kWithBf16Q ? 1u << FLASHPREFILL_DTYPE_BF16 : 0u),
            check_items,
            launch_fwd<Config, kWithVarlen, kWithBf16Q>};
}
static_assert(lcm(128, 128) == 128 && lcm(128, 192) == 384, "PER_BLOCK blocks of 128 and 384 tokens");

constexpr flashprefill_dtype kBf16 = FLASHPREFILL_DTYPE_BF16;
constexpr flashprefill_dtype kFp8 = FLASHPREFILL_DTYPE_FP8_E4M3;
constexpr flashprefill_probabilities kDefaultP = FLASHPREFILL_PROBABILITIES_DEFAULT;
constexpr flashprefill_probabilities kFp16P = FLASHPREFILL_PROBABILITIES_FP16;
constexpr flashprefill_scores kF16S = FLASHPREFILL_SCORES_FP16;

}  // namespace
}  // namespace fp

// hd128, and DeepSeek-V2's latent-attention prefill shape: dim_qk 192 (128 + 64 rope), dim_v 128; fp8 with e4m3
// or float16 probabilities. fp8 with e4m3 probabilities prefers KV tiles of 192 keys; per-block descales whose
// blocks are not a multiple of 384 tokens (a paged cache's per-page exponents) take the 128-key kernels. Float16
// scores (FLASHPREFILL_SCORES_FP16) have kernels of their own at 192 and 128 keys (q's codes brought within their
// bound per group of 64 query rows); listed before their float32 twins, they are what FLASHPREFILL_SCORES_DEFAULT
// takes where both fit.
extern "C" const fp_kernel_entry fp_backend_kernels[] = {
    fp::kernel_entry<fp::FwdConfig<fp::kBf16, 128, 128>>("hopper_fwd_bf16_hd128"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 128, 128, fp::kDefaultP, 192, fp::kF16S>, true, true>(
        "hopper_fwd_fp8_hd128_kv192_f16s"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 128, 128, fp::kDefaultP, 192>>("hopper_fwd_fp8_hd128_kv192"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 128, 128, fp::kDefaultP, 128, fp::kF16S>, true, true>(
        "hopper_fwd_fp8_hd128_f16s"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 128, 128>, true, true>("hopper_fwd_fp8_hd128"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 128, 128, fp::kFp16P>, false>("hopper_fwd_fp8_hd128_fp16p"),
    fp::kernel_entry<fp::FwdConfig<fp::kBf16, 192, 128>>("hopper_fwd_bf16_qk192_v128"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 192, 128, fp::kDefaultP, 192, fp::kF16S>>(
        "hopper_fwd_fp8_qk192_v128_kv192_f16s"),
    // no varlen twin: with varlen's registers ptxas spilled its consumers (the next kernel takes such calls)
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 192, 128, fp::kDefaultP, 192>, false>("hopper_fwd_fp8_qk192_v128_kv192"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 192, 128, fp::kDefaultP, 128, fp::kF16S>>(
        "hopper_fwd_fp8_qk192_v128_f16s"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 192, 128>>("hopper_fwd_fp8_qk192_v128"),
    fp::kernel_entry<fp::FwdConfig<fp::kFp8, 192, 128, fp::kFp16P>, false>("hopper_fwd_fp8_qk192_v128_fp16p"),
};
extern "C" const int fp_backend_kernel_count = sizeof(fp_backend_kernels) / sizeof(fp_backend_kernels[0]);

// Float16 scores: q's codes within f16_scores_q_code_max (the kernels' kF16ScoresQCodeMax) at the kernel's dim_qk.
extern "C" float fp_backend_q_code_max(const fp_kernel_entry *e)
{
    if (e->scores != FLASHPREFILL_SCORES_FP16)
        return FP_E4M3_MAX;
    return static_cast<float>(fp::e4m3_magnitude(fp::f16_scores_q_code_max(e->dim_qk)));
}
