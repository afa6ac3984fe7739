"""The gfx950 wait-state hazards our hand-written kernels can meet, as LLVM 22's hazard recognizer
(GCNHazardRecognizer.cpp, pass post-RA-hazard-rec) requires them: the assembler inserts no s_nop, so the kernels
must hold these distances themselves. tests/test_gfx950_hazard_table.py checks every row against llc-22.

A wait state is one instruction issued in between (`s_nop N` counts N + 1); a rule's count is the number of wait
states the consumer needs after its producer, the producer not among them.

Producers and the relations their consumers have to them (one row each in RULES):
  * an XDL MFMA of P passes (LLVM's scheduling model: PASSES below) writing its result VGPRs:
      read by a VALU (v_accvgpr_read and v_permlane*_swap are VALUs), by a memory instruction (address or store
      data), or written again by a VALU or a load ....................................... P + 4 (P + 3 before gfx950)
      read by an MFMA as A or B (or a block scale) ...................................... P + 4
      read by an MFMA as C overlapping, not equal to, the result ........................ P + 2
      read by an MFMA as C exactly (back-to-back accumulation) .......................... 0
  * an XDL MFMA of P passes reading C: a VALU or load overwriting it .............. 3 / 7 / 15 (4 / 8 / 16 passes)
  * a VALU writing a VGPR: an MFMA reads it (A, B, C or scale) 2; v_permlane*_swap 2; a DPP read 2;
    v_readlane / v_readfirstlane 1
  * a VALU writing an SGPR (VCC too: compares, carries, v_readfirstlane): a VALU reads it, named or implicit (the
    VCC of v_cndmask_b32_e32, v_addc_co_u32_e32) 2; v_readlane's lane select 4; v_div_fmas (VCC) 4; a VMEM
    instruction's SGPR address 5
  * a VALU writing EXEC (v_cmpx): an MFMA 4; v_readlane / v_readfirstlane / v_writelane 4; v_permlane*_swap 4;
    DPP 5
  * a transcendental: a non-transcendental VALU reads its result 1
  * a VMEM store of more than 8 bytes: a VALU overwriting its data VGPRs 2
  * s_setreg: s_getreg or s_setreg of the same hardware register 2
LLVM looks back at most 19 wait states for an MFMA's writer, so a 20-state rule is met by llc once 19 independent
instructions separate the two; the table keeps 20, what llc inserts when fewer do.
"""
import dataclasses

# Passes of each MFMA our kernels may use, as LLVM 22's gfx950 scheduling model gives them (its hazard rules are
# written in passes). An MFMA outside this table is refused by the lint rather than guessed.
PASSES = {
    "v_mfma_f32_16x16x32_bf16": 4,
    "v_mfma_f32_16x16x32_f16": 4,
    "v_mfma_f32_32x32x16_bf16": 8,
    "v_mfma_f32_32x32x16_f16": 8,
    "v_mfma_f32_16x16x128_f8f6f4": 8,
    "v_mfma_scale_f32_16x16x128_f8f6f4": 8,
    "v_mfma_f32_32x32x64_f8f6f4": 16,
    "v_mfma_scale_f32_32x32x64_f8f6f4": 16,
}

# Consumer relations to an MFMA's result
RESULT_READ = "valu_read"          # a VALU (v_accvgpr_read, v_permlane*_swap too) reads the result
RESULT_MEM_READ = "mem_read"       # a VMEM / DS instruction reads it (address or store data)
RESULT_WRITE = "write"             # a VALU or a load overwrites it
SRC_AB = "mfma_src_ab"             # an MFMA reads it as A or B
SRC_C_OVERLAP = "mfma_src_c_overlap"  # an MFMA reads it as C, overlapping but not equal to its own result
SRC_C_SAME = "mfma_src_c_same"     # an MFMA accumulates into exactly these registers
SRC_C_WAR = "src_c_overwrite"      # (producer: the MFMA's C operand) a VALU or a load overwrites it


def _result_states(passes):
    return passes + 4


def _src_c_overlap_states(passes):
    return passes + 2


_SRC_C_WAR_STATES = {4: 3, 8: 7, 16: 15}


@dataclasses.dataclass(frozen=True)
class Rule:
    producer: str     # an MFMA mnemonic, or one of the classes below
    consumer: str     # the relation of the consumer to what the producer wrote (or read, for SRC_C_WAR)
    wait_states: int


# Producer classes besides the MFMAs
VALU_VGPR = "valu_vgpr"            # a VALU writes a VGPR
VALU_SGPR = "valu_sgpr"            # a VALU writes an SGPR or VCC
VALU_EXEC = "valu_exec"            # a VALU writes EXEC (v_cmpx)
TRANS = "trans"                    # a transcendental writes a VGPR
WIDE_STORE = "wide_store"          # a VMEM store of more than 8 bytes, its data VGPRs
SETREG = "setreg"                  # s_setreg of a hardware register

OTHER_RULES = [
    Rule(VALU_VGPR, "mfma_read", 2),
    Rule(VALU_VGPR, "permlane_read", 2),
    Rule(VALU_VGPR, "dpp_read", 2),
    Rule(VALU_VGPR, "readlane_read", 1),
    Rule(VALU_SGPR, "valu_read", 2),         # named, or the implicit VCC of an e32 form
    Rule(VALU_SGPR, "readlane_lane_select", 4),
    Rule(VALU_SGPR, "div_fmas_vcc", 4),
    Rule(VALU_SGPR, "vmem_sgpr_read", 5),
    Rule(VALU_EXEC, "mfma", 4),
    Rule(VALU_EXEC, "readlane", 4),
    Rule(VALU_EXEC, "permlane", 4),
    Rule(VALU_EXEC, "dpp", 5),
    Rule(TRANS, "valu_read", 1),
    Rule(WIDE_STORE, "valu_write", 2),
    Rule(SETREG, "same_hwreg", 2),
]

RULES = [Rule(m, rel, n) for m, p in PASSES.items() for rel, n in (
    (RESULT_READ, _result_states(p)), (RESULT_MEM_READ, _result_states(p)), (RESULT_WRITE, _result_states(p)),
    (SRC_AB, _result_states(p)), (SRC_C_OVERLAP, _src_c_overlap_states(p)), (SRC_C_SAME, 0),
    (SRC_C_WAR, _SRC_C_WAR_STATES[p]))] + OTHER_RULES

_BY_KEY = {(r.producer, r.consumer): r.wait_states for r in RULES}
assert len(_BY_KEY) == len(RULES), "one row per (producer, consumer)"


def wait_states(producer, consumer):
    """The wait states `consumer` needs after `producer` (KeyError for a pair the table does not know)."""
    return _BY_KEY[(producer, consumer)]


def mfma_passes(mnemonic):
    """Passes of an MFMA mnemonic (the disassembler's, without an _e64 suffix), or ValueError when unknown."""
    name = mnemonic.removesuffix("_e64")
    if name not in PASSES:
        raise ValueError(f"{mnemonic}: an MFMA the hazard table has no pass count for (tools/gfx950_hazards.py)")
    return PASSES[name]
