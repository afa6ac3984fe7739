"""What rocprofv3's SQ counters should read for one dispatch of an equal-length forward kernel, from our emulator:
tools/mi355x_check.py --emulator-counts runs the built code object (build/gfx950/<kernel>.co) in tools/gfx950_emu on the
case's shape and sums RunStats.instructions (per wave, over all waves, as the SQ counts) by the counter that counts
them. Emulator and hardware agree on the instruction stream of a deterministic kernel (no data-dependent branch
but the causal tile count, which the shape fixes), so a mismatch means the hardware ran other code or other trip
counts. Small shapes only: the emulator takes seconds per workgroup. Equal-length cases only, one dispatch a call: a
varlen or paged call is two (varlen_check, then the forward kernel), which the printed rocprofv3 lines filter by name.
"""
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import kernargs  # noqa: E402  the one Python mirror of hip/fwd_kernarg.h
from gfx950_emu import GlobalMemory, load_code_object, run_kernel  # noqa: E402

from mi355x_cases import DIM_V, equal_inputs  # noqa: E402

LONGEST_EMULATED = 400
QUERIES_PER_WORKGROUP, LANES_PER_WORKGROUP = 256, 512  # asm/gfx950/fwd_contract.inc
BF16_NAN = 0x7FC0
# SQ counter <- the mnemonic prefixes it counts, as we read the counters' descriptions (unchecked on gfx950): VALU
# includes the MFMAs; SALU every other scalar instruction, waits, barriers and branches included, which the SQ may
# count elsewhere (SQ_INSTS_BRANCH, ...): the per-mnemonic counts beside them settle any difference.
COUNTERS = {"SQ_INSTS_MFMA": ("v_mfma",), "SQ_INSTS_VALU": ("v_",), "SQ_INSTS_LDS": ("ds_",),
            "SQ_INSTS_SMEM": ("s_load", "s_buffer_load"), "SQ_INSTS_VMEM_RD": ("buffer_load", "global_load"),
            "SQ_INSTS_VMEM_WR": ("buffer_store", "global_store")}


def counts(instructions):
    """{counter: count} of a RunStats.instructions Counter (mnemonic -> executions over all waves), and
    SQ_INSTS_SALU: the scalar instructions that are not SMEM."""
    out = {counter: sum(n for mnemonic, n in instructions.items() if mnemonic.startswith(prefixes))
           for counter, prefixes in COUNTERS.items()}
    out["SQ_INSTS_SALU"] = sum(n for mnemonic, n in instructions.items() if mnemonic.startswith("s_")) \
        - out["SQ_INSTS_SMEM"]
    return out


def emulator_counts(case, rng, seed=0):
    """({counter: count}, {mnemonic: count}) of one dispatch of the case's kernel in the emulator (SQ_WAVES among the
    counters); ValueError for a case
    the emulator should not take (not equal-length forward, longer than LONGEST_EMULATED)."""
    if case.form != "equal" or case.longest > LONGEST_EMULATED or case.descale == "per_block":
        raise ValueError(f"{case.name}: the emulator counts take small equal-length cases with factors")
    arrays, _ = equal_inputs(case, rng)
    q, k, v = arrays["q"], arrays["k"], arrays["v"]
    batch, sq, hq, dim_qk = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    mem = GlobalMemory()
    addr = {n: mem.alloc_array(np.ascontiguousarray(x)) for n, x in (("q", q), ("k", k), ("v", v))}
    addr["out"] = mem.alloc_array(np.full((batch, sq, hq, DIM_V), BF16_NAN, np.uint16))
    addr["lse"] = mem.alloc_array(np.full((batch, hq, sq), np.nan, np.float32))
    a = kernargs.FwdKernarg(q=addr["q"], k=addr["k"], v=addr["v"], out=addr["out"], lse=addr["lse"], seqlen_q=sq,
                            seqlen_k=sk, heads_q=hq, heads_per_kv=hq // hkv, causal=int(case.causal),
                            causal_offset=sk - sq, softmax_scale_log2=np.log2(np.e) / np.sqrt(dim_qk), lse_rows=sq)
    for n, shape, item in (("q", q.shape, q.itemsize), ("k", k.shape, k.itemsize), ("v", v.shape, v.itemsize),
                           ("out", (batch, sq, hq, DIM_V), 2)):
        setattr(a, f"{n}_stride_seq", shape[2] * shape[3] * item)
        setattr(a, f"{n}_stride_head", shape[3] * item)
        setattr(a, f"{n}_stride_batch", shape[1] * shape[2] * shape[3] * item)
    for n in "qkv" if case.dtype == "fp8" else "":  # factors (batch, heads_kv); q head h reads h // heads_per_kv
        setattr(a, f"{n}_descale", mem.alloc_array(np.ascontiguousarray(arrays[f"{n}_descale"], np.float32)))
        setattr(a, f"{n}_descale_stride_batch", hkv)
        setattr(a, f"{n}_descale_stride_head", 1)
    co = load_code_object(str(ROOT / "build" / "gfx950" / f"{case.kernel}.co"))
    stats = run_kernel(co, case.kernel, grid=(-(-sq // QUERIES_PER_WORKGROUP), hq, batch),
                       workgroup_size=LANES_PER_WORKGROUP, kernarg=bytes(a), memory=mem, seed=seed)
    return {"SQ_WAVES": stats.waves} | counts(stats.instructions), dict(sorted(stats.instructions.items()))
