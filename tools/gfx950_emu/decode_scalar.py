"""Decode the scalar encodings: SOP2, SOPK, SOP1, SOPC, SOPP and SMEM (CDNA4 ISA, "Scalar ALU" and
"Scalar Memory" microcode formats).

Each decoder takes the instruction's words (`w[0]` first, the rest following it in .text) and returns
(printed mnemonic, operand tokens, modifier tokens, size in dwords).
"""
from .decode_operands import LITERAL, lookup, scalar, source
from .errors import EmulatorError
from .opcodes import OPCODES

_WAITCNT_MAX = {"vmcnt": 63, "expcnt": 7, "lgkmcnt": 15}
_GPR_IDX_MODES = ("SRC0", "SRC1", "SRC2", "DST")


def _sop(family, op, w, fields):
    """SOP1/SOP2/SOPC: `fields` maps layout fields to operand codes; code 255 reads the next dword."""
    mnemonic, slots = lookup(family, op)
    literal = w[1] if LITERAL in fields.values() else None
    tokens = [text if name == "=" else source(fields[name], width, literal) for name, text, width in slots]
    return mnemonic, tokens, [], 1 + (literal is not None)


def decode_sop2(w):
    return _sop("SOP2", (w[0] >> 23) & 0x7F, w,
                {"vdst": (w[0] >> 16) & 0x7F, "src0": w[0] & 0xFF, "src1": (w[0] >> 8) & 0xFF})


def decode_sop1(w):
    return _sop("SOP1", (w[0] >> 8) & 0xFF, w, {"vdst": (w[0] >> 16) & 0x7F, "src0": w[0] & 0xFF})


def decode_sopc(w):
    op, s0, s1 = (w[0] >> 16) & 0x7F, w[0] & 0xFF, (w[0] >> 8) & 0xFF
    if lookup("SOPC", op)[0] == "s_set_gpr_idx_on":       # src1 is a mask of the indexed operands
        modes = ",".join(m for i, m in enumerate(_GPR_IDX_MODES) if (s1 >> i) & 1)
        return "s_set_gpr_idx_on", [source(s0, 1, w[1] if s0 == LITERAL else None), f"gpr_idx({modes})"], [], \
            1 + (s0 == LITERAL)
    return _sop("SOPC", op, w, {"src0": s0, "src1": s1})


def decode_sopk(w):
    mnemonic, slots = lookup("SOPK", (w[0] >> 23) & 0x1F)
    simm16 = w[0] & 0xFFFF
    if any(name == "=" and text.startswith("hwreg") for name, text, _ in slots):
        raise EmulatorError(f"{mnemonic}: hwreg operands are not decoded")
    tokens = [scalar((w[0] >> 16) & 0x7F, width) if name == "vdst" else f"0x{simm16:x}"
              for name, _, width in slots]
    return mnemonic, tokens, [], 1


def waitcnt_text(simm16: int) -> str:
    """s_waitcnt's counters as LLVM prints them: the ones below their maximum, or all three."""
    counts = {"vmcnt": (simm16 & 0xF) | ((simm16 >> 14) & 3) << 4,
              "expcnt": (simm16 >> 4) & 7, "lgkmcnt": (simm16 >> 8) & 0xF}
    shown = [k for k, v in counts.items() if v != _WAITCNT_MAX[k]] or list(counts)
    return " ".join(f"{k}({counts[k]})" for k in shown)


def decode_sopp(w):
    mnemonic, layout = OPCODES["SOPP"].get((w[0] >> 16) & 0x7F, (None, None))
    if mnemonic is None:
        raise EmulatorError(f"SOPP opcode 0x{(w[0] >> 16) & 0x7F:x} is not a gfx950 instruction")
    simm16 = w[0] & 0xFFFF
    if mnemonic == "s_waitcnt":
        return mnemonic, [waitcnt_text(simm16)], [], 1
    if layout == "simm16" or (layout == "simm16?" and simm16):
        return mnemonic, [str(simm16)], [], 1
    if layout in ("", "simm16?"):
        return mnemonic, [], [], 1
    raise EmulatorError(f"{mnemonic}: its operand ({layout}) is not decoded")


def decode_smem(w):
    """SMEM: sbase (SGPR pair/quad, stored /2), sdata, and an immediate offset and/or SGPR offset."""
    mnemonic, slots = lookup("SMEM", (w[0] >> 18) & 0xFF)
    sbase, sdata = (w[0] & 0x3F) * 2, (w[0] >> 6) & 0x7F
    soe, glc, imm = (w[0] >> 14) & 1, (w[0] >> 16) & 1, (w[0] >> 17) & 1
    offset = w[1] & 0x1FFFFF
    offset -= (offset & 0x100000) << 1
    tokens, mods = [], []
    for name, _, width in slots:
        if name in ("sdata", "sdst", "vdst"):
            tokens.append(scalar(sdata, width))
        elif name == "sbase":
            tokens.append(scalar(sbase, width))
    if slots and slots[-1][0] == "=":         # the offset operand
        hex_offset = f"-0x{-offset:x}" if offset < 0 else f"0x{offset:x}"
        if imm and soe:
            tokens.append(scalar(w[1] >> 25, 1))
            mods.append(f"offset:{hex_offset}")
        elif imm:
            tokens.append(hex_offset)
        else:
            tokens.append(scalar(w[1] & 0x7F, 1))
    if glc:
        mods.append("glc")
    return mnemonic, tokens, mods, 2
