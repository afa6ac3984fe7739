"""The AMDGPU code-object metadata note (code object v3+): the msgpack map in the NT_AMDGPU_METADATA note.

The loader needs one field from it: a kernel's `.kernarg_segment_size`, for code objects whose kernel descriptor
leaves KERNARG_SIZE at 0 (hand-assembled ones, e.g. AMD's aiter kernels). LLVM AMDGPUUsage, "Code Object V3 to V5
Metadata": note type 32 (NT_AMDGPU_METADATA), owner "AMDGPU", a msgpack map whose `amdhsa.kernels` is a list of
maps with `.symbol` ("<name>.kd") and `.kernarg_segment_size`. Only the msgpack forms that note uses are decoded.
"""
import struct

from .errors import EmulatorError

NT_AMDGPU_METADATA = 32
_FIXED = {0xC0: None, 0xC2: False, 0xC3: True}
_SIZED = {  # tag: (struct format of the length or value, kind)
    0xCC: ("B", "value"), 0xCD: (">H", "value"), 0xCE: (">I", "value"), 0xCF: (">Q", "value"),
    0xD0: ("b", "value"), 0xD1: (">h", "value"), 0xD2: (">i", "value"), 0xD3: (">q", "value"),
    0xCA: (">f", "value"), 0xCB: (">d", "value"),
    0xD9: ("B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"),
    0xC4: ("B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"),
    0xDC: (">H", "array"), 0xDD: (">I", "array"), 0xDE: (">H", "map"), 0xDF: (">I", "map"),
}


def _decode(data: bytes, pos: int):
    """(value, next position) of the msgpack object at data[pos]."""
    tag = data[pos]
    pos += 1
    if tag <= 0x7F:
        return tag, pos
    if tag >= 0xE0:
        return tag - 0x100, pos
    if 0x80 <= tag <= 0x8F:
        return _container("map", tag & 0x0F, data, pos)
    if 0x90 <= tag <= 0x9F:
        return _container("array", tag & 0x0F, data, pos)
    if 0xA0 <= tag <= 0xBF:
        n = tag & 0x1F
        return data[pos:pos + n].decode(), pos + n
    if tag in _FIXED:
        return _FIXED[tag], pos
    if tag not in _SIZED:
        raise EmulatorError(f"metadata note: msgpack tag 0x{tag:02x} is not decoded")
    fmt, kind = _SIZED[tag]
    (n,) = struct.unpack_from(fmt, data, pos)
    pos += struct.calcsize(fmt)
    if kind == "value":
        return n, pos
    if kind in ("str", "bin"):
        raw = data[pos:pos + n]
        return (raw.decode() if kind == "str" else raw), pos + n
    return _container(kind, n, data, pos)


def _container(kind, n, data, pos):
    items = []
    for _ in range(2 * n if kind == "map" else n):
        item, pos = _decode(data, pos)
        items.append(item)
    return (dict(zip(items[::2], items[1::2])) if kind == "map" else items), pos


def kernarg_sizes(notes):
    """{kernel name: kernarg segment bytes} from the notes' (owner, type, descriptor bytes)."""
    sizes = {}
    for owner, note_type, desc in notes:
        if owner != b"AMDGPU" or note_type != NT_AMDGPU_METADATA:
            continue
        meta, _ = _decode(desc, 0)
        for kernel in meta.get("amdhsa.kernels", []):
            symbol = kernel.get(".symbol", "")
            if symbol.endswith(".kd") and ".kernarg_segment_size" in kernel:
                sizes[symbol[:-3]] = kernel[".kernarg_segment_size"]
    return sizes


def elf_notes(data: bytes, sections):
    """(owner, type, descriptor) of every note in the SHT_NOTE sections (ELF64 header rows as _Elf keeps them)."""
    notes = []
    for _, sh_type, _, _, offset, size, *_ in sections:
        if sh_type != 7:        # SHT_NOTE
            continue
        pos, end = offset, offset + size
        while pos + 12 <= end:
            namesz, descsz, note_type = struct.unpack_from("<III", data, pos)
            pos += 12
            owner = data[pos:pos + namesz].rstrip(b"\0")
            pos += (namesz + 3) & ~3
            notes.append((owner, note_type, data[pos:pos + descsz]))
            pos += (descsz + 3) & ~3
    return notes
