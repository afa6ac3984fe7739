"""The wgmma-loop ceiling from Python: build/libflashprefill_ceiling.so (`make ceiling`, cuda/ceiling/wgmma_loop.h)
declared for ctypes, its kernels, the KV tiles each query tile visits, and the FLOPs the ceiling is credited with.

The loop runs the forward kernels' configurations (tiles, stages, warp roles, TMA loads, wgmma) with P = S rounded to
the input type in place of the softmax: out = sum over the visited KV tiles of round(Q K^T) V (bf16, stored as
attention's), and for fp8 the row sums of round(Q K^T) that P.V's columns of ones give (cuda/ceiling/wgmma_loop.cuh).
Arrays are passed as device addresses, so that tools/ceiling.py (torch) and tests/test_ceiling_gpu.py (CuPy) share
this module; it imports neither.

Inputs, dim 128, seqlen_q = seqlen_k: q (batch, seqlen, heads_q, 128), k (batch, seqlen, heads_kv, 128), v bf16 as k,
fp8 in the prepared layout (batch, heads_kv, 128, positions) of flashprefill.prepare_v; e4m3 or bf16 as the kernel's
dtype, contiguous; out bf16 (batch, seqlen, heads_q, 128).
"""
import ctypes
import functools
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "build" / "libflashprefill_ceiling.so"
DIM = 128
BLOCK_M = 128  # query rows per work item (fwd/config.cuh's kBlockM)
# name: (input dtype, KV tile keys), as the library's table lists them (checked at load)
KERNELS = {"fp8_kv192": ("fp8", 192), "fp8_kv128": ("fp8", 128), "bf16_kv128": ("bf16", 128)}


class CeilingError(RuntimeError):
    """The library is missing or differs from this module, or it refused a call (its own last error attached)."""


@functools.cache
def library():
    """The loaded library, declared; refused where its kernels are not KERNELS."""
    if not LIBRARY.exists():
        raise CeilingError(f"{LIBRARY} is missing: build it with `make ceiling`")
    lib = ctypes.CDLL(str(LIBRARY))
    # int fp_wgmma_loop_kernel_count(void);
    lib.fp_wgmma_loop_kernel_count.argtypes = []
    lib.fp_wgmma_loop_kernel_count.restype = ctypes.c_int
    # const char *fp_wgmma_loop_kernel_name(int index);
    lib.fp_wgmma_loop_kernel_name.argtypes = [ctypes.c_int]
    lib.fp_wgmma_loop_kernel_name.restype = ctypes.c_char_p
    # flashprefill_status fp_wgmma_loop_run(const char *kernel, const void *q, const void *k, const void *v,
    #     float *out, float *row_sums, int32_t batch, int32_t seqlen, int32_t heads_q, int32_t heads_kv,
    #     int32_t causal, void *stream);
    lib.fp_wgmma_loop_run.argtypes = [ctypes.c_char_p] + [ctypes.c_void_p] * 5 + [ctypes.c_int32] * 5 + \
        [ctypes.c_void_p]
    lib.fp_wgmma_loop_run.restype = ctypes.c_int
    # const char *fp_wgmma_loop_last_error(void);
    lib.fp_wgmma_loop_last_error.argtypes = []
    lib.fp_wgmma_loop_last_error.restype = ctypes.c_char_p
    names = [lib.fp_wgmma_loop_kernel_name(i).decode() for i in range(lib.fp_wgmma_loop_kernel_count())]
    if names != list(KERNELS):
        raise CeilingError(f"{LIBRARY} has the kernels {names}, this module knows {list(KERNELS)}: rebuild it")
    return lib


def run(kernel, q, k, v, out, row_sums, batch, seqlen, heads_q, heads_kv, causal, stream=0):
    """Enqueues `kernel` on `stream` (a cudaStream_t as an int; 0: the default stream). q, k, v, out, row_sums: device
    addresses (row_sums 0: none; fp8 kernels write (batch, heads_q, seqlen) float32 there, bf16 ones nothing)."""
    lib = library()
    status = lib.fp_wgmma_loop_run(kernel.encode(), q, k, v, out, row_sums or None, batch, seqlen, heads_q, heads_kv,
                                   int(causal), stream or None)
    if status != 0:
        raise CeilingError(f"wgmma loop {kernel}: status {status}: {lib.fp_wgmma_loop_last_error().decode()}")


def visited_keys(kernel, seqlen, causal):
    """Per query tile of BLOCK_M rows, the keys the loop multiplies: [0, limit), whole KV tiles up to the diagonal when
    causal (fwd/varlen.cuh's kv_range_of with seqlen_q = seqlen_k), cut at seqlen."""
    keys = KERNELS[kernel][1]
    tiles = -(-seqlen // keys)
    limits = []
    for m_block in range(-(-seqlen // BLOCK_M)):
        end = min(((m_block + 1) * BLOCK_M - 1) // keys + 1, tiles) if causal else tiles
        limits.append(min(end * keys, seqlen))
    return limits


def flops(batch, seqlen, heads_q, causal):
    """The FLOPs the ceiling is credited with: attention's, 4 seqlen^2 dim per (batch, head), halved when causal (the
    benchmarks' count; the diagonal tiles computed whole are not counted, as for the forward kernels)."""
    return batch * heads_q * seqlen * seqlen * 2 * DIM * (1 if causal else 2)
