"""Parse the operand text llvm-objdump-22 prints for gfx950 instructions.

An instruction's text is `mnemonic op0, op1, ... mod mod ...`: operands are comma
separated; modifiers (`offset:16`, `cbsz:1`, `op_sel:[1,0,0]`, `sc0`, ...) follow the
last operand, separated by spaces. Operand forms handled:

- registers `v5`, `v[4:7]`, `s3`, `s[0:1]`, `a0`, `a[0:15]`;
- named scalar registers `vcc`, `vcc_lo`, `vcc_hi`, `exec`, `exec_lo`, `exec_hi`, `m0`,
  mapped onto their hardware SGPR numbers (106-107, 126-127, 124) so one SGPR array holds
  them all; `scc` and `off` as markers;
- inline integer constants (-16..64) and 32-bit literals (`0x3e000000`, decimal);
- inline float constants (`0.5`, `-1.0`, `4.0`, `0.15915494`) as float32 bit patterns;
- the source modifiers `-x` (neg) and `|x|` (abs), also combined as `-|x|`.
"""
import re
import struct
from dataclasses import dataclass

from .errors import EmulatorError

SGPR_VCC = 106
SGPR_M0 = 124
SGPR_EXEC = 126
_NAMED_SGPR = {
    "vcc": (SGPR_VCC, 2), "vcc_lo": (SGPR_VCC, 1), "vcc_hi": (SGPR_VCC + 1, 1),
    "exec": (SGPR_EXEC, 2), "exec_lo": (SGPR_EXEC, 1), "exec_hi": (SGPR_EXEC + 1, 1),
    "m0": (SGPR_M0, 1),
}
_INLINE_FLOATS = {0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0}
_INV_2PI = "0.15915494"
_REG_RE = re.compile(r"^([vsa])(?:(\d+)|\[(\d+):(\d+)\])$")
_INT_RE = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")


@dataclass(frozen=True)
class Operand:
    """One parsed operand.

    kind: 'v', 'a', 's' (register range base..base+count-1), 'imm' (value: the 32-bit
    pattern as an unsigned int, or for 64-bit uses `value64`), 'scc', 'off'.
    neg/abs: VOP3 source modifiers.
    """
    kind: str
    base: int = 0
    count: int = 1
    value: int = 0
    value64: int = 0
    neg: bool = False
    abs: bool = False
    text: str = ""


def _float_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def parse_operand(text: str) -> Operand:
    """One operand token (modifiers included) -> Operand; EmulatorError if unknown."""
    t = text.strip()
    neg = absm = False
    if t.startswith("-") and (t[1:2] in "|vsa" or t[1:].startswith(("vcc", "exec", "m0"))):
        neg, t = True, t[1:]
    if t.startswith("|") and t.endswith("|"):
        absm, t = True, t[1:-1]
    m = _REG_RE.match(t)
    if m:
        base = int(m.group(2) if m.group(2) is not None else m.group(3))
        last = base if m.group(2) is not None else int(m.group(4))
        return Operand(m.group(1), base, last - base + 1, neg=neg, abs=absm, text=text)
    if t in _NAMED_SGPR:
        base, count = _NAMED_SGPR[t]
        return Operand("s", base, count, neg=neg, abs=absm, text=text)
    if t in ("scc", "off"):
        return Operand(t, text=text)
    if _INT_RE.match(t):
        v = int(t, 0)
        return Operand("imm", value=v & 0xFFFFFFFF, value64=v & 0xFFFFFFFFFFFFFFFF,
                       neg=neg, abs=absm, text=text)
    if t == _INV_2PI:
        return Operand("imm", value=0x3E22F983, value64=0x3E22F983, text=text)
    try:
        f = float(t)
    except ValueError:
        f = None
    if f is not None and f in _INLINE_FLOATS:
        bits = _float_bits(f)
        return Operand("imm", value=bits, value64=bits, neg=neg, abs=absm, text=text)
    raise EmulatorError(f"cannot parse operand '{text}'")


def _split_top_level(s: str, sep: str):
    """Split on `sep` outside [] brackets."""
    parts, depth, cur = [], 0, []
    for ch in s:
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _parse_modifier(tok: str, mods: dict):
    if ":" in tok:
        key, val = tok.split(":", 1)
        if val.startswith("["):
            mods[key] = tuple(int(x) for x in val[1:-1].split(","))
        else:
            try:
                mods[key] = int(val, 0)
            except ValueError:          # a named value: SDWA's `src0_sel:WORD_1`
                mods[key] = val
    else:
        mods[tok] = 1


def parse_operands(text: str):
    """Operand text -> (list of Operand, dict of modifiers).

    Modifiers with values map to ints, tuples (`op_sel:[1,0,0]` -> (1, 0, 0)) or names
    (`src0_sel:WORD_1` -> 'WORD_1'); flags
    (`sc0`, `nt`) map to 1. Text without commas whose tokens all look like modifiers
    (e.g. `s_waitcnt vmcnt(0)`) is left to the caller: use `raw_text` there.
    """
    text = text.strip()
    if not text:
        return [], {}
    pieces = [p.strip() for p in _split_top_level(text, ",")]
    tail = _split_top_level(pieces[-1], " ")
    tail = [t for t in tail if t]
    pieces[-1] = tail[0]
    mods = {}
    for tok in tail[1:]:
        _parse_modifier(tok, mods)
    if ":" in pieces[-1] and not pieces[-1].startswith(("v[", "s[", "a[", "-", "|")):
        _parse_modifier(pieces.pop(), mods)
    return [parse_operand(p) for p in pieces], mods
