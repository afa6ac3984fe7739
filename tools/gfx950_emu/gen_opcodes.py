"""Generate opcodes.py: every gfx950 opcode of every encoding, with its mnemonic and operand layout, as
llvm-mc-22's disassembler sees it.

    python -m tools.gfx950_emu.gen_opcodes > tools/gfx950_emu/opcodes.py

For each encoding family one probe per opcode is built with its register fields set to distinct numbers
(vdst 10, src0 20, src1 30, src2 40, a VOP3b sdst 0; SMEM sdata 12 and sbase 20, a MUBUF resource s[12:15]);
one llvm-mc-22 --disassemble run per family and attempt prints what it decodes (an `s_nop 7` between the
probes tells which output belongs to which), and each printed operand is mapped back to the field whose
number it carries. A probe that LLVM refuses is retried with the family's next builder: scalar sources
(v_readlane wants an SGPR lane select), or fields left zero that an opcode must not use. Field names are
generic: for DS src0/src1/src2 are addr/data0/data1, for MUBUF vdst/src0 are vdata/vaddr, for FLAT src0/src1
are addr/data. The decoder (decode*.py) owns the bit layout of each field; this table only says which fields
an opcode prints, in which order, how many registers wide, and of which class when the field itself does not
say (a VOP3 `vdst` that is an SGPR pair for v_cmp).
"""
import re
import struct
import subprocess
import sys

LLVM_MC = "llvm-mc-22"
_FIELD_OF_BASE = {10: "vdst", 20: "src0", 30: "src1", 40: "src2", 0: "sdst"}
_REG_RE = re.compile(r"^([vsa])(?:(\d+)|\[(\d+):(\d+)\])$")


# family -> (opcode count, mask of the family prefix and opcode bits of word 0, probe builders: opcode ->
# words, tried in order until LLVM accepts one; the later ones leave fields some opcodes must have zero)
_V, _S = 256, 0           # 9-bit source codes: VGPR n is 256 + n, SGPR n is n
_LIT = 0x11223344         # a literal for the opcodes that take one (v_madmk), else decoded on its own


def _ds(vdst, addr, data0, data1):
    return lambda op: (0xD8000000 | op << 17, vdst << 24 | data1 << 16 | data0 << 8 | addr)


def _flat(seg, vdst, addr, data, saddr=0x7F):
    return lambda op: (0xDC000000 | seg << 14 | op << 18, vdst << 24 | saddr << 16 | data << 8 | addr)


def _vop3(s0, s1, s2):
    return lambda op: (0xD0000000 | op << 16 | 10, s2 << 18 | s1 << 9 | s0)


def _flat_family(seg):
    saddrs = (0x7F, 0) if seg else (0,)     # FLAT has no saddr: the field must be 0
    return (0x80, 0xFC1FC000, [_flat(seg, *fields, saddr) for saddr in saddrs for fields in
                               ((10, 20, 30), (0, 20, 30), (10, 20, 0), (0, 20, 0), (10, 0, 0))])


FAMILIES = {
    "SOP2": (0x60, 0xFF800000, [lambda op: (0x80000000 | op << 23 | 10 << 16 | 30 << 8 | 20,),
                                lambda op: (0x80000000 | op << 23 | 30 << 8 | 20,)]),
    "SOPK": (0x1D, 0xFF800000, [lambda op: (0xB0000000 | op << 23 | 10 << 16 | 0x1234, _LIT),
                                lambda op: (0xB0000000 | op << 23 | 0x1234, _LIT)]),
    "SOP1": (0x100, 0xFFFFFF00, [lambda op: (0xBE800000 | 10 << 16 | op << 8 | 20,),
                                 lambda op: (0xBE800000 | op << 8 | 20,),
                                 lambda op: (0xBE800000 | 10 << 16 | op << 8,),
                                 lambda op: (0xBE800000 | op << 8,)]),
    "SOPC": (0x80, 0xFFFF0000, [lambda op: (0xBF000000 | op << 16 | 30 << 8 | 20,),
                                lambda op: (0xBF000000 | op << 16 | 20,),
                                lambda op: (0xBF000000 | op << 16,)]),
    "SOPP": (0x80, 0xFFFF0000, [lambda op: (0xBF800000 | op << 16 | 3,),
                                lambda op: (0xBF800000 | op << 16,)]),
    "SMEM": (0x100, 0xFFFC0000, [lambda op: (0xC0020000 | op << 18 | 12 << 6 | 10, 0x40),
                                 lambda op: (0xC0020000 | op << 18 | 12 << 6, 0x40),
                                 lambda op: (0xC0020000 | op << 18 | 10, 0x40),
                                 lambda op: (0xC0000000 | op << 18, 0)]),
    "VOP2": (0x3E, 0xFE000000, [lambda op: (op << 25 | 10 << 17 | 30 << 9 | (_V + 20), _LIT),
                                lambda op: (op << 25 | 10 << 17 | 30 << 9 | 20, _LIT)]),
    "VOP1": (0x100, 0xFE01FE00, [lambda op: (0x7E000000 | 10 << 17 | op << 9 | (_V + 20),),
                                 lambda op: (0x7E000000 | 10 << 17 | op << 9 | 20,),
                                 lambda op: (0x7E000000 | op << 9,)]),
    "VOPC": (0x100, 0xFFFE0000, [lambda op: (0x7C000000 | op << 17 | 30 << 9 | (_V + 20),)]),
    "VOP3": (0x380, 0xFFFF0000, [_vop3(_V + 20, _V + 30, _V + 40), _vop3(_V + 20, _S + 30, _S + 40),
                                 _vop3(_S + 20, _S + 30, _S + 40), _vop3(_V + 20, _V + 30, 0)]),
    "VOP3P": (0x80, 0xFFFF0000, [lambda op: (0xD3804000 | op << 16 | 10, 0x18000000 | (_V + 40) << 18
                                             | (_V + 30) << 9 | (_V + 20)),
                                 lambda op: (0xD3800000 | op << 16 | 10, (_V + 40) << 18 | (_V + 30) << 9
                                             | (_V + 20))]),
    "DS": (0x100, 0xFDFE0000, [_ds(10, 20, 30, 40), _ds(0, 20, 30, 40), _ds(10, 20, 30, 0), _ds(0, 20, 30, 0),
                               _ds(10, 20, 0, 0), _ds(0, 20, 0, 0), _ds(10, 0, 0, 0), _ds(0, 0, 0, 0)]),
    "MUBUF": (0x80, 0xFDFC0000, [lambda op: (0xE0001000 | op << 18, 0x80 << 24 | 3 << 16 | 10 << 8 | 20),
                                 lambda op: (0xE0000000 | op << 18, 0x80 << 24 | 3 << 16 | 10 << 8),
                                 lambda op: (0xE0000000 | op << 18, 0x80 << 24 | 3 << 16)]),
    "FLAT": _flat_family(0),
    "SCRATCH": _flat_family(1),
    "GLOBAL": _flat_family(2),
}
_MARKER = (0xBF800007,)   # s_nop 7 between probes: what LLVM prints up to it belongs to one probe
_MARKER_TEXT = "s_nop 7"


def _slot(token: str, family: str) -> str:
    """One printed operand of a probe -> `field.class.width` or `=text` for a fixed operand."""
    m = _REG_RE.match(token)
    if not m:
        return "=" + token
    base = int(m.group(2) if m.group(2) is not None else m.group(3))
    width = 1 if m.group(2) is not None else int(m.group(4)) - base + 1
    if family == "SMEM" and base in (12, 20):
        return f"{'sdata' if base == 12 else 'sbase'}.s.{width}"
    if family == "MUBUF" and base == 12:
        return f"srsrc.s.{width}"
    field = _FIELD_OF_BASE.get(base)
    if field is None:
        return "=" + token
    return f"{field}.{m.group(1)}.{width}"


def _split_operands(text: str):
    """`mnemonic a, b, c mod mod` -> (mnemonic, [a, b, c]); modifiers dropped."""
    mnemonic, _, rest = text.partition(" ")
    parts = [p.strip() for p in re.split(r",(?![^\[]*\])", rest)] if rest.strip() else []
    if parts:
        parts[-1] = parts[-1].split(" ")[0]
    return mnemonic, parts


def _encode(words) -> str:
    return ",".join(f"0x{b:02x}" for w in words for b in struct.pack("<I", w & 0xFFFFFFFF))


def _disassemble(probes):
    """[words] -> [(printed text, first word as LLVM re-encodes it) or None], one llvm-mc-22 run."""
    lines = "".join(f"{_encode(p)}\n{_encode(_MARKER)}\n" for p in probes)
    out = subprocess.run([LLVM_MC, "--disassemble", "-arch=amdgcn", "-mcpu=gfx950", "-show-encoding"],
                         input=lines, capture_output=True, text=True).stdout
    groups, current = [], []
    for line in out.splitlines():
        text, _, enc = line.strip().partition("; encoding: [")
        if not enc:
            continue
        if text.strip() == _MARKER_TEXT:
            groups.append(current)
            current = []
        else:
            raw = bytes(int(b, 16) for b in enc.rstrip("]").split(","))
            current.append((text.strip(), struct.unpack_from("<I", raw)[0]))
    if len(groups) != len(probes):       # a probe swallowed the marker (an opcode wanting more dwords)
        raise RuntimeError(f"{len(probes)} probes, {len(groups)} answers from {LLVM_MC}")
    return [g[0] if g else None for g in groups]


def generate():
    """{family: {opcode: (mnemonic, layout)}} from llvm-mc-22."""
    table = {}
    for family, (count, op_mask, builders) in FAMILIES.items():
        entries, pending = {}, list(range(count))
        for build in builders:
            probes = [build(op) for op in pending]
            still = []
            for op, probe, got in zip(pending, probes, _disassemble(probes)):
                if got is None or (got[1] & op_mask) != (probe[0] & op_mask) \
                        or got[0].startswith("v_mfma_ld_scale") or "/*" in got[0]:
                    still.append(op)
                    continue
                mnemonic, parts = _split_operands(got[0])
                entries[op] = (mnemonic, " ".join(_slot(p, family) for p in parts))
            pending = still
        table[family] = entries
    _sopp_immediates(table["SOPP"])
    return table


def _sopp_immediates(entries):
    """SOPP layouts: `simm16` (always printed), `simm16?` (printed unless 0) or none."""
    ops = sorted(op for op, (_, layout) in entries.items() if layout == "=3")
    zero = _disassemble([(0xBF800000 | op << 16,) for op in ops])
    for op, got in zip(ops, zero):
        mnemonic = entries[op][0]
        entries[op] = (mnemonic, "simm16" if got and got[0] != mnemonic else "simm16?")


def main():
    table = generate()
    print('"""gfx950 opcode tables, generated by gen_opcodes.py from llvm-mc-22 (do not edit).\n\n'
          "family -> {opcode: (mnemonic as LLVM prints it, operand layout)}; a layout lists the printed\n"
          "operands: `field.class.width` (class v/s/a as printed for the probe) or `=text` (a fixed operand).\n"
          '"""\n')
    print("OPCODES = {")
    for family, entries in table.items():
        print(f"    {family!r}: {{")
        for op, (mnemonic, layout) in sorted(entries.items()):
            print(f"        0x{op:03x}: ({mnemonic!r}, {layout!r}),")
        print("    },")
    print("}")


if __name__ == "__main__":
    sys.exit(main())
