"""Load a gfx950 code object: its kernels' descriptors (from .rodata) and instructions.

The kernel descriptor is the 64-byte `<name>.kd` object the AMDHSA ABI defines
(LLVM AMDGPUUsage, "Kernel Descriptor"): group segment size at byte 0, kernarg size
at 8, entry offset (relative to the descriptor) at 16, COMPUTE_PGM_RSRC3/1/2 at 44/48/52,
kernel code properties at 56. The fields the emulator needs are decoded here; a kernel
that enables something the dispatcher does not set up is refused by `check_supported`.
A descriptor whose kernarg size is 0 (hand-assembled objects such as AMD's aiter kernels)
takes it from the metadata note (metadata.py).
"""
import struct
from dataclasses import dataclass

from .disasm import parse_disassembly, run_objdump
from .errors import EmulatorError
from .metadata import elf_notes, kernarg_sizes

_VGPR_GRANULE = 8          # gfx90a+/gfx950: VGPR (arch + acc) blocks of 8
_SGPR_GRANULE = 16         # gfx9: SGPR blocks of 16 (the hardware always gives 102+)


@dataclass
class KernelDescriptor:
    """The fields of a kernel descriptor the emulator uses (byte sizes, register counts)."""
    lds_bytes: int
    scratch_bytes: int
    kernarg_bytes: int
    entry_offset: int
    vgprs: int                  # arch + acc VGPRs per lane, as allocated (granule-rounded)
    accum_offset: int           # first AGPR in the unified file; arch VGPRs are below it
    denorm_mode_32: int         # 0 flush inputs and outputs, 1 outputs, 2 inputs, 3 none
    denorm_mode_16_64: int      # the same for float16 and float64
    dx10_clamp: bool            # the clamp modifier turns NaN into 0
    ieee_mode: bool
    user_sgpr_count: int
    workgroup_id_enable: tuple  # (x, y, z)
    workgroup_info: bool
    workitem_id_dims: int       # 1 = x only, 2 = x and y, 3 = x, y and z
    private_segment: bool
    code_properties: int

    @classmethod
    def from_bytes(cls, kd: bytes):
        """Decode a 64-byte descriptor."""
        lds, scratch, kernarg = struct.unpack_from("<III", kd, 0)
        (entry,) = struct.unpack_from("<q", kd, 16)
        rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", kd, 44)
        (props,) = struct.unpack_from("<H", kd, 56)
        return cls(
            lds_bytes=lds, scratch_bytes=scratch, kernarg_bytes=kernarg, entry_offset=entry,
            vgprs=((rsrc1 & 0x3F) + 1) * _VGPR_GRANULE,
            accum_offset=((rsrc3 & 0x3F) + 1) * 4,
            denorm_mode_32=(rsrc1 >> 16) & 3,
            denorm_mode_16_64=(rsrc1 >> 18) & 3,
            dx10_clamp=bool((rsrc1 >> 21) & 1),
            ieee_mode=bool((rsrc1 >> 23) & 1),
            user_sgpr_count=(rsrc2 >> 1) & 0x1F,
            workgroup_id_enable=tuple(bool((rsrc2 >> b) & 1) for b in (7, 8, 9)),
            workgroup_info=bool((rsrc2 >> 10) & 1),
            workitem_id_dims=((rsrc2 >> 11) & 3) + 1,
            private_segment=bool(rsrc2 & 1),
            code_properties=props,
        )

    @property
    def agprs(self) -> int:
        """AGPRs allocated: the unified file above accum_offset."""
        return max(self.vgprs - self.accum_offset, 0)

    def check_supported(self, name: str):
        """Refuse descriptor features the dispatcher does not model."""
        kernarg_ptr_only = self.code_properties & 0x7F == 0x08
        problems = []
        if not kernarg_ptr_only or self.user_sgpr_count != 2:
            problems.append("user SGPRs other than the kernarg pointer "
                            f"(kernel_code_properties=0x{self.code_properties:x}, "
                            f"user_sgpr_count={self.user_sgpr_count})")
        if self.private_segment or self.scratch_bytes:
            problems.append("scratch (private segment)")
        if self.workgroup_info:
            problems.append("the workgroup info SGPR")
        if self.code_properties & (1 << 10):
            problems.append("wave32")
        if problems:
            raise EmulatorError(f"kernel {name}: the emulator does not set up "
                                + "; ".join(problems))


@dataclass
class Kernel:
    """One kernel: its name, descriptor and instruction list (index 0 = entry)."""
    name: str
    descriptor: KernelDescriptor
    instructions: list


class CodeObject:
    """A loaded code object: `kernels` maps kernel name -> Kernel."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            elf = _Elf(f.read())
        functions = parse_disassembly(run_objdump(path), elf.labels)
        addr_to_function = {ins[0].addr: (name, ins) for name, ins in functions.items() if ins}
        metadata_kernarg_bytes = kernarg_sizes(elf_notes(elf.data, elf.sections))
        self.kernels = {}
        for sym_name, (addr, size) in elf.symbols.items():
            if not sym_name.endswith(".kd") or size != 64:
                continue
            name = sym_name[:-3]
            kd = KernelDescriptor.from_bytes(elf.read(addr, 64))
            kd.kernarg_bytes = _kernarg_bytes(name, kd.kernarg_bytes, metadata_kernarg_bytes.get(name))
            entry = addr + kd.entry_offset
            if entry not in addr_to_function:
                raise EmulatorError(f"kernel {name}: no disassembled code at entry 0x{entry:x}")
            self.kernels[name] = Kernel(name, kd, addr_to_function[entry][1])

    def kernel(self, name: str) -> Kernel:
        """The Kernel called `name`; EmulatorError listing the kernels if there is none."""
        if name not in self.kernels:
            raise EmulatorError(f"no kernel '{name}' in {self.path}; "
                                f"it has {sorted(self.kernels)}")
        return self.kernels[name]


def _kernarg_bytes(name, descriptor_bytes, metadata_bytes):
    """The kernarg size: the descriptor's, or the metadata note's where the descriptor leaves it 0."""
    if descriptor_bytes and metadata_bytes is not None and descriptor_bytes != metadata_bytes:
        raise EmulatorError(f"kernel {name}: descriptor kernarg size {descriptor_bytes}, metadata {metadata_bytes}")
    return descriptor_bytes or metadata_bytes or 0


def load_code_object(path: str) -> CodeObject:
    """Parse the code object at `path` (ELF, gfx950) into a CodeObject."""
    return CodeObject(str(path))


class _Elf:
    """Just enough ELF64 reading: section table, symbols, bytes at a virtual address.
    `labels`: local symbols without a type (branch targets some assemblers keep, as in AMD's aiter objects)."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2:
            raise EmulatorError("not an ELF64 file")
        self.data = data
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                         for i in range(shnum)]
        self.symbols = {}
        self.labels = set()
        for sec in self.sections:
            if sec[1] not in (2, 11):       # SHT_SYMTAB, SHT_DYNSYM
                continue
            strtab = self.sections[sec[6]]
            for off in range(sec[4], sec[4] + sec[5], 24):
                st_name, st_info, _, _, value, size = struct.unpack_from("<IBBHQQ", data, off)
                name_at = strtab[4] + st_name
                name = data[name_at:data.index(b"\0", name_at)].decode()
                if name:
                    self.symbols[name] = (value, size)
                if name and st_info == 0:       # STB_LOCAL, STT_NOTYPE
                    self.labels.add(name)

    def read(self, addr: int, size: int) -> bytes:
        """`size` bytes at virtual address `addr`, from the section that holds them."""
        for _, sh_type, _, sh_addr, sh_offset, sh_size, *_ in self.sections:
            if sh_type != 8 and sh_addr <= addr and addr + size <= sh_addr + sh_size:
                return self.data[sh_offset + addr - sh_addr: sh_offset + addr - sh_addr + size]
        raise EmulatorError(f"no section holds 0x{addr:x}..0x{addr + size:x}")
