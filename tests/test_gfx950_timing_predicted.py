"""Timing mode (tools/gfx950_emu/timing.py) on whole attention kernels: AMD's fmha_v3 forward bf16 hd128 causal (the
`amd-aiter` wheel's code object, hardware-proven) and our fwd_bf16_hd128 / fwd_fp8_hd128, on small problems.

Each kernel runs twice, functionally (run_kernel) and in timing mode, and must write the same bits both times. The
timing run's steady state (the median KV-loop iteration of wave 0) gives PREDICTED cycles per 128 keys for the
workgroup's 256 queries, printed with `-s`; docs/gfx950.md ("timing model, first version") holds the figures and how
far they are from AMD's published MI355X throughput. The assertions hold the model to its own floor: no iteration
can be shorter than the MFMA work two waves put on one SIMD's MFMA pipe."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import kernargs
import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from gfx950_emu import GlobalMemory, load_code_object, run_kernel  # noqa: E402
from gfx950_emu.aiter_args import FMHA_FWD_V3_FIELDS, pack_slots  # noqa: E402
from gfx950_emu.timing import run_timed  # noqa: E402
from gfx950_emu.timing_params import value  # noqa: E402

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
RNG = np.random.default_rng()
BF16, FP8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
DIM, QUERIES, WORKITEMS, WAVES_PER_SIMD = 128, 256, 512, 2   # every kernel here: 8 waves of 32 queries
FLOP_PER_KEY = 4 * QUERIES * DIM                              # S = Q K^T and O += P V, per key of the tile
AITER_NAME = "_ZN5aiter26fmha_fwd_hd128_bf16_causalE"
MFMA_FLOP_PER_CYCLE = {"bf16": 32 * 32 * 16 * 2 / 32, "fp8": 32 * 32 * 64 * 2 / 64}  # one SIMD, LLVM's passes x 4


def _aiter_launch(rng, mem, seqlen):
    """fmha_fwd_hd128_bf16_causal's (grid, kernarg, out address): one head, batch 1, arguments as
    tests/test_gfx950_aiter_emulated.py packs them."""
    q, k, v = (rng.standard_normal((1, seqlen, 1, DIM)).astype(BF16) for _ in range(3))
    out = mem.alloc_array(np.full((1, seqlen, 1, DIM), np.nan, BF16))
    ptrs = [mem.alloc_array(x) for x in (q, k, v)]
    lse = mem.alloc_array(np.full(seqlen, np.nan, np.float32))
    seq, head, batch = DIM * 2, DIM * 2, seqlen * DIM * 2
    args = dict(ptr_o=out, ptr_q=ptrs[0], ptr_k=ptrs[1], ptr_v=ptrs[2], ptr_lse=lse, scalar=DIM ** -0.5,
                s_seq_len=seqlen, s_Seqs=seq, s_Ts=QUERIES * seq, s_Hs=head, s_Bs=batch, s_gqa=1, s_k_Seqs=seq,
                s_k_Hs=head, s_k_Bs=batch, s_opt=3, s_lse=1, s_kv_seq_len=seqlen, s_qk_head_dim=DIM,
                s_v_head_dim=DIM, s_q_head_num=1, s_v_Seqs=seq, s_v_Hs=head, s_v_Bs=batch, s_o_Seqs=seq,
                s_o_Hs=head, s_o_Bs=batch, ptr_qseq=0, ptr_kseq=0, s_lse_Hs=seqlen * 4, ptr_qseq_padding=0,
                ptr_kseq_padding=0)
    tiles = -(-seqlen // QUERIES)
    return ((tiles + 1) // 2, 1, 1), pack_slots(FMHA_FWD_V3_FIELDS, args), out, seqlen


def _ours_launch(rng, mem, name, keys):
    """Our kernel `name`'s (grid, kernarg, out address): 256 queries over `keys` keys, one head, not causal."""
    dtype = FP8 if "fp8" in name else BF16
    x = {n: rng.standard_normal((1, s, 1, DIM)).astype(dtype) for n, s in (("q", QUERIES), ("k", keys), ("v", keys))}
    addr = {n: mem.alloc_array(a) for n, a in x.items()}
    addr["out"] = mem.alloc_array(np.full((1, QUERIES, 1, DIM), 0x7FC0, np.uint16))
    addr["lse"] = mem.alloc_array(np.full(QUERIES, np.nan, np.float32))
    a = kernargs.FwdKernarg(q=addr["q"], k=addr["k"], v=addr["v"], out=addr["out"], lse=addr["lse"],
                            seqlen_q=QUERIES, seqlen_k=keys, heads_q=1, heads_per_kv=1, causal=0,
                            causal_offset=keys - QUERIES, softmax_scale_log2=np.log2(np.e) / np.sqrt(DIM),
                            lse_rows=QUERIES)
    for n, rows, item in (("q", QUERIES, dtype(0).itemsize), ("k", keys, dtype(0).itemsize),
                          ("v", keys, dtype(0).itemsize), ("out", QUERIES, 2)):
        setattr(a, f"{n}_stride_seq", DIM * item)
        setattr(a, f"{n}_stride_head", DIM * item)
        setattr(a, f"{n}_stride_batch", rows * DIM * item)
    if dtype is FP8:
        for n in "qkv":
            setattr(a, f"{n}_descale", mem.alloc_array(np.ones(1, np.float32)))
    return (1, 1, 1), bytes(a), addr["out"], QUERIES


def _code_object(kernel):
    if kernel == "aiter":
        path = markers.AITER_GFX950 / "fmha_v3_fwd" / "fwd_hd128_bf16_causal.co"
        if not path.exists():
            pytest.skip(markers.no_aiter_object("fmha_v3_fwd/fwd_hd128_bf16_causal.co"))
        return load_code_object(path), AITER_NAME
    return load_code_object(ROOT / "build" / "gfx950" / f"{kernel}.co"), kernel


KERNELS = [  # kernel, precision, keys of the problem, keys per loop iteration
    # AMD's: query tiles 0 and 1 of a 512-token causal problem in one workgroup; 128 keys an iteration (its MFMA
    # work per iteration); ours: kTileKeys of asm/gfx950/fwd_bf16.inc and fwd_fp8.inc
    pytest.param("aiter", "bf16", 512, 128, marks=markers.needs_aiter, id="aiter_fmha_fwd_hd128_bf16_causal"),
    pytest.param("fwd_bf16_hd128", "bf16", 256, 32, id="fwd_bf16_hd128"),
    pytest.param("fwd_fp8_hd128", "fp8", 256, 64, id="fwd_fp8_hd128"),
]


@pytest.mark.parametrize("kernel, precision, keys, iteration_keys", KERNELS)
def test_predicted_cycles_per_kv_tile(kernel, precision, keys, iteration_keys):
    co, name = _code_object(kernel)
    outs, runs = [], []
    seed = int(RNG.integers(1 << 31))
    for timing in (False, True):
        rng, mem = np.random.default_rng(seed), GlobalMemory()     # the same inputs for both runs
        grid, kernarg, out, rows = (_aiter_launch(rng, mem, keys) if kernel == "aiter"
                                    else _ours_launch(rng, mem, name, keys))
        launch = run_timed if timing else run_kernel
        runs.append(launch(co, name, grid, WORKITEMS, kernarg, mem, seed=seed, enforce_waits=kernel != "aiter"))
        outs.append(mem.read(out, np.uint16, (rows, DIM)))
    np.testing.assert_array_equal(outs[1], outs[0], err_msg=f"seed {seed}: timing mode changed {name}'s output")
    assert runs[1].stats.instructions == runs[0].instructions

    timed = runs[1]
    cycles_per_128_keys = timed.iteration_cycles() * 128 / iteration_keys
    wave_flop = [f for _, f in timed.tile_intervals()]
    assert min(wave_flop) >= FLOP_PER_KEY / 8 * iteration_keys, "an iteration with less MFMA work than its keys'"
    mfma_floor = FLOP_PER_KEY / 8 * 128 * WAVES_PER_SIMD / MFMA_FLOP_PER_CYCLE[precision]
    tflops = FLOP_PER_KEY * 128 / cycles_per_128_keys * value("clock_ghz") * 1e9 * value("cus") / 1e12
    wg = timed.workgroups[0]
    print(f"\nPREDICTED {kernel}: {cycles_per_128_keys:.0f} cycles per 128 keys x 256 queries "
          f"(MFMA floor {mfma_floor:.0f}: {mfma_floor / cycles_per_128_keys:.0%} of the MFMA pipe busy), "
          f"steady state {tflops:.0f} TFLOP/s on {value('cus'):.0f} CUs at {value('clock_ghz')} GHz; "
          f"workgroup 0: {wg.cycles:.0f} cycles, stalls {dict(wg.stalls.most_common(4))}, "
          f"reads before the modelled load completion {len(wg.early_reads)}")
    assert cycles_per_128_keys >= mfma_floor
