// One typed helper per PTX instruction the Hopper kernels use (sm_90a). Kernels call these and hold no asm.
// Section names refer to the PTX ISA 8.x/9.x manual.
#pragma once

#include <cstdint>

namespace fp::ptx {

// ---- shared-memory addresses -----------------------------------------------------------------------------

// cvta.to.shared: a generic pointer into shared memory as the 32-bit shared-window address PTX wants.
__device__ __forceinline__ uint32_t smem_addr(const void *ptr)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// ---- the thread ----------------------------------------------------------------------------------------------

// mov %laneid: the thread's lane in its warp.
__device__ __forceinline__ uint32_t lane_index()
{
    uint32_t lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

// ld.global.nc.b32, volatile to the compiler: read where it stands, not hoisted out of a loop (a value read again
// each round costs an L1 hit; held, it costs a register the thread does not have).
__device__ __forceinline__ int32_t ld_global_nc_s32(const int32_t *ptr)
{
    int32_t v;
    asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(v) : "l"(ptr));
    return v;
}

// ld.shared.b32 / st.shared.b32 (9.7.9.8, 9.7.9.10) at a shared-window address: never the generic path.
__device__ __forceinline__ uint32_t ld_shared_b32(uint32_t addr)
{
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

// ld.shared.v4.b32 / st.shared.v4.b32: 16 bytes at a 16-byte aligned shared-window address.
__device__ __forceinline__ void ld_shared_v4(uint32_t addr, uint32_t (&v)[4])
{
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(addr) : "memory");
}
__device__ __forceinline__ void st_shared_v4(uint32_t addr, const uint32_t (&v)[4])
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
}

// st.global.v4.b32: 16 bytes at a 16-byte aligned global address, as one store (STG.E.128; from C++ ptxas may split a
// uint4 store whose registers it did not allocate as an aligned quad).
__device__ __forceinline__ void st_global_v4(void *ptr, const uint32_t (&v)[4])
{
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16 (9.7.9.26): four 8x8 matrices of 16-bit elements; lane t gives
// the address of row t % 8 of matrix t / 8 and receives, of each matrix i in r[i], row t / 4, elements
// 2 (t % 4) and 2 (t % 4) + 1: exactly the A fragment of an m16n8k16 / wgmma k16 step (also of fp8 k32,
// whose 16-byte rows are 8 pairs of bytes).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: as ldmatrix_x4, each matrix transposed: lane t receives, of
// matrix i in r[i], elements 2 (t % 4) and 2 (t % 4) + 1 of column t / 4 (rows 2 (t % 4) in the low half).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16 (9.7.9.27): the inverse of ldmatrix_x4: lane t gives the address of
// row t % 8 of matrix t / 8 and stores r[i] as row t / 4, elements 2 (t % 4) and 2 (t % 4) + 1 of matrix i.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

// ---- mbarrier (9.7.13.15) --------------------------------------------------------------------------------

// mbarrier.init.shared::cta.b64: a barrier that completes a phase after `arrivals` arrivals (and the
// transaction bytes announced for that phase).
__device__ __forceinline__ void mbarrier_init(uint64_t *bar, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}

// fence.mbarrier_init.release.cluster: makes barrier initialisation visible to the async proxy (TMA).
__device__ __forceinline__ void fence_mbarrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// mbarrier.arrive.expect_tx.shared::cta.b64: arrive once and announce `bytes` that TMA will deliver.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

// mbarrier.arrive.shared::cta.b64: one plain arrival.
__device__ __forceinline__ void mbarrier_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64 in a loop: returns once the phase of parity `phase` completed.
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t *bar, uint32_t phase)
{
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "wait_%=:\n"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(phase)
        : "memory");
}

// mbarrier.test_wait.parity.shared::cta.b64: whether the phase of parity `phase` completed, without waiting.
__device__ __forceinline__ bool mbarrier_test_wait_parity(uint64_t *bar, uint32_t phase)
{
    uint32_t done;
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(phase)
        : "memory");
    return done != 0;
}

// ---- bulk tensor copy (9.7.9.25) -------------------------------------------------------------------------

// cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes: one TMA box of a 4-d tensor
// map into shared memory at `dst`, completing on `bar`. Coordinates innermost first.
__device__ __forceinline__ void tma_load_4d(void *dst, const void *tensor_map, uint64_t *bar, int32_t c0,
                                            int32_t c1, int32_t c2, int32_t c3)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(smem_addr(dst)),
                 "l"(tensor_map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

// prefetch.global.L1: bring the line holding ptr into this SM's L1 ahead of a load that would wait on L2.
__device__ __forceinline__ void prefetch_global_l1(const void *ptr)
{
    asm volatile("prefetch.global.L1 [%0];" ::"l"(ptr));
}

// griddepcontrol (programmatic dependent launch): launch_dependents lets the next kernel of the stream start its
// CTAs; wait blocks until every prerequisite grid has completed and its memory is visible.
__device__ __forceinline__ void griddepcontrol_launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void griddepcontrol_wait()
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

// prefetch.tensormap: pull a __grid_constant__ tensor map into the descriptor cache ahead of first use.
__device__ __forceinline__ void prefetch_tensormap(const void *tensor_map)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(tensor_map) : "memory");
}

// fence.proxy.async.shared::cta: orders this thread's generic-proxy shared-memory writes before later
// async-proxy (wgmma, TMA) reads of them.
__device__ __forceinline__ void fence_proxy_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---- named barriers (9.7.13.1) ---------------------------------------------------------------------------

// bar.sync id, threads: wait until `threads` threads (arrivals included) reached barrier `id`.
__device__ __forceinline__ void bar_sync(uint32_t id, uint32_t threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// bar.arrive id, threads: count this thread at barrier `id` without waiting.
__device__ __forceinline__ void bar_arrive(uint32_t id, uint32_t threads)
{
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// barrier.cta.red.or.pred id, threads: bar.sync that also returns whether any of the `threads` threads passed true.
__device__ __forceinline__ bool bar_red_or(uint32_t id, uint32_t threads, bool value)
{
    uint32_t any;
    asm volatile("{\n.reg .pred in, out;\nsetp.ne.u32 in, %1, 0;\n"
                 "barrier.cta.red.or.pred out, %2, %3, in;\nselp.u32 %0, 1, 0, out;\n}\n"
                 : "=r"(any)
                 : "r"(static_cast<uint32_t>(value)), "r"(id), "r"(threads)
                 : "memory");
    return any != 0;
}

// ---- register reallocation (9.7.18.5) --------------------------------------------------------------------

// setmaxnreg.inc / .dec: move this warpgroup's per-thread register budget to N (a multiple of 8, 24..256).
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_inc()
{
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_dec()
{
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

// ---- warpgroup matrix multiply-accumulate (9.7.15) -------------------------------------------------------

// wgmma.fence.sync.aligned: orders register accesses to accumulators/A fragments before the next wgmma.
__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

// wgmma.commit_group.sync.aligned: closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit_group()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// wgmma.wait_group.sync.aligned N: waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait_group()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Not an instruction: an empty asm that claims to read and rewrite each register. wgmma reads its A
// registers and writes its accumulators asynchronously, which the compiler cannot see; fencing them right
// after wgmma.wait_group keeps the compiler from reusing or touching them before that point.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+r"(r[i])::"memory");
}

// The 32 fp32 accumulators of an m64n64 tile as asm operands %0..%31, and the 64 of an m64n128 tile (%0..%63).
#define FP_WGMMA_R32                                                                                          \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "   \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FP_WGMMA_D32 "{" FP_WGMMA_R32 "}"
// Their operands with constraint c: "+f" for float32 accumulators, "+r" for float16 pairs (f16x2 in a register).
#define FP_WGMMA_D32_OPERANDS_AS(c, d)                                                                        \
    c(d[0]), c(d[1]), c(d[2]), c(d[3]), c(d[4]), c(d[5]), c(d[6]), c(d[7]), c(d[8]), c(d[9]), c(d[10]),         \
        c(d[11]), c(d[12]), c(d[13]), c(d[14]), c(d[15]), c(d[16]), c(d[17]), c(d[18]), c(d[19]), c(d[20]),    \
        c(d[21]), c(d[22]), c(d[23]), c(d[24]), c(d[25]), c(d[26]), c(d[27]), c(d[28]), c(d[29]), c(d[30]),    \
        c(d[31])
#define FP_WGMMA_D32_OPERANDS(d) FP_WGMMA_D32_OPERANDS_AS("+f", d)
#define FP_WGMMA_R64                                                                                          \
    FP_WGMMA_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "                                      \
                 "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, "\
                 "%61, %62, %63"
#define FP_WGMMA_D64 "{" FP_WGMMA_R64 "}"
#define FP_WGMMA_D64_OPERANDS(d)                                                                              \
    FP_WGMMA_D32_OPERANDS(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),    \
        "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),           \
        "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),           \
        "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]),           \
        "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// wgmma.mma_async m64n64k16 f32 += bf16 * bf16, A and B K-major in shared memory (a bf16 q's rotation).
// scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n64k16_f32_bf16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                            uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FP_WGMMA_D32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : FP_WGMMA_D32_OPERANDS(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// wgmma.mma_async m64n128k16 f32 += bf16 * bf16, A from registers (4 x bf16x2, the A fragment layout),
// B from shared memory: K-major (kTransB = 0, as K is stored for Q K^T) or MN-major (kTransB = 1, as V is
// stored for P V). scale_d = 0 overwrites the accumulators.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_f32_bf16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                             uint32_t scale_d)
{
    static_assert(kTransB == 0 || kTransB == 1, "imm-trans-b is 0 or 1");
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FP_WGMMA_D64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                 : FP_WGMMA_D64_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB));
}

// wgmma.mma_async m64n128k16 f32 += bf16 * bf16, A and B K-major in shared memory (S = Q K^T with Q left in shared
// memory). scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n128k16_f32_bf16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                             uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FP_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : FP_WGMMA_D64_OPERANDS(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// wgmma.mma_async m64n128k16 f32 += f16 * f16, A from registers (4 x f16x2), B MN-major in shared memory (the
// fp8 kernel's V widened to float16, stored as bf16's V is). scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n128k16_f32_f16_rs_mn(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                               uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FP_WGMMA_D64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : FP_WGMMA_D64_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// wgmma.mma_async m64n128k32 f32 += e4m3 * e4m3, A from registers (4 x e4m3x4), B K-major in shared memory.
// scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n128k32_f32_e4m3_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                             uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " FP_WGMMA_D64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : FP_WGMMA_D64_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// wgmma.mma_async m64n8k32 f32 += e4m3 * e4m3, A from registers, B K-major in shared memory: with B all
// ones, the row sums of A (the probabilities as quantized) where P.V is m64n128 (FwdConfig::kSumsInPv false).
// scale_d = 0 overwrites d.
__device__ __forceinline__ void wgmma_m64n8k32_f32_e4m3_rs(float (&d)[4], const uint32_t (&a)[4], uint64_t desc_b,
                                                           uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// The 68 fp32 accumulators of an m64n136 tile as asm operands %0..%67.
#define FP_WGMMA_D68 "{" FP_WGMMA_R64 ", %64, %65, %66, %67}"
#define FP_WGMMA_D68_OPERANDS(d) FP_WGMMA_D64_OPERANDS(d), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])

// wgmma.mma_async m64n136k32 f32 += e4m3 * e4m3, A from registers (4 x e4m3x4), B K-major in shared memory: P.V
// of the fp8 kernel with e4m3 codes, whose B is V^T's 128 rows and 8 rows of e4m3 ones (VtLayout), so that
// columns 128-135 of the accumulator (d[64..67]) take the row sums of P as quantized. scale_d = 0 overwrites d.
__device__ __forceinline__ void wgmma_m64n136k32_f32_e4m3_rs(float (&d)[68], const uint32_t (&a)[4], uint64_t desc_b,
                                                             uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %73, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n136k32.f32.e4m3.e4m3 " FP_WGMMA_D68
                 ", {%68, %69, %70, %71}, %72, p, 1, 1;\n}\n"
                 : FP_WGMMA_D68_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// The 96 fp32 accumulators of an m64n192 tile as asm operands %0..%95.
#define FP_WGMMA_D96                                                                                              \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
    "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
    "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, "   \
    "%65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "   \
    "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define FP_WGMMA_D96_OPERANDS(d)                                                                                 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),  \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),   \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),  \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),  \
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),  \
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),  \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),  \
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),  \
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),  \
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),  \
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

// wgmma.mma_async m64n192k32 f32 += e4m3 * e4m3, A from registers (4 x e4m3x4), B K-major in shared memory (S = Q K^T
// over a KV tile of 192 keys). scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n192k32_f32_e4m3_rs(float (&d)[96], const uint32_t (&a)[4], uint64_t desc_b,
                                                             uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 " FP_WGMMA_D96
                 ", {%96, %97, %98, %99}, %100, p, 1, 1;\n}\n"
                 : FP_WGMMA_D96_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// wgmma.mma_async m64n192k32 f32 += e4m3 * e4m3, A and B K-major in shared memory (Q and K of S = Q K^T where Q
// does not fit in registers). scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n192k32_f32_e4m3_ss(float (&d)[96], uint64_t desc_a, uint64_t desc_b,
                                                             uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 " FP_WGMMA_D96
                 ", %96, %97, p, 1, 1;\n}\n"
                 : FP_WGMMA_D96_OPERANDS(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// The 48 f16x2 accumulators of an m64n192 float16 tile (two neighbouring columns of a row in each, the pairs of the
// float32 layout) as asm operands %0..%47.
#define FP_WGMMA_D48_F16                                                                                      \
    "{" FP_WGMMA_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define FP_WGMMA_D48_F16_OPERANDS(d)                                                                          \
    FP_WGMMA_D32_OPERANDS_AS("+r", d), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]),          \
        "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]),  \
        "+r"(d[45]), "+r"(d[46]), "+r"(d[47])

// wgmma.mma_async m64n192k32 f16 += e4m3 * e4m3, A from registers (4 x e4m3x4), B K-major in shared memory (S = Q K^T
// with float16 scores). scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n192k32_f16_e4m3_rs(uint32_t (&d)[48], const uint32_t (&a)[4], uint64_t desc_b,
                                                             uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f16.e4m3.e4m3 " FP_WGMMA_D48_F16
                 ", {%48, %49, %50, %51}, %52, p, 1, 1;\n}\n"
                 : FP_WGMMA_D48_F16_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// wgmma.mma_async m64n128k32 f16 += e4m3 * e4m3, A from registers, B K-major in shared memory (S = Q K^T with float16
// scores at 128 keys a tile). scale_d = 0 overwrites the accumulators.
__device__ __forceinline__ void wgmma_m64n128k32_f16_e4m3_rs(uint32_t (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                             uint32_t scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f16.e4m3.e4m3 " FP_WGMMA_D32
                 ", {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                 : FP_WGMMA_D32_OPERANDS_AS("+r", d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

#undef FP_WGMMA_D48_F16
#undef FP_WGMMA_D48_F16_OPERANDS
#undef FP_WGMMA_D32_OPERANDS_AS

#undef FP_WGMMA_R32
#undef FP_WGMMA_D32
#undef FP_WGMMA_D32_OPERANDS
#undef FP_WGMMA_R64
#undef FP_WGMMA_D64
#undef FP_WGMMA_D68
#undef FP_WGMMA_D68_OPERANDS
#undef FP_WGMMA_D96
#undef FP_WGMMA_D96_OPERANDS
#undef FP_WGMMA_D64_OPERANDS

// ---- scalar arithmetic and conversions -------------------------------------------------------------------

// ex2.approx.ftz.f32 (9.7.3.22): 2^x on the MUFU pipe; ex2(-inf) = +0.
__device__ __forceinline__ float ex2_approx_ftz(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// cvt.rn.bf16x2.f32 (9.7.9.21): packs two floats, `lo` into the low half.
__device__ __forceinline__ uint32_t cvt_rn_bf16x2_f32(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// cvt.rn.f16x2.f32 (9.7.9.21): packs two floats as float16, `lo` into the low half.
__device__ __forceinline__ uint32_t cvt_rn_f16x2_f32(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// cvt.rn.f16x2.e4m3x2 (9.7.9.21): two e4m3 codes (low byte into the low half) as float16, exactly: every e4m3
// value, subnormals included, is a float16.
__device__ __forceinline__ uint32_t cvt_rn_f16x2_e4m3x2(uint16_t codes)
{
    uint32_t r;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(codes));
    return r;
}

// cvt.rn.satfinite.e4m3x2.f16x2 (9.7.9.21): packs a float16 pair as e4m3 codes, the low half into the low byte.
__device__ __forceinline__ uint16_t cvt_rn_satfinite_e4m3x2_f16x2(uint32_t halves)
{
    uint16_t r;
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(halves));
    return r;
}

// cvt.rn.satfinite.e4m3x2.f32 (9.7.9.21): packs two floats as e4m3 codes, `lo` into the low byte.
__device__ __forceinline__ uint16_t cvt_rn_satfinite_e4m3x2_f32(float lo, float hi)
{
    uint16_t r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

// cvt.rn.relu.f16x2.f32 (9.7.9.21): packs two floats as float16 (subnormals kept), negatives as 0, `lo` into
// the low half.
__device__ __forceinline__ uint32_t cvt_rn_relu_f16x2_f32(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// max.NaN.f32 (9.7.3.11): the larger of a and b, NaN if either is NaN (plain max returns the other operand).
__device__ __forceinline__ float max_nan_f32(float a, float b)
{
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

// max.f16x2 (9.7.4.8): the larger of each half (ptxas merges chains of them into three-input VHMNMX).
__device__ __forceinline__ uint32_t max_f16x2(uint32_t a, uint32_t b)
{
    uint32_t r;
    asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// fma.rn.relu.f16x2 (9.7.4.4): a * b + c per half, rounded once to float16, negative results as 0.
__device__ __forceinline__ uint32_t fma_rn_relu_f16x2(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t r;
    asm("fma.rn.relu.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// add.rn.f16x2 (9.7.4.1): a + b per half, rounded to float16.
__device__ __forceinline__ uint32_t add_rn_f16x2(uint32_t a, uint32_t b)
{
    uint32_t r;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// mul.rn.f16x2 (9.7.4.3): a * b per half, rounded to float16.
__device__ __forceinline__ uint32_t mul_rn_f16x2(uint32_t a, uint32_t b)
{
    uint32_t r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// cvt.f32.f16 of the low half (exact).
__device__ __forceinline__ float cvt_f32_f16_lo(uint32_t a)
{
    float r;
    asm("{\n.reg .f16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.f32.f16 %0, lo;\n}\n" : "=f"(r) : "r"(a));
    return r;
}

// cvt.rn.f16x2.f32 of x into both halves.
__device__ __forceinline__ uint32_t cvt_rn_f16x2_splat(float x)
{
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(x));
    return r;
}

// prmt.b32 (9.7.8.7): byte i of the result is byte selector[4i+3:4i] of {b, a} (a = bytes 0-3).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
    return r;
}

}  // namespace fp::ptx
