"""Operand fields -> LLVM's printed operand syntax (CDNA4 ISA, "Instruction Operand Fields").

The 9-bit source code of VOP/VOP3 (and the 8-bit one of SOP*) is one number space: SGPRs 0-101,
named scalar registers, trap temporaries, integer and float inline constants, a trailing 32-bit
literal (255), and VGPRs at 256 + n. A register range prints as `v[4:7]`, one register as `v5`.
"""
from .errors import EmulatorError
from .opcodes import OPCODES

LITERAL = 255
VGPR_BASE = 256
_SGPR_COUNT = 102
_TTMP_FIRST, _TTMP_LAST = 108, 123
_INLINE_INT_ZERO, _INLINE_INT_MAX, _INLINE_INT_MIN = 128, 192, 208
_INLINE_FLOAT = {240: "0.5", 241: "-0.5", 242: "1.0", 243: "-1.0", 244: "2.0", 245: "-2.0",
                 246: "4.0", 247: "-4.0", 248: "0.15915494"}
_NAMED_32 = {102: "flat_scratch_lo", 103: "flat_scratch_hi", 104: "xnack_mask_lo",
             105: "xnack_mask_hi", 106: "vcc_lo", 107: "vcc_hi", 124: "m0", 126: "exec_lo",
             127: "exec_hi", 235: "src_shared_base", 236: "src_shared_limit",
             237: "src_private_base", 238: "src_private_limit", 239: "src_pops_exiting_wave_id",
             251: "src_vccz", 252: "src_execz", 253: "src_scc", 254: "src_lds_direct"}
_NAMED_64 = {102: "flat_scratch", 104: "xnack_mask", 106: "vcc", 126: "exec"}


def reg(cls: str, first: int, width: int) -> str:
    """`v5`, `a[0:3]`, `s[4:5]`."""
    return f"{cls}{first}" if width == 1 else f"{cls}[{first}:{first + width - 1}]"


def scalar(code: int, width: int) -> str:
    """An SGPR-class operand code (0-127) of `width` dwords."""
    if code < _SGPR_COUNT:
        return reg("s", code, width)
    if _TTMP_FIRST <= code <= _TTMP_LAST:
        return reg("ttmp", code - _TTMP_FIRST, width)
    names = _NAMED_64 if width == 2 else _NAMED_32
    if code in names and width <= 2:
        return names[code]
    raise EmulatorError(f"scalar register code {code} x{width} has no name")


def source(code: int, width: int, literal=None, vector_class: str = "v") -> str:
    """A 9-bit (or 8-bit scalar) source code; `literal`: the dword after the instruction."""
    if code >= VGPR_BASE:
        return reg(vector_class, code - VGPR_BASE, width)
    if code < _INLINE_INT_ZERO:
        return scalar(code, width)
    if code <= _INLINE_INT_MAX:
        return str(code - _INLINE_INT_ZERO)
    if code <= _INLINE_INT_MIN:
        return str(_INLINE_INT_MAX - code)
    if code in _INLINE_FLOAT:
        return _INLINE_FLOAT[code]
    if code == LITERAL:
        if literal is None:
            raise EmulatorError("a literal operand without its dword")
        return f"0x{literal:x}"
    if code in _NAMED_32:
        return _NAMED_32[code]
    raise EmulatorError(f"source operand code {code} is reserved")


def with_modifiers(text: str, neg: bool, abs_: bool) -> str:
    """The VOP3/DPP/SDWA source modifiers as LLVM prints them: `-|v2|`."""
    if abs_:
        text = f"|{text}|"
    return f"-{text}" if neg else text


def bit_list(bits: int, count: int) -> str:
    """`op_sel`-style lists: bit i of `bits` is element i."""
    return "[" + ",".join(str((bits >> i) & 1) for i in range(count)) + "]"


def lookup(family: str, op: int):
    """(mnemonic, parsed layout) of `op` in `family`; EmulatorError if gfx950 has no such opcode."""
    entry = OPCODES[family].get(op)
    if entry is None:
        raise EmulatorError(f"{family} opcode 0x{op:x} is not a gfx950 instruction")
    return entry[0], parse_layout(entry[1])


def parse_layout(layout: str):
    """opcodes.py's layout string -> [(field, class, width)] with `('=', text, 0)` for fixed text."""
    slots = []
    for item in layout.split():
        if item.startswith("="):
            slots.append(("=", item[1:], 0))
        else:
            name, cls, width = item.split(".")
            slots.append((name, cls, int(width)))
    return slots
