"""Load a gfx950 code object: its kernels' descriptors (from .rodata) and instructions (decode.py).

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

from .decode import decode_section, kernel_instructions
from .elf import Elf
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
            elf = Elf(f.read())
        section = [ins for addr, data in elf.executable_sections() for ins in decode_section(addr, data)]
        metadata_kernarg_bytes = kernarg_sizes(elf_notes(elf.data, elf.sections))
        descriptors = {}
        for sym_name, (addr, size) in elf.symbols.items():
            if sym_name.endswith(".kd") and size == 64:
                name = sym_name[:-3]
                kd = KernelDescriptor.from_bytes(elf.read(addr, 64))
                kd.kernarg_bytes = _kernarg_bytes(name, kd.kernarg_bytes, metadata_kernarg_bytes.get(name))
                descriptors[name] = (addr, kd)
        entries = {name: addr + kd.entry_offset for name, (addr, kd) in descriptors.items()}
        self.kernels = {name: Kernel(name, kd, kernel_instructions(section, entries[name],
                                                                   entries.values(), name))
                        for name, (_, kd) in descriptors.items()}

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
