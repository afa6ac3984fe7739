"""Decode a gfx950 code object's instruction words into the Instructions the emulator executes.

The code sections are decoded linearly, as the hardware fetches them: the top bits of each dword
select the encoding (CDNA4 ISA, "Microcode Formats"), the encoding's decoder (decode_scalar,
decode_vector, decode_memory) reads its fields and any trailing dwords, and the opcode's mnemonic
and operand layout come from opcodes.py (generated from llvm-mc-22 by gen_opcodes.py). The operands
are rendered in LLVM's syntax and parsed by operands.py, so llvm-objdump-22's text of the same words
parses to the same Instruction: decode_check compares the two.

A kernel is its instructions from its descriptor's entry to the next kernel's entry (or the end of
the section); a branch target (addr + 4 + 4 * simm16) must be an instruction of the same kernel.
"""
import struct

from .decode_memory import decode_ds, decode_flat, decode_mubuf
from .decode_scalar import decode_smem, decode_sop1, decode_sop2, decode_sopc, decode_sopk, decode_sopp
from .decode_vector import decode_vop1, decode_vop2, decode_vop3, decode_vop3p, decode_vopc
from .errors import EmulatorError
from .instruction import is_branch, make_instruction

_MAX_WORDS = 4      # the longest instruction: v_mfma_scale_* (two dword pairs)
# (mask, value) of word 0's top bits -> decoder, tried in order (longer prefixes first)
_FORMATS = (
    (0xFF800000, 0xBE800000, decode_sop1),
    (0xFF800000, 0xBF000000, decode_sopc),
    (0xFF800000, 0xBF800000, decode_sopp),
    (0xF0000000, 0xB0000000, decode_sopk),
    (0xC0000000, 0x80000000, decode_sop2),
    (0xFE000000, 0x7E000000, decode_vop1),
    (0xFE000000, 0x7C000000, decode_vopc),
    (0x80000000, 0x00000000, decode_vop2),
    (0xFF800000, 0xD3800000, decode_vop3p),
    (0xFC000000, 0xD0000000, decode_vop3),
    (0xFC000000, 0xC0000000, decode_smem),
    (0xFC000000, 0xD8000000, decode_ds),
    (0xFC000000, 0xDC000000, decode_flat),
    (0xFC000000, 0xE0000000, decode_mubuf),
)


def decode_one(words, addr: int):
    """The Instruction at the start of `words` (a sequence of dwords) at byte address `addr`."""
    w0 = words[0]
    for mask, value, decoder in _FORMATS:
        if w0 & mask == value:
            break
    else:
        raise EmulatorError(f"0x{w0:08x} at 0x{addr:x}: no gfx950 encoding starts so")
    try:
        mnemonic, tokens, mods, size = decoder(words)
    except EmulatorError as e:
        raise EmulatorError(f"0x{w0:08x} at 0x{addr:x}: {e}") from None
    except IndexError:
        size = len(words) + 1
    if size > len(words):
        raise EmulatorError(f"0x{w0:08x} at 0x{addr:x}: the instruction runs past the section")
    operand_text = " ".join(filter(None, [", ".join(tokens), " ".join(mods)]))
    ins = make_instruction(addr, 4 * size, mnemonic, operand_text)
    if is_branch(ins.mnemonic):
        ins.raw = str(w0 & 0xFFFF)
    return ins


def decode_section(addr: int, data: bytes):
    """Every instruction of a code section loaded at `addr`, in address order."""
    words = struct.unpack(f"<{len(data) // 4}I", data[: len(data) // 4 * 4])
    instructions, i = [], 0
    while i < len(words):
        ins = decode_one(words[i:i + _MAX_WORDS], addr + 4 * i)
        instructions.append(ins)
        i += ins.size // 4
    return instructions


def branch_target_addr(ins) -> int:
    """The byte address a branch jumps to."""
    simm16 = int(ins.raw)
    return ins.addr + 4 + 4 * (simm16 - 0x10000 if simm16 >= 0x8000 else simm16)


def kernel_instructions(section, entry: int, entries, name: str):
    """The instructions of the kernel at `entry` (up to the next of `entries`), branches resolved."""
    end = min((e for e in entries if e > entry), default=float("inf"))
    instructions = [ins for ins in section if entry <= ins.addr < end]
    if not instructions or instructions[0].addr != entry:
        raise EmulatorError(f"kernel {name}: no instruction starts at its entry 0x{entry:x}")
    index_of = {ins.addr: i for i, ins in enumerate(instructions)}
    for ins in instructions:
        if is_branch(ins.mnemonic):
            dest = branch_target_addr(ins)
            if dest not in index_of:
                raise EmulatorError(f"kernel {name}: branch target 0x{dest:x} of '{ins.text}' at "
                                    f"0x{ins.addr:x} is not an instruction of this kernel")
            ins.target = index_of[dest]
    return instructions
