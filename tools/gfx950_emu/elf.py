"""Just enough ELF64 reading for a gfx950 code object: sections, symbols, bytes at an address."""
import struct

from .errors import EmulatorError

_SHT_PROGBITS = 1
_SHF_EXECINSTR = 0x4


class Elf:
    """Just enough ELF64 reading: section table, symbols, bytes at a virtual address."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2:
            raise EmulatorError("not an ELF64 file")
        self.data = data
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                         for i in range(shnum)]
        self.symbols = {}
        for sec in self.sections:
            if sec[1] not in (2, 11):       # SHT_SYMTAB, SHT_DYNSYM
                continue
            strtab = self.sections[sec[6]]
            for off in range(sec[4], sec[4] + sec[5], 24):
                st_name, _, _, _, value, size = struct.unpack_from("<IBBHQQ", data, off)
                name_at = strtab[4] + st_name
                name = data[name_at:data.index(b"\0", name_at)].decode()
                if name:
                    self.symbols[name] = (value, size)

    def executable_sections(self):
        """(virtual address, bytes) of each section that holds code (SHF_EXECINSTR)."""
        return [(sh_addr, self.data[sh_offset:sh_offset + sh_size])
                for _, sh_type, sh_flags, sh_addr, sh_offset, sh_size, *_ in self.sections
                if sh_type == _SHT_PROGBITS and sh_flags & _SHF_EXECINSTR]

    def read(self, addr: int, size: int) -> bytes:
        """`size` bytes at virtual address `addr`, from the section that holds them."""
        for _, sh_type, _, sh_addr, sh_offset, sh_size, *_ in self.sections:
            if sh_type != 8 and sh_addr <= addr and addr + size <= sh_addr + sh_size:
                return self.data[sh_offset + addr - sh_addr: sh_offset + addr - sh_addr + size]
        raise EmulatorError(f"no section holds 0x{addr:x}..0x{addr + size:x}")
