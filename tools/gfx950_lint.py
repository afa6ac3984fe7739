"""Hazard lint for hand-written gfx950 assembly: the assembler inserts no wait states, so a VALU (or memory
instruction) that reads an MFMA's result too early, an MFMA that reads a VGPR a VALU just wrote, or a VALU that
reads a transcendental's result right away, silently computes garbage on hardware while the functional emulator
gets it right.

Rules (wait states = instructions issued in between, `s_nop N` counting N + 1; CDNA3/CDNA4 ISA guides,
"Dependency checks and required wait states" for XDL ops — the numbers below are the conservative ones the
kernels are written to, the largest the tables give per case):
  * an XDL MFMA with P passes writes VGPRs that no non-MFMA instruction may read, or overwrite, for
    P + 3 wait states (32x32 MFMAs: 16 passes -> 19; 16x16: 8 passes -> 11);
  * a VALU write of a VGPR that an MFMA then reads as A, B or C needs 2 wait states in between;
  * a VALU write of a VGPR that a v_permlane*_swap then reads (both its operands) needs 2 wait states (LLVM's
    GCNHazardRecognizer::checkPermlaneHazards);
  * a transcendental (v_exp, v_log, v_rcp, v_rsq, v_sqrt, v_sin, v_cos) whose result a non-transcendental VALU
    reads needs 1 wait state in between (the trans forwarding hazard of gfx940 and later: LLVM's
    GCNHazardRecognizer::checkVALUHazards, TransDefWaitstates = 1).
  * gfx940 and later (LLVM's hasVDecCoExecHazard, in GCNHazardRecognizer::checkVALUHazards): a VALU write of an SGPR
    (VCC too: a compare, a carry) that a VALU then names as an operand needs 2 wait states; a VALU write of a VGPR
    that v_readfirstlane / v_readlane then reads needs 1. (An e32 form's VCC is implicit, not named.)
A back-to-back MFMA that accumulates into the same registers (SrcC = previous vDst) needs none.
The scan is linear in program order, and the body of each backward branch is scanned twice so that its
end meets its start. Usage: python tools/gfx950_lint.py build/gfx950/x.co -> exit 1 with one line per hazard.
"""
import re
import subprocess
import sys

MFMA_PASSES = {"32x32": 16, "16x16": 8}
VALU_TO_MFMA_WAIT = 2  # also a VALU write to a v_permlane*_swap reading it
TRANS = ("v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_")
TRANS_TO_VALU_WAIT = 1
VALU_SGPR_TO_VALU_WAIT = 2
VALU_TO_READLANE_WAIT = 1
_SGPR = re.compile(r"\b(?:s\[(\d+):(\d+)\]|s(\d+)|(vcc))\b")
# VOP3b: a second destination, the SGPR pair of a carry or a condition
_VOP3B = ("v_mad_u64_u32", "v_mad_i64_i32", "v_div_scale_", "v_add_co_u32_e64", "v_sub_co_u32_e64",
          "v_subrev_co_u32_e64", "v_addc_co_u32_e64", "v_subb_co_u32_e64", "v_subbrev_co_u32_e64")
_CARRY_E32 = ("v_add_co_u32_e32", "v_sub_co_u32_e32", "v_subrev_co_u32_e32", "v_addc_co_u32_e32",
              "v_subb_co_u32_e32", "v_subbrev_co_u32_e32")


def _sgprs(operand):
    found = set()
    for lo, hi, single, vcc in _SGPR.findall(operand):
        if vcc:
            found |= {"vcc_lo", "vcc_hi"}
        elif lo:
            found |= {f"s{r}" for r in range(int(lo), int(hi) + 1)}
        else:
            found.add(f"s{single}")
    return found


def _sgpr_access(mnemonic, operands):
    """(SGPRs a VALU writes, SGPRs it names as sources)."""
    parts = [p.strip() for p in operands.split(",")]
    written, first_source = set(), 1
    if mnemonic.startswith(("v_cmp", "v_readfirstlane", "v_readlane")):
        written = {"vcc_lo", "vcc_hi"} if mnemonic.endswith("_e32") else _sgprs(parts[0])
    elif mnemonic.startswith(_CARRY_E32):
        written = {"vcc_lo", "vcc_hi"}
    elif mnemonic.startswith(_VOP3B):
        written, first_source = _sgprs(parts[1]), 2
    read = set().union(*(_sgprs(p) for p in parts[first_source:])) if len(parts) > first_source else set()
    if mnemonic.endswith("_e32"):
        read -= {"vcc_lo", "vcc_hi"}
    return written, read
_REG = re.compile(r"\b([vas])(?:\[(\d+):(\d+)\]|(\d+))")
_LINE = re.compile(r"^\s+([a-z_0-9]+)\s*(.*?)\s*//\s*([0-9A-F]+):")
_BRANCH = re.compile(r"^s_(?:cbranch_\w+|branch)$")


def disassemble(code_object):
    """[(address, mnemonic, operand text)] of every instruction, via llvm-objdump-22."""
    text = subprocess.run(["llvm-objdump-22", "-d", "--mcpu=gfx950", code_object], capture_output=True,
                          text=True, check=True).stdout
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((int(m.group(3), 16), m.group(1), m.group(2)))
    return out


def _vgprs(operand_text):
    """VGPR (and AGPR, as 'a') numbers named in an operand list, in order, as (kind, number) sets per operand."""
    regs = []
    for operand in operand_text.split(","):
        found = set()
        for kind, lo, hi, single in _REG.findall(operand):
            if kind == "s":
                continue
            first, last = (int(lo), int(hi)) if lo else (int(single), int(single))
            found |= {(kind, r) for r in range(first, last + 1)}
        regs.append(found)
    return regs


def _wait_states(mnemonic, operands):
    if mnemonic == "s_nop":
        return int(operands.split()[0], 0) + 1
    return 1


def _order(instructions):
    """Program order with each backward-branch loop body appended once more after its branch."""
    by_address = {a: i for i, (a, _, _) in enumerate(instructions)}
    order = []
    for i, (address, mnemonic, operands) in enumerate(instructions):
        order.append(i)
        if _BRANCH.match(mnemonic):
            simm16 = int(operands.split()[0], 0)
            simm16 -= 65536 if simm16 >= 32768 else 0
            start = by_address.get(address + 4 + 4 * simm16)
            if start is not None and start <= i:
                order.extend(range(start, i + 1))
    return order


def lint(instructions):
    """Hazard messages for a list from disassemble()."""
    problems = []
    pending = []  # (registers, wait states still needed, address of the MFMA)
    valu_written = []  # (registers, wait states still needed, address)
    trans_written = []  # (registers, wait states still needed, address)
    sgpr_written = []  # (SGPRs a VALU wrote, wait states still needed, address)
    vgpr_for_readlane = []  # (VGPRs a VALU wrote, wait states still needed, address)
    for i in _order(instructions):
        address, mnemonic, operands = instructions[i]
        regs = _vgprs(operands)
        is_mfma = mnemonic.startswith("v_mfma")
        produced = []  # (list, registers, wait states needed): counted from the next instruction on
        if is_mfma:
            dst, sources = regs[0], set().union(*regs[1:]) if len(regs) > 1 else set()
            for written, need, at in valu_written:
                if written & sources:
                    problems.append(f"{address:#x} {mnemonic} reads v{sorted(written & sources)[0][1]} written by "
                                    f"the VALU at {at:#x} with {VALU_TO_MFMA_WAIT - need} of {VALU_TO_MFMA_WAIT} "
                                    "wait states")
            pending = [(r, n, a) for r, n, a in pending if not (r == dst and r & sources)]
            shape = re.search(r"(32x32|16x16)", mnemonic).group(1)
            produced.append((pending, dst, MFMA_PASSES[shape] + 3))
        else:
            touched = set().union(*regs) if regs else set()
            for written, need, at in pending:
                if written & touched:
                    reg = sorted(written & touched)[0]
                    problems.append(f"{address:#x} {mnemonic} touches {reg[0]}{reg[1]}, written by the MFMA at "
                                    f"{at:#x}, {need} wait states too early")
            if mnemonic.startswith("v_permlane"):
                for written, need, at in valu_written:
                    if written & touched:
                        problems.append(f"{address:#x} {mnemonic} reads v{sorted(written & touched)[0][1]} written "
                                        f"by the VALU at {at:#x} with {VALU_TO_MFMA_WAIT - need} of "
                                        f"{VALU_TO_MFMA_WAIT} wait states")
            if mnemonic.startswith("v_") and not mnemonic.startswith(TRANS) and regs:
                # sources, and the accumulator a multiply-accumulate reads from its destination
                read = set().union(*regs[1:]) | (regs[0] if "mac" in mnemonic else set())
                for written, need, at in trans_written:
                    if written & read:
                        reg = sorted(written & read)[0]
                        problems.append(f"{address:#x} {mnemonic} reads {reg[0]}{reg[1]} written by the "
                                        f"transcendental at {at:#x} with {TRANS_TO_VALU_WAIT - need} of "
                                        f"{TRANS_TO_VALU_WAIT} wait states")
            if mnemonic.startswith(TRANS) and regs:
                produced.append((trans_written, regs[0], TRANS_TO_VALU_WAIT))
            if mnemonic.startswith("v_"):
                s_written, s_read = _sgpr_access(mnemonic, operands)
                for written, need, at in sgpr_written:
                    if written & s_read:
                        problems.append(f"{address:#x} {mnemonic} reads {sorted(written & s_read)[0]} written by the "
                                        f"VALU at {at:#x} with {VALU_SGPR_TO_VALU_WAIT - need} of "
                                        f"{VALU_SGPR_TO_VALU_WAIT} wait states")
                if mnemonic.startswith(("v_readfirstlane", "v_readlane")) and len(regs) > 1:
                    for written, need, at in vgpr_for_readlane:
                        if written & regs[1]:
                            problems.append(f"{address:#x} {mnemonic} reads v{sorted(written & regs[1])[0][1]} "
                                            f"written by the VALU at {at:#x} with {VALU_TO_READLANE_WAIT - need} of "
                                            f"{VALU_TO_READLANE_WAIT} wait states")
                if s_written:
                    produced.append((sgpr_written, s_written, VALU_SGPR_TO_VALU_WAIT))
                if regs and not mnemonic.startswith(("v_readfirstlane", "v_readlane", "v_cmp")):
                    produced.append((vgpr_for_readlane, regs[0], VALU_TO_READLANE_WAIT))
            if mnemonic.startswith("v_") and regs:
                produced.append((valu_written, regs[0], VALU_TO_MFMA_WAIT))
        # this instruction is a wait state for what came before it, not for what it produces itself
        step = _wait_states(mnemonic, operands)
        pending[:] = [(r, n - step, a) for r, n, a in pending if n - step > 0]
        valu_written[:] = [(r, n - step, a) for r, n, a in valu_written if n - step > 0]
        trans_written[:] = [(r, n - step, a) for r, n, a in trans_written if n - step > 0]
        sgpr_written[:] = [(r, n - step, a) for r, n, a in sgpr_written if n - step > 0]
        vgpr_for_readlane[:] = [(r, n - step, a) for r, n, a in vgpr_for_readlane if n - step > 0]
        for entries, registers, need in produced:
            entries.append((registers, need, address))
    return problems


def main():
    problems = [p for path in sys.argv[1:] for p in lint(disassemble(path))]
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
