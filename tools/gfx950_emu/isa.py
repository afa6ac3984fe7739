"""The instruction dispatch table: mnemonic -> semantics function.

Semantics live in one module per family (isa_scalar.py, isa_vector.py, isa_memory.py,
mfma.py); each function is registered under the mnemonics it implements with
`@semantics("name", ...)`. A function is called as `fn(wave, ins, ctx)`:
wave is the WaveState, ins the Instruction (parsed operands in `ins.ops`), ctx the
ExecContext (global memory, LDS). It returns None to fall through to the next
instruction, or an instruction index to jump to. Extending the emulator = writing one
function and decorating it.

`execute` looks the mnemonic up; an unknown one is an EmulatorError naming it and its
address. Modifiers a semantics function does not declare in `allowed_mods` are also an
error, so e.g. `clamp` or `omod` never silently change nothing.
"""
from .errors import EmulatorError, at

DISPATCH = {}
_ALLOWED_MODS = {}


def semantics(*mnemonics, mods=()):
    """Register the decorated function for each mnemonic; `mods`: the modifiers it handles."""
    def register(fn):
        for m in mnemonics:
            if m in DISPATCH:
                raise ValueError(f"{m} registered twice")
            DISPATCH[m] = fn
            _ALLOWED_MODS[m] = frozenset(mods)
        return fn
    return register


def execute(wave, ins, ctx):
    """Run one instruction on wave; returns the next PC (instruction index)."""
    fn = DISPATCH.get(ins.mnemonic)
    if fn is None:
        raise EmulatorError(f"unknown instruction {ins.mnemonic}: {at(ins)}")
    extra = set(ins.mods) - _ALLOWED_MODS[ins.mnemonic]
    if extra:
        raise EmulatorError(f"unsupported modifier(s) {sorted(extra)} in {at(ins)}")
    target = fn(wave, ins, ctx)
    return wave.pc + 1 if target is None else target


def operand_count(ins, n: int):
    """EmulatorError unless ins has exactly n operands."""
    if len(ins.ops) != n:
        raise EmulatorError(f"expected {n} operands in {at(ins)}, got {len(ins.ops)}")
