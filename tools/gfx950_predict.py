"""PREDICTED whole-problem time of the gfx950 attention kernels, ours and AMD's fmha_v3 (the amd-aiter wheel's code
objects), from the emulator's timing mode (tools/gfx950_emu/timing.py). Nothing here has run on an MI355X.

A workgroup's cycles are taken as a + b * keys, keys being the keys its query rows visit (rounded up to the kernel's
KV tile); a and b are fitted per kernel on two or three small timed workgroups (one head, 512-1024 tokens). A problem's
workgroups then go, in dispatch order (x fastest), each to the CU that frees first, one at a time per CU (every
kernel here fills a CU: AMD's take all 160 KiB of LDS, ours 2 waves of 224 VGPRs a SIMD); the time is the last CU's
end, at the sustained clock and plus the per-call overhead that --calibration fits on AMD's published figures
(timing_params.py holds the fitted values).

    python tools/gfx950_predict.py                  # the table of ours over AMD's at the benchmark shapes
    python tools/gfx950_predict.py --calibration    # AMD's kernels against AMD's published MI355X figures
    python tools/gfx950_predict.py --aiter-fp8 DIR  # adds AMD's fp8 hd128 objects (not in the wheel), from DIR
"""
import argparse
import dataclasses
import heapq
import os
import pathlib
import sys

import ml_dtypes
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests")]
import kernargs  # noqa: E402
from gfx950_emu import GlobalMemory, load_code_object  # noqa: E402
from gfx950_emu.aiter_args import FMHA_FWD_V3_KERNELS, fmha_fwd_v3_fp8_launch, fmha_fwd_v3_launch  # noqa: E402
from gfx950_emu.timing import run_timed  # noqa: E402
from gfx950_emu.timing_params import value  # noqa: E402

BF16, FP8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
OUR_QUERIES = 256                       # queries per workgroup of ours (fwd_contract.inc)
OUR_TILE_KEYS = {"bf16": 32, "fp8": 64}  # kTileKeys of fwd_bf16.inc, fwd_fp8.inc


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str
    owner: str            # "ours" or "aiter"
    precision: str
    dim_qk: int
    causal: bool
    folder: pathlib.Path = None   # AMD's fp8 objects: not in the wheel, the folder given

    @property
    def tile_rows(self):
        return OUR_QUERIES if self.owner == "ours" else FMHA_FWD_V3_KERNELS[self.dim_qk][1]

    @property
    def key_step(self):
        return OUR_TILE_KEYS[self.precision] if self.owner == "ours" else 128

    def workgroups(self, seqlen):
        """[keys visited] per workgroup along x (one head): AMD's causal kernels pair query tiles i and T - 1 - i."""
        tiles = -(-seqlen // self.tile_rows)

        def keys(tile):
            seen = min(seqlen, (tile + 1) * self.tile_rows) if self.causal else seqlen
            return -(-seen // self.key_step) * self.key_step
        if self.owner == "aiter" and self.causal:
            return [keys(i) + (keys(tiles - 1 - i) if tiles - 1 - i != i else 0) for i in range((tiles + 1) // 2)]
        return [keys(i) for i in range(tiles)]


OUR_CODE_OBJECTS = ROOT / "build" / "gfx950"


def _our_run(kernel, seqlen, seed, folder):
    rng, mem = np.random.default_rng(seed), GlobalMemory()
    dtype = FP8 if kernel.precision == "fp8" else BF16
    x = {n: rng.standard_normal((1, seqlen, 1, d)).astype(dtype)
         for n, d in (("q", kernel.dim_qk), ("k", kernel.dim_qk), ("v", 128))}
    addr = {n: mem.alloc_array(a) for n, a in x.items()}
    addr["out"] = mem.alloc_array(np.full((1, seqlen, 1, 128), 0x7FC0, np.uint16))
    addr["lse"] = mem.alloc_array(np.full(seqlen, np.nan, np.float32))
    a = kernargs.FwdKernarg(q=addr["q"], k=addr["k"], v=addr["v"], out=addr["out"], lse=addr["lse"],
                            seqlen_q=seqlen, seqlen_k=seqlen, heads_q=1, heads_per_kv=1, causal=int(kernel.causal),
                            causal_offset=0, softmax_scale_log2=np.log2(np.e) / np.sqrt(kernel.dim_qk),
                            lse_rows=seqlen)
    for n, d, item in (("q", kernel.dim_qk, dtype(0).itemsize), ("k", kernel.dim_qk, dtype(0).itemsize),
                       ("v", 128, dtype(0).itemsize), ("out", 128, 2)):
        setattr(a, f"{n}_stride_seq", d * item)
        setattr(a, f"{n}_stride_head", d * item)
        setattr(a, f"{n}_stride_batch", seqlen * d * item)
    if dtype is FP8:
        for n in "qkv":
            setattr(a, f"{n}_descale", mem.alloc_array(np.ones(1, np.float32)))
    co = load_code_object(folder / f"{kernel.name}.co")
    grid = (-(-seqlen // OUR_QUERIES), 1, 1)
    return run_timed(co, kernel.name, grid, 512, bytes(a), mem, seed=seed)


def _aiter_run(kernel, seqlen, seed, folder=None):
    import markers
    rng, mem = np.random.default_rng(seed), GlobalMemory()
    dtype = FP8 if kernel.precision == "fp8" else BF16
    q, k = (rng.standard_normal((1, seqlen, 1, kernel.dim_qk)).astype(dtype) for _ in range(2))
    v = rng.standard_normal((1, seqlen, 1, 128)).astype(dtype)
    out = np.full((1, seqlen, 1, 128), np.nan, BF16)
    ptrs = dict(zip("oqkv", (mem.alloc_array(x) for x in (out, q, k, v))))
    ptrs["lse"] = mem.alloc_array(np.full(seqlen, np.nan, np.float32))
    strides = {n: [x.strides[i] // x.itemsize for i in (1, 2, 0)] for n, x in zip("oqkv", (out, q, k, v))}
    if dtype is FP8:
        ptrs.update({f"{n}_descale": mem.alloc_array(np.ones(1, np.float32)) for n in "qkv"})
        launch = fmha_fwd_v3_fp8_launch(ptrs, q.shape, k.shape, strides, kernel.causal, kernel.dim_qk ** -0.5)
    else:
        launch = fmha_fwd_v3_launch(ptrs, q.shape, k.shape, strides, kernel.causal, kernel.dim_qk ** -0.5)
    co = load_code_object((kernel.folder or markers.AITER_GFX950) / launch.code_object)
    return run_timed(co, launch.symbol, launch.grid, launch.workitems, launch.kernarg, mem, seed=seed,
                     enforce_waits=False)


# the small problems each fit times: one head, enough tokens for two different workgroup sizes
FIT_SEQLENS = {("ours", True): (512,), ("ours", False): (256, 512), ("aiter", True): (512, 1024),
               ("aiter", False): (256, 512)}


def fit(kernel, seed=1, folder=OUR_CODE_OBJECTS, grid_order=False):
    """(a, b): PREDICTED cycles of a workgroup = a + b * keys visited, least squares over the fit runs' workgroups
    (ours from the code objects in `folder`; grid_order as dispatch_order's)."""
    keys, cycles = [], []
    for seqlen in FIT_SEQLENS[kernel.owner, kernel.causal]:
        run = (_our_run if kernel.owner == "ours" else _aiter_run)(kernel, seqlen, seed, folder)
        keys += dispatch_order(kernel, seqlen, 1, 1, grid_order)
        cycles += [wg.cycles for wg in run.workgroups]
    b, a = np.polyfit(np.array(keys, float), np.array(cycles, float), 1)
    return a, b


def dispatch_order(kernel, seqlen, heads_q, batch, grid_order=False):
    """[keys visited] of the problem's workgroups in the order the hardware starts them (x, then y, then z). Ours
    take their query blocks longest first within a batch (fwd_frame.inc, longest_first); grid_order: as the grid
    lies (x the query block, our kernels before longest_first)."""
    per_head = kernel.workgroups(seqlen)
    if kernel.owner == "ours" and not grid_order:
        return [k for _ in range(batch) for k in per_head[::-1] for _ in range(heads_q)]
    return per_head * (heads_q * batch)


def problem_cycles(kernel, ab, batch, seqlen, heads_q, grid_order=False):
    """PREDICTED cycles of the whole problem: workgroups in dispatch order onto the first free CU, the last CU's end."""
    a, b = ab
    free = [0.0] * int(value("cus"))
    for keys in dispatch_order(kernel, seqlen, heads_q, batch, grid_order):
        heapq.heappush(free, heapq.heappop(free) + a + b * keys)
    return max(free)


def seconds(cycles, clock_ghz=None, overhead_us=None):
    """A problem's PREDICTED seconds: at the calibrated sustained clock plus the calibrated per-call overhead
    (timing_params), or at the values given (clock_ghz=value("clock_ghz"), overhead_us=0: the raw model)."""
    clock_ghz = value("sustained_clock_ghz") if clock_ghz is None else clock_ghz
    overhead_us = value("call_overhead_us") if overhead_us is None else overhead_us
    return cycles / (clock_ghz * 1e9) + overhead_us * 1e-6


def calibrate(points):
    """(clock GHz, overhead us) with published seconds = cycles / clock + overhead at the given
    [(PREDICTED cycles, published seconds)] (least squares)."""
    a = np.array([[c, 1.0] for c, _ in points])
    inv_clock, overhead = np.linalg.lstsq(a, np.array([t for _, t in points]), rcond=None)[0]
    return 1 / inv_clock / 1e9, overhead * 1e6


def flops(batch, seqlen, heads_q, dim_qk, dim_v, causal):
    return batch * heads_q * seqlen * seqlen * 2 * (dim_qk + dim_v) / (2 if causal else 1)


OURS = {(p, d): Kernel(f"fwd_{p}_{'hd128' if d == 128 else 'qk192'}", "ours", p, d, True)
        for p in ("bf16", "fp8") for d in (128, 192)}
AITER = {(d, c): Kernel(f"fmha_fwd_{'hd128' if d == 128 else 'hd192_hd128'}_bf16{'_causal' if c else ''}", "aiter",
                        "bf16", d, c) for d in (128, 192) for c in (True, False)}
# (name, batch, seqlen, heads_q, dim_qk): tools/bench.py's shapes
SHAPES = [("hd128 32/8 4k x 4", 4, 4096, 32, 128), ("hd128 32/8 16k", 1, 16384, 32, 128),
          ("hd128 32/8 32k", 1, 32768, 32, 128), ("192/128 16h 4k x 4", 4, 4096, 16, 192),
          ("192/128 16h 16k", 1, 16384, 16, 192), ("192/128 16h 32k", 1, 32768, 16, 192)]
# AMD's published MI355X figures for these code objects, bf16, dim 128: (batch, seqlen, heads_q, causal, TFLOP/s
# as published, used in the fit, where). FlyDSL's table times aiter_asm (fmha_v3) per call, launch included.
PUBLISHED = [
    (4, 8192, 64, True, 1279, True, "github.com/ROCm/aiter/pull/3390 (1278-1280)"),
    (4, 8192, 64, False, 1380, False, "github.com/ROCm/aiter/pull/3390 (1371-1390)"),
    (8, 512, 64, True, 427.5, False, "github.com/ROCm/FlyDSL/pull/629 (aiter_asm, 80.4 us)"),
    (8, 256, 64, True, 244.6, True, "github.com/ROCm/FlyDSL/pull/629 (aiter_asm, 35.1 us)"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", action="store_true", help="AMD's kernels against the published figures")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ours", type=pathlib.Path, default=OUR_CODE_OBJECTS,
                    help="the folder of our code objects (default build/gfx950)")
    ap.add_argument("--grid-order", action="store_true",
                    help="our workgroups in grid order (code objects from before longest_first)")
    ap.add_argument("--aiter-fp8", type=pathlib.Path, default=os.environ.get("FLASHPREFILL_AITER_FP8"),
                    help="a folder holding AMD's fwd_hd128_fp8_causal.co (aiter repository, hsa/gfx950/fmha_v3_fwd/; "
                    "default $FLASHPREFILL_AITER_FP8): adds AMD's fp8 at dim 128")
    args = ap.parse_args()
    fits = {}

    def ab(kernel):
        if kernel not in fits:
            fits[kernel] = fit(kernel, args.seed, args.ours, args.grid_order)
            a, b = fits[kernel]
            print(f"# {kernel.name}: PREDICTED workgroup cycles = {a:.0f} + {b:.2f} x keys", flush=True)
        return fits[kernel]
    if args.calibration:
        rows = []
        for batch, seqlen, heads, causal, tflops, in_fit, where in PUBLISHED:
            kernel = AITER[128, causal]
            f = flops(batch, seqlen, heads, 128, 128, causal)
            rows.append((problem_cycles(kernel, ab(kernel), batch, seqlen, heads), f / (tflops * 1e12), f, in_fit))
        clock, overhead = calibrate([(c, t) for c, t, _, in_fit in rows if in_fit])
        print(f"# fitted: sustained clock {clock:.3f} GHz, per-call overhead {overhead:.2f} us "
              f"(timing_params: {value('sustained_clock_ghz')}, {value('call_overhead_us')})")
        print("| problem (bf16 hd128) | published TFLOP/s | raw model (2.4 GHz, no overhead) | calibrated "
              "| calibrated / published | in the fit | source |")
        print("|---|---|---|---|---|---|---|")
        for (batch, seqlen, heads, causal, tflops, in_fit, where), (cycles, _, f, _) in zip(PUBLISHED, rows):
            raw = f / seconds(cycles, value("clock_ghz"), 0) / 1e12
            cal = f / seconds(cycles) / 1e12
            print(f"| b{batch} s{seqlen} h{heads} {'causal' if causal else 'full'} | {tflops} | {raw:.0f} | "
                  f"{cal:.0f} | {cal / tflops:.2f} | {'fit' if in_fit else 'held out'} | {where} |")
        return
    amd_fp8 = args.aiter_fp8 and Kernel("fmha_fwd_hd128_fp8_causal", "aiter", "fp8", 128, True, args.aiter_fp8)
    print("| shape | AMD bf16 TFLOP/s | ours bf16 | ours fp8 | bf16 ours / AMD | fp8 ours / AMD bf16 | fp8 of peak |"
          + (" AMD fp8 | fp8 ours / AMD fp8 |" if amd_fp8 else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if amd_fp8 else ""))
    peak = value("fp8_flop_per_cycle_per_cu") * value("cus") * value("sustained_clock_ghz") * 1e9
    for name, batch, seqlen, heads, dim_qk in SHAPES:
        f = flops(batch, seqlen, heads, dim_qk, 128, True)

        def tflops(kernel):
            return f / seconds(problem_cycles(kernel, ab(kernel), batch, seqlen, heads, args.grid_order)) / 1e12
        amd = tflops(AITER[dim_qk, True])
        ours = {p: tflops(OURS[p, dim_qk]) for p in ("bf16", "fp8")}
        fp8 = ""
        if amd_fp8:
            fp8 = f" {tflops(amd_fp8):.0f} | {ours['fp8'] / tflops(amd_fp8):.2f} |" if dim_qk == 128 else " - | - |"
        print(f"| {name} | {amd:.0f} | {ours['bf16']:.0f} | {ours['fp8']:.0f} | {ours['bf16'] / amd:.2f} | "
              f"{ours['fp8'] / amd:.2f} | {ours['fp8'] * 1e12 / peak:.0%} |{fp8}", flush=True)

if __name__ == "__main__":
    main()
