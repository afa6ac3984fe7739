"""Decode the vector ALU encodings: VOP1, VOP2, VOPC (with their DPP and SDWA forms), VOP3 (a and b),
VOP3P, VOP3P-MAI and gfx950's scaled MFMA (CDNA4 ISA, "Vector ALU" and "Matrix Arithmetic" formats).

Each decoder takes the instruction's words and returns (printed mnemonic, operand tokens, modifier
tokens, size in dwords). Which fields an opcode prints, in which order and how wide, comes from
opcodes.py; the bit layout of the fields is here.
"""
from .decode_operands import LITERAL, VGPR_BASE, bit_list, lookup, reg, scalar, source, with_modifiers
from .errors import EmulatorError

_SDWA, _DPP = 249, 250              # src0 codes that announce a second dword of SDWA / DPP controls
_LD_SCALE_OP = 0x2C                 # VOP3P v_mfma_ld_scale_b32: the scale prefix of v_mfma_scale_*
_SDWA_SEL = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
_SDWA_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")
_OMOD = ("", "mul:2", "mul:4", "div:2")
_F8F6F4_REGS = (8, 8, 6, 6, 4)      # A/B registers per cbsz/blgp format: fp8, bf8, fp6, bf6, fp4
_DPP_ROW = {0x100: "row_shl", 0x110: "row_shr", 0x120: "row_ror", 0x150: "row_newbcast"}
_DPP_FIXED = {0x130: "wave_shl:1", 0x134: "wave_rol:1", 0x138: "wave_shr:1", 0x13C: "wave_ror:1",
              0x140: "row_mirror", 0x141: "row_half_mirror", 0x142: "row_bcast:15", 0x143: "row_bcast:31"}


def _vgpr_field(value: int, cls: str, width: int) -> str:
    """An 8-bit register field: a VGPR, or an SGPR where the opcode writes one (v_readfirstlane)."""
    return scalar(value, width) if cls == "s" else reg(cls, value, width)


def _renamed(mnemonic: str, form: str) -> str:
    base = mnemonic[:-4] if mnemonic.endswith("_e32") else mnemonic
    return f"{base}_{form}"


def _dpp_control(ctrl: int) -> str:
    if ctrl <= 0xFF:
        return "quad_perm:" + "[" + ",".join(str((ctrl >> (2 * i)) & 3) for i in range(4)) + "]"
    if ctrl in _DPP_FIXED:
        return _DPP_FIXED[ctrl]
    row = _DPP_ROW.get(ctrl & ~0xF)
    if row is None or (row != "row_newbcast" and not ctrl & 0xF):
        raise EmulatorError(f"DPP control 0x{ctrl:x} is reserved")
    return f"{row}:{ctrl & 0xF}"


def _vop_short(family, op, w, fields):
    """VOP1/VOP2/VOPC: `fields` maps the layout's field names to their raw values; src0 is 9 bits."""
    mnemonic, slots = lookup(family, op)
    src0 = fields["src0"]
    mods, size, literal = [], 1, None
    neg, abs_ = [0, 0], [0, 0]
    if src0 == _DPP:
        d = w[1]
        fields["src0"] = VGPR_BASE + (d & 0xFF)
        neg, abs_ = [(d >> 20) & 1, (d >> 22) & 1], [(d >> 21) & 1, (d >> 23) & 1]
        mods = [_dpp_control((d >> 8) & 0x1FF), f"row_mask:0x{d >> 28:x}", f"bank_mask:0x{(d >> 24) & 0xF:x}"]
        if (d >> 19) & 1:
            mods.append("bound_ctrl:1")
        mnemonic, size = _renamed(mnemonic, "dpp"), 2
    elif src0 == _SDWA:
        return _sdwa(mnemonic, slots, w, fields, family)
    elif src0 == LITERAL:
        literal, size = w[1], 2
    tokens = []
    for name, cls, width in slots:
        if name == "=":
            if cls.startswith("0x"):                    # v_madmk/v_madak's K
                literal, size = w[size], size + 1
                tokens.append(f"0x{literal:x}")
            else:
                tokens.append(cls)
        elif name == "src0":
            tokens.append(with_modifiers(source(fields["src0"], width, literal), neg[0], abs_[0]))
        elif name == "src1":
            tokens.append(with_modifiers(reg("v", fields["src1"], width), neg[1], abs_[1]))
        else:
            tokens.append(_vgpr_field(fields[name], cls, width))
    return mnemonic, tokens, mods, size


def _sdwa(mnemonic, slots, w, fields, family):
    d = w[1]
    src0 = (d & 0xFF) + (0 if (d >> 23) & 1 else VGPR_BASE)
    src1 = fields.get("src1", 0) + (0 if (d >> 31) & 1 else VGPR_BASE)
    tokens = []
    for name, cls, width in slots:
        if name == "=" and cls == "vcc" and family == "VOPC":
            tokens.append(scalar((d >> 8) & 0x7F, 2) if (d >> 15) & 1 else "vcc")
        elif name == "=":
            tokens.append(cls)
        elif name == "src0":
            tokens.append(with_modifiers(source(src0, width), (d >> 20) & 1, (d >> 21) & 1))
        elif name == "src1":
            tokens.append(with_modifiers(source(src1, width), (d >> 28) & 1, (d >> 29) & 1))
        else:
            tokens.append(_vgpr_field(fields[name], cls, width))
    mods = []
    if family != "VOPC":
        if (d >> 13) & 1:
            mods.append("clamp")
        if (d >> 14) & 3:
            mods.append(_OMOD[(d >> 14) & 3])
        if next(width for name, _, width in slots if name == "vdst") == 1:
            mods += [f"dst_sel:{_SDWA_SEL[(d >> 8) & 7]}", f"dst_unused:{_SDWA_UNUSED[(d >> 11) & 3]}"]
    mods.append(f"src0_sel:{_SDWA_SEL[(d >> 16) & 7]}")
    if any(name == "src1" for name, _, _ in slots):
        mods.append(f"src1_sel:{_SDWA_SEL[(d >> 24) & 7]}")
    return _renamed(mnemonic, "sdwa"), tokens, mods, 2


def decode_vop1(w):
    return _vop_short("VOP1", (w[0] >> 9) & 0xFF, w, {"vdst": (w[0] >> 17) & 0xFF, "src0": w[0] & 0x1FF})


def decode_vop2(w):
    return _vop_short("VOP2", (w[0] >> 25) & 0x3F, w, {"vdst": (w[0] >> 17) & 0xFF, "src0": w[0] & 0x1FF,
                                                       "src1": (w[0] >> 9) & 0xFF})


def decode_vopc(w):
    return _vop_short("VOPC", (w[0] >> 17) & 0xFF, w, {"src0": w[0] & 0x1FF, "src1": (w[0] >> 9) & 0xFF})


def _sources(w1):
    return {"src0": w1 & 0x1FF, "src1": (w1 >> 9) & 0x1FF, "src2": (w1 >> 18) & 0x1FF}


def decode_vop3(w):
    """VOP3a (abs/neg/op_sel/clamp/omod) and VOP3b (an SGPR carry-out `sdst` in place of abs/op_sel)."""
    mnemonic, slots = lookup("VOP3", (w[0] >> 16) & 0x3FF)
    srcs = _sources(w[1])
    vop3b = any(name == "sdst" for name, _, _ in slots)
    abs_bits = 0 if vop3b else (w[0] >> 8) & 7
    neg_bits = w[1] >> 29
    tokens, nsrc = [], 0
    for name, cls, width in slots:
        if name == "=":
            tokens.append(cls)
        elif name == "vdst":
            tokens.append(_vgpr_field(w[0] & 0xFF, cls, width))
        elif name == "sdst":
            tokens.append(scalar((w[0] >> 8) & 0x7F, width))
        else:
            i = int(name[3])
            nsrc = max(nsrc, i + 1)
            tokens.append(with_modifiers(source(srcs[name], width, vector_class=cls if cls == "a" else "v"),
                                         (neg_bits >> i) & 1, (abs_bits >> i) & 1))
    mods = []
    op_sel = (w[0] >> 11) & 0xF
    if not vop3b and op_sel:
        mods.append("op_sel:" + bit_list(op_sel & ((1 << nsrc) - 1) | (op_sel >> 3) << nsrc, nsrc + 1))
    if (w[0] >> 15) & 1:
        mods.append("clamp")
    if (w[1] >> 27) & 3:
        mods.append(_OMOD[(w[1] >> 27) & 3])
    return mnemonic, tokens, mods, 2


def _is_mai(mnemonic: str) -> bool:
    return mnemonic.startswith(("v_mfma", "v_smfmac"))


def _mai(mnemonic, slots, w0, w1):
    """VOP3P-MAI: acc_cd puts vdst and src2 in AGPRs, w1[28:27] srcA/srcB; cbsz/abid/blgp broadcast."""
    acc_cd, acc = (w0 >> 15) & 1, (w1 >> 27) & 3
    cbsz, abid, blgp = (w0 >> 8) & 7, (w0 >> 11) & 0xF, w1 >> 29
    srcs = _sources(w1)
    cls = {"vdst": "a" if acc_cd else "v", "src0": "a" if acc & 1 else "v",
           "src1": "a" if acc & 2 else "v", "src2": "a" if acc_cd else "v"}
    width_of = {}
    if mnemonic.endswith("f8f6f4"):
        width_of = {"src0": _F8F6F4_REGS[cbsz], "src1": _F8F6F4_REGS[blgp]}
    tokens = []
    for name, _, width in slots:
        width = width_of.get(name, width)
        if name == "vdst":
            tokens.append(reg(cls[name], w0 & 0xFF, width))
        else:
            tokens.append(source(srcs[name], width, vector_class=cls[name]))
    mods = [f"{k}:{v}" for k, v in (("cbsz", cbsz), ("abid", abid), ("blgp", blgp)) if v]
    return tokens, mods


def decode_vop3p(w):
    op = (w[0] >> 16) & 0x7F
    if op == _LD_SCALE_OP:
        return _decode_mfma_scale(w)
    mnemonic, slots = lookup("VOP3P", op)
    if _is_mai(mnemonic):
        tokens, mods = _mai(mnemonic, slots, w[0], w[1])
        return mnemonic, tokens, mods, 2
    srcs = _sources(w[1])
    tokens, nsrc = [], 0
    for name, cls, width in slots:
        if name == "vdst":
            tokens.append(_vgpr_field(w[0] & 0xFF, cls, width))
        elif name == "=":
            tokens.append(cls)
        else:
            nsrc = max(nsrc, int(name[3]) + 1)
            tokens.append(source(srcs[name], width, vector_class=cls if cls == "a" else "v"))
    full = (1 << nsrc) - 1
    op_sel, op_sel_hi = (w[0] >> 11) & 7, ((w[1] >> 27) & 3) | ((w[0] >> 14) & 1) << 2
    neg_lo, neg_hi = (w[1] >> 29) & full, (w[0] >> 8) & full
    mods = []
    if op_sel & full:
        mods.append("op_sel:" + bit_list(op_sel, nsrc))
    if op_sel_hi & full != full:
        mods.append("op_sel_hi:" + bit_list(op_sel_hi, nsrc))
    if neg_lo:
        mods.append("neg_lo:" + bit_list(neg_lo, nsrc))
    if neg_hi:
        mods.append("neg_hi:" + bit_list(neg_hi, nsrc))
    if (w[0] >> 15) & 1:
        mods.append("clamp")
    return mnemonic, tokens, mods, 2


def _decode_mfma_scale(w):
    """v_mfma_scale_*: a v_mfma_ld_scale_b32 dword pair (the two scale sources, their op_sel and
    op_sel_hi) followed by the f8f6f4 MFMA it scales; LLVM prints the pair as one instruction."""
    if len(w) < 4 or (w[2] >> 23) != 0x1A7:
        raise EmulatorError("v_mfma_ld_scale_b32 without the MFMA it scales")
    mnemonic, slots = lookup("VOP3P", (w[2] >> 16) & 0x7F)
    if not mnemonic.startswith("v_mfma_") or not mnemonic.endswith("f8f6f4"):
        raise EmulatorError(f"v_mfma_ld_scale_b32 before {mnemonic}, which takes no scales")
    tokens, mai_mods = _mai(mnemonic, slots, w[2], w[3])
    mai_mods = [m for m in mai_mods if not m.startswith("abid:")]     # LLVM shows no abid here
    srcs = _sources(w[1])
    tokens += [source(srcs["src0"], 1), source(srcs["src1"], 1)]
    mods = []
    if (w[0] >> 11) & 3:
        mods.append("op_sel:" + bit_list((w[0] >> 11) & 3, 3))
    mods.append("op_sel_hi:" + bit_list((w[1] >> 27) & 3, 3))
    return "v_mfma_scale_" + mnemonic[len("v_mfma_"):], tokens, mods + mai_mods, 4
