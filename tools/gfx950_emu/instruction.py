"""The Instruction the emulator executes, and how one is built from printed operand text.

Both instruction sources build Instructions here: the decoder (decode.py, from the code object's words)
and the llvm-objdump-22 text parser (disasm.py, kept as the decoder's test oracle). Each hands over the
mnemonic, the operand tokens and the modifier tokens in LLVM's printed syntax; operands.py says what a
token means, so an Instruction from either source means the same thing when their texts agree.
"""
from dataclasses import dataclass, field

from .errors import EmulatorError
from .operands import parse_operands

# Instructions whose operands are not a comma list of operands: their text stays in `raw`.
RAW_TEXT_MNEMONICS = ("s_waitcnt", "s_set_gpr_idx_on", "s_set_gpr_idx_mode", "s_sendmsg",
                      "s_sendmsghalt", "s_getreg_b32", "s_setreg_b32", "s_setreg_imm32_b32")
BRANCH_PREFIXES = ("s_branch", "s_cbranch_")


@dataclass
class Instruction:
    """One decoded instruction.

    addr: byte address; size: bytes; mnemonic: as printed minus a `_e32`/`_e64` suffix
    (the operands either form needs are printed, e.g. `vcc` for VOPC/VOP2 carries);
    text: the full printed text; ops/mods: parsed operands and modifiers; raw: operand
    text for instructions whose operands are not comma lists (s_waitcnt) and for branches;
    target: the instruction index a branch jumps to.
    """
    addr: int
    size: int
    mnemonic: str
    text: str
    ops: list = field(default_factory=list)
    mods: dict = field(default_factory=dict)
    raw: str = ""
    target: int = -1


def base_mnemonic(m: str) -> str:
    """`v_add_f32_e32` -> `v_add_f32`: the encoding suffix does not change the semantics."""
    for suffix in ("_e32", "_e64"):
        if m.endswith(suffix):
            return m[: -len(suffix)]
    return m


def is_branch(mnemonic: str) -> bool:
    """s_branch and the s_cbranch_* family (their operand is a word offset)."""
    return mnemonic.startswith(BRANCH_PREFIXES)


def make_instruction(addr: int, size: int, printed_mnemonic: str, operand_text: str) -> Instruction:
    """An Instruction from its printed mnemonic and operand text (operands, then modifiers)."""
    text = f"{printed_mnemonic} {operand_text}".strip()
    ins = Instruction(addr, size, base_mnemonic(printed_mnemonic), text)
    try:
        if ins.mnemonic in RAW_TEXT_MNEMONICS or is_branch(ins.mnemonic):
            ins.raw = operand_text
        else:
            ins.ops, ins.mods = parse_operands(operand_text)
    except EmulatorError as e:
        raise EmulatorError(f"{e} in '{text}' at 0x{addr:x}") from None
    return ins
