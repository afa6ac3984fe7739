"""Hazard lint for hand-written gfx950 assembly: the assembler inserts no wait states, so a VALU (or memory
instruction) that reads an MFMA's result too early, an MFMA that reads a VGPR a VALU just wrote, or a VALU that
reads a transcendental's result right away, silently computes garbage on hardware while the functional emulator
gets it right.

The rules and their wait states are the table of tools/gfx950_hazards.py (LLVM 22's gfx950 hazard recognizer,
checked against llc-22 by tests/test_gfx950_hazard_table.py); this file only sorts each instruction into the
producers and consumers of that table. Wait states are the instructions issued between producer and consumer,
`s_nop N` counting N + 1. The scan follows program order; a forward branch also carries what is pending to its
target (the skipped path is the shorter one), and the body of each backward branch is scanned twice so that its
end meets its start. Usage: python tools/gfx950_lint.py build/gfx950/x.co -> exit 1 with one line per hazard.
"""
import dataclasses
import re
import subprocess
import sys

import gfx950_hazards as hz

TRANSCENDENTAL = ("v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_")
_DPP = re.compile(r"\b(?:quad_perm|row_\w+|wave_\w+|bank_mask|row_mask)\b")
_VREG = re.compile(r"\b([va])(?:\[(\d+):(\d+)\]|(\d+))(?!\w)")
_SREG = re.compile(r"\b(?:s\[(\d+):(\d+)\]|s(\d+)|(vcc|exec)(?:_lo|_hi)?)(?!\w)")
_LINE = re.compile(r"^\s+([a-z_0-9]+)\s*(.*?)\s*//\s*([0-9A-F]+):")
_BRANCH = re.compile(r"^s_(?:cbranch_\w+|branch)$")
# VOP3b: a second destination, the SGPR pair of a carry or a condition
_VOP3B = ("v_mad_u64_u32", "v_mad_i64_i32", "v_div_scale_", "v_add_co_u32_e64", "v_sub_co_u32_e64",
          "v_subrev_co_u32_e64", "v_addc_co_u32_e64", "v_subb_co_u32_e64", "v_subbrev_co_u32_e64")
_CARRY_E32 = ("v_add_co_u32_e32", "v_sub_co_u32_e32", "v_subrev_co_u32_e32", "v_addc_co_u32_e32",
              "v_subb_co_u32_e32", "v_subbrev_co_u32_e32")
_MEMORY = ("global_", "flat_", "buffer_", "scratch_", "ds_")


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


def _vregs(operand):
    found = set()
    for kind, lo, hi, single in _VREG.findall(operand):
        first, last = (int(lo), int(hi)) if lo else (int(single), int(single))
        found |= {f"{kind}{r}" for r in range(first, last + 1)}
    return found


def _sregs(operand):
    found = set()
    for lo, hi, single, special in _SREG.findall(operand):
        if special:
            found |= {f"{special}_lo", f"{special}_hi"}
        elif lo:
            found |= {f"s{r}" for r in range(int(lo), int(hi) + 1)}
        else:
            found.add(f"s{single}")
    return found


def _union(sets):
    return set().union(*sets) if sets else set()


@dataclasses.dataclass
class Access:
    """What one instruction reads and writes, sorted the way the hazard table asks."""
    kind: str                                         # mfma, valu, memory, salu
    vreads: set = dataclasses.field(default_factory=set)
    vwrites: set = dataclasses.field(default_factory=set)
    sreads: set = dataclasses.field(default_factory=set)
    swrites: set = dataclasses.field(default_factory=set)
    src_ab: set = dataclasses.field(default_factory=set)   # MFMA: A, B and the block scales
    src_c: set = dataclasses.field(default_factory=set)    # MFMA: C


def access(mnemonic, operands):
    parts = [p.strip() for p in re.sub(r"\s(?:op_sel\w*|cbsz|abid|blgp|offset\w*):\S+", "", operands).split(",")]
    parts = [p for p in parts if p]
    if mnemonic.startswith("v_mfma"):
        dst, a, b, c = (parts + ["", "", "", ""])[:4]
        scales = _union([_vregs(p) for p in parts[4:]])
        return Access("mfma", vwrites=_vregs(dst), src_ab=_vregs(a) | _vregs(b) | scales, src_c=_vregs(c),
                      sreads={"exec_lo", "exec_hi"})
    if mnemonic.startswith(_MEMORY):
        text = operands.split(" offset")[0]
        regs = [_vregs(p) for p in parts]
        loads = "load" in mnemonic or mnemonic.startswith(("ds_read", "ds_bpermute", "ds_permute", "ds_swizzle"))
        written = regs[0] if loads and regs else set()
        read = _union(regs[1:] if loads else regs)
        return Access("memory", vreads=read, vwrites=written, sreads=_sregs(text))
    if mnemonic.startswith("v_"):
        written_v, written_s, first_source = _vregs(parts[0]) if parts else set(), set(), 1
        if mnemonic.startswith(("v_cmp", "v_readfirstlane", "v_readlane")):
            written_v, written_s = set(), _sregs(parts[0])
            if mnemonic.startswith("v_cmpx"):
                written_s |= {"exec_lo", "exec_hi"}
        elif mnemonic.startswith(_CARRY_E32) or mnemonic.startswith(_VOP3B):
            written_s, first_source = _sregs(parts[1]), 2
        reads = parts[first_source:]
        vreads = _union([_vregs(p) for p in reads])
        if "mac" in mnemonic or "fmac" in mnemonic or mnemonic.startswith(("v_permlane", "v_writelane")):
            vreads |= written_v  # the accumulator, the swapped registers, the lanes kept
        if _DPP.search(operands):
            vreads |= written_v  # bound_ctrl:0 / masked rows keep the old value
        if mnemonic.startswith("v_permlane"):
            written_v |= vreads
        return Access("valu", vreads=vreads, vwrites=written_v, sreads=_union([_sregs(p) for p in reads]),
                      swrites=written_s)
    return Access("salu")


@dataclasses.dataclass(frozen=True)
class Pending:
    producer: str       # an MFMA mnemonic or a producer class of gfx950_hazards
    what: str           # "result" (what it wrote) or "src_c" (an MFMA's C, for the overwrite rule)
    regs: frozenset
    address: int
    mnemonic: str
    age: int            # wait states since the producer


_LONGEST = max(r.wait_states for r in hz.RULES)


def _hwreg(operands):
    m = re.search(r"hwreg\((\w+)", operands)
    return m.group(1) if m else operands


def _check(instruction, records):
    """Hazard messages of one instruction against the pending producers."""
    address, mnemonic, operands = instruction
    acc = access(mnemonic, operands)
    name = mnemonic.removesuffix("_e64").removesuffix("_e32")
    found = []

    def need(record, consumer, regs, what="result"):
        if record.what != what or not regs:
            return
        needed = hz.wait_states(record.producer, consumer)
        if record.age < needed:
            found.append(f"{address:#x} {mnemonic} ({consumer}: {sorted(regs)[0]}) after {record.age} of {needed} "
                         f"wait states from {record.mnemonic} at {record.address:#x}")

    is_trans = mnemonic.startswith(TRANSCENDENTAL)
    for r in records:
        mfma = r.producer in hz.PASSES
        if acc.kind == "mfma":
            if mfma:
                need(r, hz.SRC_AB, r.regs & acc.src_ab)
                if r.regs & acc.src_c:
                    need(r, hz.SRC_C_SAME if r.regs == acc.src_c else hz.SRC_C_OVERLAP, r.regs & acc.src_c)
            elif r.producer == hz.VALU_VGPR:
                need(r, "mfma_read", r.regs & (acc.src_ab | acc.src_c))
            elif r.producer == hz.VALU_EXEC:
                need(r, "mfma", r.regs)
        elif acc.kind == "memory":
            if mfma:
                need(r, hz.RESULT_MEM_READ, r.regs & acc.vreads)
                need(r, hz.RESULT_WRITE, r.regs & acc.vwrites)
                need(r, hz.SRC_C_WAR, r.regs & acc.vwrites, what="src_c")
            elif r.producer == hz.VALU_SGPR and not mnemonic.startswith("ds_"):
                need(r, "vmem_sgpr_read", r.regs & acc.sreads)
        elif acc.kind == "valu":
            if mfma:
                need(r, hz.RESULT_READ, r.regs & acc.vreads)
                need(r, hz.RESULT_WRITE, r.regs & acc.vwrites)
                need(r, hz.SRC_C_WAR, r.regs & acc.vwrites, what="src_c")
            elif r.producer == hz.TRANS and not is_trans:
                need(r, "valu_read", r.regs & acc.vreads)
            elif r.producer == hz.WIDE_STORE:
                need(r, "valu_write", r.regs & acc.vwrites)
            elif r.producer == hz.VALU_SGPR:
                lane_select = name.startswith(("v_readlane", "v_writelane"))
                sources = acc.sreads
                if lane_select:
                    need(r, "readlane_lane_select", r.regs & sources)
                elif name.startswith("v_div_fmas"):
                    need(r, "div_fmas_vcc", r.regs & {"vcc_lo", "vcc_hi"})
                else:
                    need(r, "valu_read", r.regs & sources)
            elif r.producer == hz.VALU_EXEC:
                if name.startswith(("v_readlane", "v_readfirstlane", "v_writelane")):
                    need(r, "readlane", r.regs)
                elif name.startswith("v_permlane"):
                    need(r, "permlane", r.regs)
                elif _DPP.search(operands):
                    need(r, "dpp", r.regs)
            elif r.producer == hz.VALU_VGPR:
                if name.startswith("v_permlane"):
                    need(r, "permlane_read", r.regs & acc.vreads)
                elif name.startswith(("v_readlane", "v_readfirstlane")):
                    need(r, "readlane_read", r.regs & acc.vreads)
                elif _DPP.search(operands):
                    need(r, "dpp_read", r.regs & acc.vreads)
        elif mnemonic.startswith(("s_getreg", "s_setreg")) and r.producer == hz.SETREG:
            need(r, "same_hwreg", r.regs & {_hwreg(operands)})
    return found, acc


def _produced(instruction, acc):
    """The records an instruction leaves for those after it."""
    address, mnemonic, operands = instruction
    out = []

    def add(producer, regs, what="result"):
        if regs:
            out.append(Pending(producer, what, frozenset(regs), address, mnemonic, 0))

    if acc.kind == "mfma":
        name = mnemonic.removesuffix("_e64")
        hz.mfma_passes(name)
        add(name, acc.vwrites)
        if acc.src_c != acc.vwrites:
            add(name, acc.src_c, "src_c")
    elif acc.kind == "valu":
        add(hz.VALU_VGPR, acc.vwrites)
        add(hz.VALU_SGPR, acc.swrites - {"exec_lo", "exec_hi"})
        add(hz.VALU_EXEC, acc.swrites & {"exec_lo", "exec_hi"})
        if mnemonic.startswith(TRANSCENDENTAL):
            add(hz.TRANS, acc.vwrites)
    elif acc.kind == "memory" and "store" in mnemonic and not mnemonic.startswith("ds_"):
        parts = operands.split(",")
        data = _vregs(parts[0] if mnemonic.startswith("buffer_") else parts[1]) if len(parts) > 1 else set()
        if len(data) > 2:
            add(hz.WIDE_STORE, data)
    elif mnemonic.startswith("s_setreg"):
        add(hz.SETREG, {_hwreg(operands)})
    return out


def _wait_states(mnemonic, operands):
    if mnemonic == "s_nop":
        return int(operands.split()[0], 0) + 1
    return 1


def _branch_target(instructions, i):
    """Index of the branch's target, or None."""
    address, _, operands = instructions[i]
    simm16 = int(operands.split()[0], 0)
    simm16 -= 65536 if simm16 >= 32768 else 0
    target = address + 4 + 4 * simm16
    return next((j for j, (a, _, _) in enumerate(instructions) if a == target), None)


def _merge(records):
    """The latest (youngest) record of each producer instance."""
    best = {}
    for r in records:
        key = (r.producer, r.what, r.address)
        if key not in best or r.age < best[key].age:
            best[key] = r
    return list(best.values())


def lint(instructions):
    """Hazard messages for a list from disassemble()."""
    problems, records, carried, rescanned = [], [], {}, set()
    i = 0
    while i < len(instructions):
        records = _merge(records + carried.pop(i, []))
        address, mnemonic, operands = instructions[i]
        found, acc = _check(instructions[i], records)
        problems += [p for p in found if p not in problems]
        step = _wait_states(mnemonic, operands)
        records = [dataclasses.replace(r, age=r.age + step) for r in records if r.age + step < _LONGEST]
        records += _produced(instructions[i], acc)
        if _BRANCH.match(mnemonic):
            j = _branch_target(instructions, i)
            if j is not None and j > i:
                carried.setdefault(j, []).extend(records)
            elif j is not None and i not in rescanned:
                rescanned.add(i)  # the loop once more, entered with what its end leaves pending
                carried.setdefault(j, []).extend(records)
                records = []
                i = j
                continue
            if mnemonic == "s_branch":
                records = []  # nothing falls through
        i += 1
    return problems


def main():
    problems = [p for path in sys.argv[1:] for p in lint(disassemble(path))]
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
