"""Scalar ALU, control flow and program-state instructions (CDNA4 ISA: SOP1/SOP2/SOPC/SOPP).

Semantics follow the ISA guide's pseudo-code: 32/64-bit unsigned arithmetic on the
SGPR bit patterns; SCC is the carry/borrow for s_add_u32/s_addc_u32/s_sub_u32, signed
overflow for s_add_i32/s_sub_i32, "result != 0" for the bitwise ops and shifts, the
comparison result for s_cmp_*, and "first operand chosen" for s_min_i32/s_max_i32.
s_mul_i32 and s_mul_hi_u32 leave SCC unchanged. Branch offsets were resolved to
instruction indices when the code was decoded (decode.py).
"""
from .errors import EmulatorError, at
from .isa import semantics
from .operands import SGPR_EXEC, SGPR_VCC, Operand

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def _s32(x: int) -> int:
    """Unsigned 32-bit pattern -> signed int."""
    return x - (1 << 32) if x & 0x80000000 else x


def _src(wave, ins, i, bits=32):
    return wave.read_scalar(ins.ops[i], ins, bits)


def _binop(fn, bits=32, sets_scc=True):
    """A SOP2 instruction D = fn(S0, S1) (-> (value, scc) when sets_scc)."""
    def run(wave, ins, ctx):
        a, b = _src(wave, ins, 1, bits), _src(wave, ins, 2, bits)
        if sets_scc:
            value, wave.scc = fn(a, b, wave.scc)
        else:
            value = fn(a, b, wave.scc)
        wave.write_scalar(ins.ops[0], value & (M64 if bits == 64 else M32), ins)
    return run


def _nonzero(x, mask):
    x &= mask
    return x, int(x != 0)


def _signed_overflow(a, b, r):
    return int((_s32(a) >= 0) == (_s32(b) >= 0) and (_s32(r) >= 0) != (_s32(a) >= 0))


_SOP2 = {
    "s_add_u32": (lambda a, b, c: (a + b, int(a + b > M32)), 32, True),
    "s_addc_u32": (lambda a, b, c: (a + b + c, int(a + b + c > M32)), 32, True),
    "s_sub_u32": (lambda a, b, c: (a - b, int(b > a)), 32, True),
    "s_add_i32": (lambda a, b, c: ((a + b) & M32, _signed_overflow(a, b, (a + b) & M32)), 32, True),
    "s_sub_i32": (lambda a, b, c: ((a - b) & M32, _signed_overflow(a, (-b) & M32, (a - b) & M32)),
                  32, True),
    "s_mul_i32": (lambda a, b, c: _s32(a) * _s32(b), 32, False),
    "s_mul_hi_u32": (lambda a, b, c: (a * b) >> 32, 32, False),
    "s_lshl_b32": (lambda a, b, c: _nonzero(a << (b & 31), M32), 32, True),
    "s_lshr_b32": (lambda a, b, c: _nonzero(a >> (b & 31), M32), 32, True),
    "s_ashr_i32": (lambda a, b, c: _nonzero(_s32(a) >> (b & 31), M32), 32, True),
    "s_lshl_b64": (lambda a, b, c: _nonzero(a << (b & 63), M64), 64, True),
    "s_and_b32": (lambda a, b, c: _nonzero(a & b, M32), 32, True),
    "s_or_b32": (lambda a, b, c: _nonzero(a | b, M32), 32, True),
    "s_xor_b32": (lambda a, b, c: _nonzero(a ^ b, M32), 32, True),
    "s_and_b64": (lambda a, b, c: _nonzero(a & b, M64), 64, True),
    "s_or_b64": (lambda a, b, c: _nonzero(a | b, M64), 64, True),
    "s_xor_b64": (lambda a, b, c: _nonzero(a ^ b, M64), 64, True),
    "s_andn2_b64": (lambda a, b, c: _nonzero(a & ~b, M64), 64, True),
    "s_min_i32": (lambda a, b, c: (a, 1) if _s32(a) < _s32(b) else (b, 0), 32, True),
    "s_max_i32": (lambda a, b, c: (a, 1) if _s32(a) > _s32(b) else (b, 0), 32, True),
    "s_min_u32": (lambda a, b, c: (a, 1) if a < b else (b, 0), 32, True),
    "s_max_u32": (lambda a, b, c: (a, 1) if a > b else (b, 0), 32, True),
    "s_cselect_b32": (lambda a, b, c: a if c else b, 32, False),
    "s_cselect_b64": (lambda a, b, c: a if c else b, 64, False),
}
for _name, (_fn, _bits, _scc) in _SOP2.items():
    semantics(_name)(_binop(_fn, _bits, _scc))


@semantics("s_mov_b32")
def s_mov_b32(wave, ins, ctx):
    """D = S0."""
    wave.write_scalar(ins.ops[0], _src(wave, ins, 1), ins)


@semantics("s_mov_b64")
def s_mov_b64(wave, ins, ctx):
    """D[63:0] = S0 (an inline integer constant is sign-extended to 64 bits)."""
    wave.write_scalar(ins.ops[0], _src(wave, ins, 1, 64), ins)


@semantics("s_not_b64")
def s_not_b64(wave, ins, ctx):
    """D = ~S0; SCC = D != 0."""
    value = ~_src(wave, ins, 1, 64) & M64
    wave.write_scalar(ins.ops[0], value, ins)
    wave.scc = int(value != 0)


@semantics("s_ff1_i32_b64")
def s_ff1_i32_b64(wave, ins, ctx):
    """D = the index of S0's lowest set bit, -1 (0xffffffff) when S0 is 0; SCC unchanged."""
    value = _src(wave, ins, 1, 64)
    wave.write_scalar(ins.ops[0], ((value & -value).bit_length() - 1) & M32, ins)


def _saveexec(combine):
    """D = EXEC; EXEC = combine(S0, EXEC); SCC = EXEC != 0."""
    def run(wave, ins, ctx):
        exec_op = _EXEC
        old_exec = wave.read_scalar(exec_op, ins, 64)
        new_exec = combine(_src(wave, ins, 1, 64), old_exec) & M64
        wave.write_scalar(ins.ops[0], old_exec, ins)
        wave.write_scalar(exec_op, new_exec, ins)
        wave.scc = int(new_exec != 0)
    return run


_EXEC = Operand("s", SGPR_EXEC, 2, text="exec")
semantics("s_and_saveexec_b64")(_saveexec(lambda s, e: s & e))
semantics("s_or_saveexec_b64")(_saveexec(lambda s, e: s | e))
semantics("s_andn2_saveexec_b64")(_saveexec(lambda s, e: s & ~e))


_CMP = {
    "eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _s_cmp(pred, signed):
    def run(wave, ins, ctx):
        a, b = _src(wave, ins, 0), _src(wave, ins, 1)
        if signed:
            a, b = _s32(a), _s32(b)
        wave.scc = int(pred(a, b))
    return run


for _op, _pred in _CMP.items():
    semantics(f"s_cmp_{_op}_i32")(_s_cmp(_pred, True))
    semantics(f"s_cmp_{_op}_u32")(_s_cmp(_pred, False))


@semantics("s_cmp_eq_u64", "s_cmp_lg_u64")
def s_cmp_u64(wave, ins, ctx):
    """SCC = (S0 == S1) or (S0 != S1) on 64-bit sources (SGPR pairs, vcc, exec, constants)."""
    a, b = (wave.read_scalar(ins.ops[i], ins, 64) for i in (0, 1))
    wave.scc = int(a == b if ins.mnemonic == "s_cmp_eq_u64" else a != b)


# ---- control flow ------------------------------------------------------------------------
def _vcc_bits(wave):
    return int(wave.sgpr[SGPR_VCC]) | (int(wave.sgpr[SGPR_VCC + 1]) << 32)


_BRANCH_CONDITIONS = {
    "s_branch": lambda w: True,
    "s_cbranch_scc0": lambda w: w.scc == 0,
    "s_cbranch_scc1": lambda w: w.scc == 1,
    "s_cbranch_vccz": lambda w: _vcc_bits(w) == 0,
    "s_cbranch_vccnz": lambda w: _vcc_bits(w) != 0,
    "s_cbranch_execz": lambda w: w.exec_bits == 0,
    "s_cbranch_execnz": lambda w: w.exec_bits != 0,
}


def _branch(cond):
    def run(wave, ins, ctx):
        return ins.target if cond(wave) else None
    return run


for _name, _cond in _BRANCH_CONDITIONS.items():
    semantics(_name)(_branch(_cond))


@semantics("s_endpgm")
def s_endpgm(wave, ins, ctx):
    """End the wave."""
    wave.done = True
    return wave.pc


@semantics("s_barrier")
def s_barrier(wave, ins, ctx):
    """Wait until every wave of the workgroup has reached a barrier (the scheduler releases)."""
    wave.at_barrier = True


@semantics("s_waitcnt")
def s_waitcnt(wave, ins, ctx):
    """Retire outstanding memory operations down to the named counts (see waitcnt.py)."""
    if "(" not in ins.raw and ins.raw.strip():
        raise EmulatorError(f"s_waitcnt with a raw immediate is not decoded: {at(ins)}")
    wave.waits.wait(ins)


@semantics("s_nop", "s_setprio")
def s_no_effect(wave, ins, ctx):
    """No architectural effect in a functional model (s_setprio only changes arbitration)."""


# ---- SOPK: a 16-bit immediate in the instruction -------------------------------------------
def _simm16(ins) -> int:
    """The SOPK immediate sign-extended to 32 bits (unsigned pattern)."""
    v = ins.ops[1].value & 0xFFFF
    return (v - 0x10000 if v & 0x8000 else v) & M32


@semantics("s_addk_i32")
def s_addk_i32(wave, ins, ctx):
    """D = D + sign-extended simm16; SCC = signed overflow."""
    a, b = _src(wave, ins, 0), _simm16(ins)
    r = (a + b) & M32
    wave.write_scalar(ins.ops[0], r, ins)
    wave.scc = _signed_overflow(a, b, r)


@semantics("s_movk_i32")
def s_movk_i32(wave, ins, ctx):
    """D = sign-extended simm16."""
    wave.write_scalar(ins.ops[0], _simm16(ins), ins)


def _s_cmpk(pred, signed):
    """SCC = pred(S0, simm16): zero-extended for the _u32 forms, sign-extended for _i32."""
    def run(wave, ins, ctx):
        a, b = _src(wave, ins, 0), ins.ops[1].value & 0xFFFF
        if signed:
            a, b = _s32(a), _s32(_simm16(ins))
        wave.scc = int(pred(a, b))
    return run


for _op, _pred in _CMP.items():
    semantics(f"s_cmpk_{_op}_u32")(_s_cmpk(_pred, False))
    semantics(f"s_cmpk_{_op}_i32")(_s_cmpk(_pred, True))
