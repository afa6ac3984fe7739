"""The one exception type of the emulator.

Every failure the emulator detects (an unknown mnemonic, an operand it cannot parse, an
out-of-bounds access, a register read before its load was waited for, a descriptor
feature it does not set up) raises EmulatorError with a message that names the
instruction text and its byte address where one is involved.
"""


class EmulatorError(Exception):
    """A kernel did something the emulator rejects (or cannot model); the message says what."""


def at(ins) -> str:
    """`'<text>' at 0x<addr>` for an Instruction, for error messages."""
    return f"'{ins.text}' at 0x{ins.addr:x}"
