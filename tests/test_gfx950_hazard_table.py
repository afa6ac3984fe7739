"""The wait-state table of tools/gfx950_hazards.py against LLVM 22's gfx950 hazard recognizer: for every row, small
MIR functions (the producer, N wait states of s_nop, the consumer) go through `llc-22 -run-pass=post-RA-hazard-rec`,
and the wait states llc inserts (S_NOP k counting k + 1) must be the row's count less N: all of it after no filler,
one after count - 1, none after count."""
import re
import subprocess
import sys
import pathlib

import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gfx950_hazards as hz  # noqa: E402

pytestmark = markers.needs_llc22
LLVM_LOOKBACK = 19  # wait states llc searches back for an MFMA's writer (checkMAIVALUHazards' MaxWaitStates)


def regs(first, count, kind="vgpr"):
    return "$" + "_".join(f"{kind}{first + i}" for i in range(count))


def _mfma(mnemonic, dst=0, a=16, b=24, c=None, kind="vgpr"):
    """A MIR MFMA writing `kind` registers from `dst` (A at VGPR a, B at b, C at VGPR c or 0). MIR opcodes: the
    mnemonic in capitals, f8f6f4 forms with e4m3 operands (f8_f8), vgprcd for a VGPR result, mac when C is D."""
    hz.mfma_passes(mnemonic)  # one the table knows
    dst_count = 16 if "32x32" in mnemonic else 4
    base = mnemonic.upper().replace("F8F6F4", "F8F6F4_f8_f8")
    ab_count = 8 if "f8f6f4" in mnemonic else 4
    if c is None and "scale" in mnemonic:
        c = 40
    mac = c == dst and kind == "vgpr" and dst_count == 16  # the 16x16 forms have no mac opcode (nor early-clobber)
    opcode = base + ("_mac" if mac else "") + ("_vgprcd_e64" if kind == "vgpr" else "_e64")
    src_c = regs(c, dst_count, kind) if c is not None else "0"
    if "scale" in mnemonic:
        tail = "0, 0, $vgpr32, $vgpr33, 0, 0"
    elif "f8f6f4" in mnemonic:
        tail = "0, 0"
    else:
        tail = "0, 0, 0"
    return (f"{regs(dst, dst_count, kind)} = {opcode} {regs(a, ab_count)}, {regs(b, ab_count)}, {src_c}, {tail}, "
            "implicit $mode, implicit $exec")


VALU_READ_V1 = "$vgpr60 = V_ADD_F32_e32 $vgpr1, $vgpr1, implicit $mode, implicit $exec"
CMPX = "$exec = V_CMPX_EQ_I32_e64 $vgpr60, $vgpr61, implicit $exec"
PERMLANE = "$vgpr1, $vgpr2 = V_PERMLANE32_SWAP_B32_e32 $vgpr1, $vgpr2, implicit $exec"
DPP = "$vgpr3 = V_MOV_B32_dpp $vgpr3, $vgpr1, 1, 15, 15, 0, implicit $exec"
MOV_V1 = "$vgpr1 = V_MOV_B32_e32 $vgpr60, implicit $exec"


def _mfma_probes(m, relation):
    """(producer lines, consumer lines) pairs that exercise one MFMA row."""
    wide = 16 if "32x32" in m else 4
    if relation == hz.RESULT_READ:
        return [([_mfma(m)], [VALU_READ_V1]),
                ([_mfma(m)], ["$vgpr1, $vgpr61 = V_PERMLANE32_SWAP_B32_e32 $vgpr1, $vgpr61, implicit $exec"]),
                ([_mfma(m, kind="agpr")], ["$vgpr60 = V_ACCVGPR_READ_B32_e64 $agpr1, implicit $exec"])]
    if relation == hz.RESULT_MEM_READ:
        return [([_mfma(m)], ["GLOBAL_STORE_DWORDX4 $vgpr60_vgpr61, $vgpr0_vgpr1_vgpr2_vgpr3, 0, 0, implicit $exec"]),
                ([_mfma(m)], ["DS_WRITE_B128_gfx9 $vgpr60, $vgpr0_vgpr1_vgpr2_vgpr3, 0, 0, implicit $exec"]),
                ([_mfma(m)], ["$vgpr60 = DS_READ_B32_gfx9 $vgpr1, 0, 0, implicit $exec"])]
    if relation == hz.RESULT_WRITE:
        return [([_mfma(m)], ["$vgpr1 = V_MOV_B32_e32 $vgpr60, implicit $exec"]),
                ([_mfma(m)], ["$vgpr0_vgpr1_vgpr2_vgpr3 = DS_READ_B128_gfx9 $vgpr60, 0, 0, implicit $exec"])]
    if relation == hz.SRC_AB:
        return [([_mfma(m)], [_mfma(m, dst=64, a=0)]), ([_mfma(m)], [_mfma(m, dst=64, b=0)])]
    if relation == hz.SRC_C_OVERLAP:
        return [([_mfma(m)], [_mfma(m, dst=64, c=wide // 2)])]  # half overlapping (registers stay even-aligned)
    if relation == hz.SRC_C_SAME:
        return [([_mfma(m)], [_mfma(m, c=0)])]
    if relation == hz.SRC_C_WAR:
        return [([_mfma(m, c=40)], ["$vgpr41 = V_MOV_B32_e32 $vgpr60, implicit $exec"]),
                ([_mfma(m, c=40)], ["$vgpr40_vgpr41_vgpr42_vgpr43 = GLOBAL_LOAD_DWORDX4 $vgpr60_vgpr61, 0, 0, "
                                    "implicit $exec"])]
    raise KeyError(relation)


READFIRSTLANE_S5 = "$sgpr5 = V_READFIRSTLANE_B32 $vgpr60, implicit $exec"
OTHER_PROBES = {
    (hz.VALU_VGPR, "mfma_read"): [(["$vgpr17 = V_MOV_B32_e32 $vgpr60, implicit $exec"],
                                   [_mfma("v_mfma_f32_32x32x16_bf16")]),
                                 (["$vgpr41 = V_MOV_B32_e32 $vgpr60, implicit $exec"],
                                  [_mfma("v_mfma_scale_f32_32x32x64_f8f6f4")]),
                                 (["$vgpr32 = V_MOV_B32_e32 $vgpr60, implicit $exec"],
                                  [_mfma("v_mfma_scale_f32_32x32x64_f8f6f4")])],
    (hz.VALU_VGPR, "permlane_read"): [([MOV_V1], [PERMLANE]),
                                     (["$vgpr2 = V_MOV_B32_e32 $vgpr60, implicit $exec"], [PERMLANE])],
    (hz.VALU_VGPR, "dpp_read"): [([MOV_V1], [DPP])],
    (hz.VALU_VGPR, "readlane_read"): [([MOV_V1], ["$sgpr4 = V_READFIRSTLANE_B32 $vgpr1, implicit $exec"]),
                                     ([MOV_V1], ["$sgpr4 = V_READLANE_B32 $vgpr1, $sgpr6, implicit $exec"])],
    (hz.VALU_SGPR, "valu_read"): [
        ([READFIRSTLANE_S5], ["$vgpr3 = V_ADD_U32_e32 $sgpr5, $vgpr2, implicit $exec"]),
        (["$vcc = V_CMP_GT_U32_e64 $vgpr60, $vgpr61, implicit $exec"],
         ["$vgpr3 = V_CNDMASK_B32_e64 0, $vgpr1, 0, $vgpr2, $vcc, implicit $exec"]),
        (["V_CMP_GT_I32_e32 $vgpr60, $vgpr61, implicit-def $vcc, implicit $exec"],
         ["$vgpr3 = V_CNDMASK_B32_e32 $vgpr1, $vgpr2, implicit $vcc, implicit $exec"]),
        (["$vgpr1 = V_ADD_CO_U32_e32 $vgpr2, $vgpr3, implicit-def $vcc, implicit $exec"],
         ["$vgpr4 = V_ADDC_U32_e32 $vgpr5, $vgpr6, implicit-def $vcc, implicit $vcc, implicit $exec"])],
    (hz.VALU_SGPR, "readlane_lane_select"): [([READFIRSTLANE_S5],
                                              ["$sgpr4 = V_READLANE_B32 $vgpr1, $sgpr5, implicit $exec"])],
    (hz.VALU_SGPR, "div_fmas_vcc"): [(["$vcc = V_CMP_GT_U32_e64 $vgpr60, $vgpr61, implicit $exec"],
                                      ["$vgpr3 = V_DIV_FMAS_F32_e64 0, $vgpr1, 0, $vgpr2, 0, $vgpr4, 0, 0, "
                                       "implicit $mode, implicit $vcc, implicit $exec"])],
    (hz.VALU_SGPR, "vmem_sgpr_read"): [
        ([READFIRSTLANE_S5], ["$vgpr1 = GLOBAL_LOAD_DWORD_SADDR $sgpr4_sgpr5, $vgpr2, 0, 0, implicit $exec"]),
        ([READFIRSTLANE_S5], ["GLOBAL_STORE_DWORD_SADDR $vgpr2, $vgpr3, $sgpr4_sgpr5, 0, 0, implicit $exec"])],
    (hz.VALU_EXEC, "mfma"): [([CMPX], [_mfma("v_mfma_f32_32x32x64_f8f6f4")])],
    (hz.VALU_EXEC, "readlane"): [([CMPX], ["$sgpr4 = V_READFIRSTLANE_B32 $vgpr1, implicit $exec"]),
                                 ([CMPX], ["$sgpr4 = V_READLANE_B32 $vgpr1, $sgpr6, implicit $exec"])],
    (hz.VALU_EXEC, "permlane"): [([CMPX], [PERMLANE])],
    (hz.VALU_EXEC, "dpp"): [([CMPX], [DPP])],
    (hz.TRANS, "valu_read"): [(["$vgpr1 = V_EXP_F32_e32 $vgpr60, implicit $mode, implicit $exec"],
                               ["$vgpr2 = V_ADD_F32_e32 $vgpr1, $vgpr1, implicit $mode, implicit $exec"]),
                              (["$vgpr1 = V_RCP_F32_e32 $vgpr60, implicit $mode, implicit $exec"],
                               ["$vgpr2 = V_MUL_F32_e32 $vgpr3, $vgpr1, implicit $mode, implicit $exec"])],
    (hz.WIDE_STORE, "valu_write"): [(["GLOBAL_STORE_DWORDX4 $vgpr60_vgpr61, $vgpr0_vgpr1_vgpr2_vgpr3, 0, 0, "
                                      "implicit $exec"], [MOV_V1])],
    (hz.SETREG, "same_hwreg"): [(["S_SETREG_B32 $sgpr0, 2177, implicit-def $mode, implicit $mode"],
                                 ["$sgpr1 = S_GETREG_B32 2177, implicit $mode"]),
                                (["S_SETREG_B32 $sgpr0, 2177, implicit-def $mode, implicit $mode"],
                                 ["S_SETREG_B32 $sgpr1, 2177, implicit-def $mode, implicit $mode"])],
}

# Pairs the table leaves out because LLVM requires nothing there (the lint must not ask for them either)
NO_HAZARD_PROBES = {
    "trans read by a trans": (["$vgpr1 = V_EXP_F32_e32 $vgpr60, implicit $mode, implicit $exec"],
                              ["$vgpr2 = V_EXP_F32_e32 $vgpr1, implicit $mode, implicit $exec"]),
    "VALU-written SGPR read by a SALU": ([READFIRSTLANE_S5], ["$sgpr6 = S_ADD_U32 $sgpr5, 1, implicit-def $scc"]),
    "VALU-written VCC read by s_cmp": (["V_CMP_GT_I32_e32 $vgpr60, $vgpr61, implicit-def $vcc, implicit $exec"],
                                       ["S_CMP_EQ_U64 $vcc, 0, implicit-def $scc"]),
    "SALU write of EXEC before an MFMA": (["$sgpr10_sgpr11 = S_AND_SAVEEXEC_B64 $sgpr12_sgpr13, implicit-def $exec, "
                                           "implicit-def $scc, implicit $exec"], [_mfma("v_mfma_f32_32x32x16_bf16")]),
    "an MFMA's A overwritten by a VALU": ([_mfma("v_mfma_f32_32x32x64_f8f6f4")], [
        "$vgpr16 = V_MOV_B32_e32 $vgpr60, implicit $exec"]),
    "LDS store data overwritten by a VALU": (["DS_WRITE_B128_gfx9 $vgpr60, $vgpr0_vgpr1_vgpr2_vgpr3, 0, 0, "
                                             "implicit $exec"], [MOV_V1]),
    "8-byte store data overwritten by a VALU": (["GLOBAL_STORE_DWORDX2 $vgpr60_vgpr61, $vgpr0_vgpr1, 0, 0, "
                                                "implicit $exec"], [MOV_V1]),
}


def probes(rule):
    if rule.producer in hz.PASSES:
        return _mfma_probes(rule.producer, rule.consumer)
    return OTHER_PROBES[(rule.producer, rule.consumer)]


def inserted_wait_states(producer, consumer, fills):
    """Wait states llc-22 inserts between producer and consumer after each count of s_nop wait states in `fills`."""
    functions = []
    for fill in fills:
        lines = producer + ([f"S_NOP {fill - 1}"] if fill else []) + consumer + ["S_ENDPGM 0"]
        body = "\n".join("    " + line for line in lines)
        functions.append(f"---\nname: f{fill}\nbody: |\n  bb.0:\n{body}\n...\n")
    out = subprocess.run(["llc-22", "-march=amdgcn", "-mcpu=gfx950", "-run-pass=post-RA-hazard-rec", "-x", "mir",
                          "-o", "-", "-"], input="".join(functions), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[:4000]
    found = {}
    for fill, text in zip(fills, re.split(r"^name:\s+f\d+\s*$", out.stdout, flags=re.M)[1:]):
        found[fill] = sum(int(n) + 1 for n in re.findall(r"\bS_NOP (\d+)", text)) - fill
    return found


def _fills(count):
    """No filler, count - 1 (the last wait state missing), count; inside llc's look-back when count passes it."""
    short = min(count - 1, LLVM_LOOKBACK - 1)
    return sorted({0, max(short, 0), count})


@pytest.mark.parametrize("rule", hz.RULES, ids=lambda r: f"{r.producer}-{r.consumer}")
def test_table_row_matches_llc(rule):
    for producer, consumer in probes(rule):
        fills = _fills(rule.wait_states)
        want = {f: max(rule.wait_states - f, 0) for f in fills}
        assert inserted_wait_states(producer, consumer, fills) == want, (producer, consumer)


@pytest.mark.parametrize("name", NO_HAZARD_PROBES)
def test_llc_asks_nothing_for(name):
    producer, consumer = NO_HAZARD_PROBES[name]
    assert inserted_wait_states(producer, consumer, [0]) == {0: 0}


def test_every_other_row_has_a_probe():
    assert {(r.producer, r.consumer) for r in hz.OTHER_RULES} == set(OTHER_PROBES)
