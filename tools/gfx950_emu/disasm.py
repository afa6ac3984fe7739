"""Disassemble a gfx950 code object with llvm-objdump-22 and parse its instruction stream: the
test oracle of the decoder (decode.py), which is what the emulator executes.

One Instruction per line `\\tmnemonic operands // ADDR: HEXWORDS`, grouped by the symbol
(`0000000000001300 <name>:`) they follow. Branch targets are resolved from the branch's
own byte address and its signed 16-bit word offset (target = addr + 4 + 4 * simm16),
or, where objdump prints a symbol name for the target (code objects that keep local
label symbols, e.g. `s_branch label_006D`), from that symbol's address; then mapped to
an instruction index, so a branch into the middle of an instruction or outside its
kernel is an error. Symbols named in `labels` continue the function they appear in.
"""
import re
import shutil
import subprocess

from .errors import EmulatorError
from .instruction import Instruction, is_branch, make_instruction  # noqa: F401  (Instruction: re-export)

OBJDUMP = "llvm-objdump-22"
_SYMBOL_RE = re.compile(r"^([0-9a-fA-F]+) <([^>]+)>:$")
_INSN_RE = re.compile(r"^\s+(\S+)(.*?)\s*// ([0-9A-Fa-f]+): ([0-9A-Fa-f ]+?)\s*(<.*>)?$")


def run_objdump(path: str) -> str:
    """The text `llvm-objdump-22 -d --mcpu=gfx950 path` prints; EmulatorError if it fails."""
    if shutil.which(OBJDUMP) is None:
        raise EmulatorError(f"{OBJDUMP} not found on PATH")
    proc = subprocess.run([OBJDUMP, "-d", "--mcpu=gfx950", path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise EmulatorError(f"{OBJDUMP} failed on {path}: {proc.stderr.strip()}")
    return proc.stdout


def parse_instruction(line: str):
    """One objdump line -> Instruction, or None if the line is not an instruction."""
    m = _INSN_RE.match(line)
    if not m:
        return None
    mnemonic, operand_text, addr, words = m.group(1), m.group(2).strip(), m.group(3), m.group(4)
    return make_instruction(int(addr, 16), 4 * len(words.split()), mnemonic, operand_text)


def parse_disassembly(text: str, labels=frozenset()) -> dict:
    """objdump text -> {symbol name: list of Instruction}, branch targets resolved.
    `labels`: symbol names that mark branch targets inside a function, not functions."""
    functions, current, label_addrs = {}, None, {}
    for line in text.splitlines():
        sm = _SYMBOL_RE.match(line.strip())
        if sm and sm.group(2) in labels:
            label_addrs[sm.group(2)] = int(sm.group(1), 16)
            continue
        if sm:
            current = functions.setdefault(sm.group(2), [])
            continue
        ins = parse_instruction(line)
        if ins is not None and current is not None:
            current.append(ins)
    for instructions in functions.values():
        _resolve_branches(instructions, label_addrs)
    return functions


def _resolve_branches(instructions, label_addrs):
    index_of = {ins.addr: i for i, ins in enumerate(instructions)}
    for ins in instructions:
        if not is_branch(ins.mnemonic):
            continue
        target = ins.raw.split()[0]
        if target in label_addrs:
            dest = label_addrs[target]
        else:
            simm = int(target, 0)
            simm = simm - 0x10000 if simm >= 0x8000 else simm
            dest = ins.addr + 4 + 4 * simm
        if dest not in index_of:
            raise EmulatorError(f"branch target 0x{dest:x} of '{ins.text}' at 0x{ins.addr:x}"
                                " is not an instruction of this function")
        ins.target = index_of[dest]
