"""The timing model's parameters (timing.py), each with its source or marked a calibration knob.

Cycles are shader-clock cycles of one CU. A `Param` with source CALIBRATION is a guess to be fitted against AMD's
kernels on AMD's published figures (docs/gfx950.md, "timing model, first version"); every other value is read
from the public source it names. MFMA pass counts are not here: they are tools/gfx950_hazards.py's PASSES table
(LLVM 22's gfx950 scheduling model, SISchedule.td, SchedModel SIDPGFX950FullSpeedModel), one pass = VALU_CYCLES.
"""
from dataclasses import dataclass

CALIBRATION = "calibration knob"
_LLVM_SCHED = ("llvm/lib/Target/AMDGPU/SISchedule.td (github.com/ROCm/llvm-project, commit 37d9a34), "
               "multiclass SICommonWriteRes")
_ISSCC = ("news.lavx.hu/article/isscc-2026-amd-s-mi355x-doubles-throughput-with-fewer-compute-units-and-"
          "challenges-nvidia-s-gb200")
_FITTED = ("fitted: github.com/ROCm/aiter/pull/3390 (b4 s8192 h64/8 causal, 1279 TFLOP/s) and "
           "github.com/ROCm/FlyDSL/pull/629 (aiter_asm b8 s256 h64 causal, 35.1 us)")
# Fitted by `python tools/gfx950_predict.py --calibration`, which prints them. The clock is an effective one: it
# absorbs whatever the model leaves out (clock droop under load, unmodelled stalls), not a measured clock.
SUSTAINED_CLOCK, CALL_OVERHEAD = 1.737, 1.99
_PIPELINES = ("rocm.docs.amd.com/projects/rocprofiler-compute/en/develop/conceptual/cdna/"
              "pipeline-descriptions.html")


@dataclass(frozen=True)
class Param:
    value: float
    unit: str
    source: str


PARAMS = {
    # A CU has four 16-lane SIMDs: a wave64 VALU instruction occupies its SIMD for 64 / 16 = 4 cycles, and the
    # scheduler serves each SIMD once in that time, so a wave issues at most one instruction per 4 cycles.
    "simds_per_cu": Param(4, "SIMDs", _PIPELINES),
    "valu_cycles": Param(4, "cycles per wave64 VALU instruction (one pass)", _PIPELINES),
    # LLVM: "F16 or F32 transcendental instructions (these are quarter rate)", WriteTrans32.
    "trans_cycles": Param(16, "cycles per wave64 transcendental", _LLVM_SCHED + ", WriteTrans32"),
    # LLVM's hazard rule: a VALU may read an MFMA's result P + 4 wait states after it (gfx950), a wait state being
    # one issue of the wave (valu_cycles).
    "mfma_result_extra_passes": Param(4, "wait states after the last pass", "tools/gfx950_hazards.py, RULES"),
    # s_nop N: N + 1 wait states (ISA guide, "Manually inserted wait states"); one wave issue each.
    "wait_state_cycles": Param(4, "cycles per wait state", _PIPELINES),
    "sleep_cycles_per_unit": Param(64, "cycles per unit of s_sleep's operand", CALIBRATION),
    "lds_latency": Param(64, "cycles from issue to data in VGPRs", CALIBRATION
                         + " (LLVM's WriteLDS: 'can be between 2 and 64' of its 4-cycle units)"),
    # CDNA 4 doubled the LDS read bandwidth to 256 bytes per clock (Chips and Cheese, "AMD's CDNA 4 Architecture
    # Announcement", chipsandcheese.com/p/amds-cdna-4-architecture-announcement); writes are taken at the same rate.
    "lds_bytes_per_cycle": Param(256, "bytes per cycle per CU", "chipsandcheese.com/p/amds-cdna-4-architecture-"
                                 "announcement"),
    "vmem_latency": Param(500, "cycles from issue to data (an L2 hit)", CALIBRATION),
    "vmem_bytes_per_cycle": Param(64, "bytes per cycle per CU (address / L1 path)", CALIBRATION),
    "smem_latency": Param(200, "cycles", CALIBRATION),
    "barrier_cycles": Param(16, "cycles from the last arrival to the release", CALIBRATION),
    "branch_cycles": Param(16, "cycles before a taken branch's target issues", CALIBRATION),
    # MI355X: 8 XCDs of 32 CUs, 8192 FP8 MFMA flop per clock per CU and 5 PFLOP/s FP8 (AMD at ISSCC 2026, as reported
    # at news.lavx.hu/article/isscc-2026-amd-s-mi355x-doubles-throughput-with-fewer-compute-units-and-challenges-
    # nvidia-s-gb200), so a clock of 5e15 / (256 * 8192) = 2.4 GHz; and 8192 flop per clock per CU is 4 SIMDs doing
    # a 32x32x64 fp8 MFMA (131072 flop) in 64 cycles: 16 passes of 4, LLVM's count.
    "clock_ghz": Param(2.4, "GHz", _ISSCC),
    "cus": Param(256, "CUs", _ISSCC),
    "fp8_flop_per_cycle_per_cu": Param(8192, "dense fp8 MFMA flop per cycle per CU", _ISSCC),
    # From cycles to seconds (tools/gfx950_predict.py): fitted on AMD's fmha_v3 forward bf16 code objects against
    # AMD's published MI355X figures, two fitted and two held out (`python tools/gfx950_predict.py --calibration`).
    "sustained_clock_ghz": Param(SUSTAINED_CLOCK, "GHz under this load", _FITTED),
    "call_overhead_us": Param(CALL_OVERHEAD, "microseconds per call, launch included", _FITTED),
}


def value(name: str) -> float:
    """PARAMS[name].value."""
    return PARAMS[name].value
