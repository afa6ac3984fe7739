"""Decode the vector memory encodings: DS (LDS), MUBUF (buffer) and FLAT/GLOBAL/SCRATCH (CDNA4 ISA,
"LDS and GDS", "Vector Memory Buffer" and "Flat, Scratch and Global" formats).

A FLAT-family atomic with sc0 returns the old value in vdst (opcodes.py's layouts are of the forms
without it); a MUBUF atomic returns it in vdata, so its operands do not change.

The `acc` bit of each format puts the data registers (not the address) in AGPRs. Cache-policy bits
print as LLVM does: sc0, nt, sc1. Each decoder returns (printed mnemonic, operand tokens, modifier
tokens, size in dwords).
"""
import re

from .decode_operands import lookup, reg, scalar, source
from .errors import EmulatorError

_SADDR_OFF = 0x7F
_DS_TWO_OFFSETS = re.compile(r"^ds_\w+2(st64)?_")
_SEGMENTS = ("FLAT", "SCRATCH", "GLOBAL")


def _cache_policy(sc0, nt, sc1):
    return [name for name, bit in (("sc0", sc0), ("nt", nt), ("sc1", sc1)) if bit]


def decode_ds(w):
    """DS: addr, data0, data1 VGPRs and vdst; one 16-bit offset, or two 8-bit ones (the *2 forms)."""
    mnemonic, slots = lookup("DS", (w[0] >> 17) & 0xFF)
    data_cls = "a" if (w[0] >> 25) & 1 else "v"
    field = {"vdst": w[1] >> 24, "src0": w[1] & 0xFF, "src1": (w[1] >> 8) & 0xFF, "src2": (w[1] >> 16) & 0xFF}
    tokens = []
    for name, cls, width in slots:
        if name == "=":
            raise EmulatorError(f"{mnemonic}: a fixed operand '{cls}' is not decoded")
        tokens.append(reg("v" if name == "src0" else data_cls, field[name], width))
    offset0, offset1 = w[0] & 0xFF, (w[0] >> 8) & 0xFF
    if (w[0] >> 16) & 1:
        raise EmulatorError(f"{mnemonic}: gds is not a gfx950 feature")
    if _DS_TWO_OFFSETS.match(mnemonic):
        mods = [f"offset{i}:{v}" for i, v in ((0, offset0), (1, offset1)) if v]
    else:
        mods = [f"offset:{offset0 | offset1 << 8}"] if offset0 | offset1 else []
    return mnemonic, tokens, mods, 2


def decode_mubuf(w):
    """MUBUF: vdata, vaddr (index and/or offset, as idxen/offen say), the resource SGPR quad, soffset;
    with `lds` the data goes to LDS at M0 and vdata is not an operand."""
    mnemonic, slots = lookup("MUBUF", (w[0] >> 18) & 0x7F)
    offset, offen, idxen = w[0] & 0xFFF, (w[0] >> 12) & 1, (w[0] >> 13) & 1
    sc0, sc1, lds, nt = (w[0] >> 14) & 1, (w[0] >> 15) & 1, (w[0] >> 16) & 1, (w[0] >> 17) & 1
    vaddr, vdata, srsrc, acc, soffset = w[1] & 0xFF, (w[1] >> 8) & 0xFF, ((w[1] >> 16) & 0x1F) * 4, \
        (w[1] >> 23) & 1, w[1] >> 24
    tokens = []
    for name, _, width in slots:
        if name == "vdst" and not lds:
            tokens.append(reg("a" if acc else "v", vdata, width))
        elif name == "src0":
            tokens.append(reg("v", vaddr, offen + idxen) if offen or idxen else "off")
        elif name == "srsrc":
            tokens.append(scalar(srsrc, 4))
        elif name == "=":
            tokens.append(source(soffset, 1))
    mods = [m for m, on in (("idxen", idxen), ("offen", offen)) if on]
    if offset:
        mods.append(f"offset:{offset}")
    mods += _cache_policy(sc0, nt, sc1) + (["lds"] if lds else [])
    return mnemonic, tokens, mods, 2


def decode_flat(w):
    """FLAT (64-bit address), GLOBAL (64-bit address, or 32-bit offset + SGPR pair base) and SCRATCH
    (VGPR offset when sve, SGPR offset unless off); a signed 13-bit offset for global and scratch."""
    segment = _SEGMENTS[(w[0] >> 14) & 3] if (w[0] >> 14) & 3 != 3 else None
    if segment is None:
        raise EmulatorError("FLAT segment 3 is reserved")
    mnemonic, slots = lookup(segment, (w[0] >> 18) & 0x7F)
    sve, sc0, nt, sc1 = (w[0] >> 13) & 1, (w[0] >> 16) & 1, (w[0] >> 17) & 1, (w[0] >> 25) & 1
    offset = w[0] & 0x1FFF if segment != "FLAT" else w[0] & 0xFFF
    if segment != "FLAT" and offset & 0x1000:
        offset -= 0x2000
    addr, data, saddr, acc, vdst = w[1] & 0xFF, (w[1] >> 8) & 0xFF, (w[1] >> 16) & 0x7F, (w[1] >> 23) & 1, \
        w[1] >> 24
    data_cls = "a" if acc else "v"
    widths = {name: width for name, _, width in slots}
    if "_atomic_" in mnemonic and sc0:       # an atomic that returns the old value
        widths["vdst"] = widths["src1"] // 2 if "cmpswap" in mnemonic else widths["src1"]
    tokens = [reg(data_cls, vdst, widths["vdst"])] if "vdst" in widths else []
    if segment == "FLAT":
        tokens.append(reg("v", addr, 2))
    elif segment == "GLOBAL":
        tokens.append(reg("v", addr, 2 if saddr == _SADDR_OFF else 1))
    else:
        tokens.append(reg("v", addr, 1) if sve else "off")
    if "src1" in widths:
        tokens.append(reg(data_cls, data, widths["src1"]))
    if segment == "GLOBAL":
        tokens.append("off" if saddr == _SADDR_OFF else scalar(saddr, 2))
    elif segment == "SCRATCH":
        tokens.append("off" if saddr == _SADDR_OFF else scalar(saddr, 1))
    mods = [f"offset:{offset}"] if offset else []
    return mnemonic, tokens, mods + _cache_policy(sc0, nt, sc1), 2
