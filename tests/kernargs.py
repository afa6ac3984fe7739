"""The gfx950 kernel-argument structs as ctypes, read from their C definitions (hip/fwd_kernarg.h,
hip/quantize_kernarg.h, hip/merge_state_kernarg.h, hip/varlen_check_kernarg.h) at import: the one Python mirror of
them, so that no test hand-copies a layout.

The parser reads only what those headers use: one `typedef struct name { ... } name;` of fields
`<stdint type> a, b;` (comments allowed). Anything else raises, and tests/test_gfx950_static.py holds the
result to the C compiler's offsetof / sizeof and to the assembly's `.set karg_<field>, N` lines.
"""
import ctypes
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
C_TYPES = {"uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32,
           "float": ctypes.c_float}
_FIELD_LINE = re.compile(r"^\s*(\w+)\s+(\w+(?:\s*,\s*\w+)*)\s*;\s*$")


def declared_fields(header, struct):
    """[(field, C type name)] of `typedef struct struct { ... } struct;` in hip/<header>, in declaration order."""
    text = re.sub(r"/\*.*?\*/", "", (ROOT / "hip" / header).read_text(), flags=re.S)
    body = re.search(rf"typedef struct {struct} \{{(.*?)\}} {struct};", text, re.S)
    if body is None:
        raise ValueError(f"hip/{header}: no `typedef struct {struct} {{ ... }} {struct};`")
    fields = []
    for line in filter(str.strip, body.group(1).splitlines()):
        m = _FIELD_LINE.match(line)
        if m is None or m.group(1) not in C_TYPES:
            raise ValueError(f"hip/{header}: {struct}: cannot read `{line.strip()}`")
        fields += [(name.strip(), m.group(1)) for name in m.group(2).split(",")]
    return fields


def mirror(header, struct):
    """A ctypes.Structure laid out as `struct` of hip/<header> (natural alignment, as the C compiler lays it)."""
    fields = [(name, C_TYPES[c_type]) for name, c_type in declared_fields(header, struct)]
    return type(struct, (ctypes.Structure,), {"_fields_": fields})


def offsets(structure):
    """{field: byte offset} of a ctypes.Structure, and "size": its sizeof."""
    return {name: getattr(structure, name).offset for name, _ in structure._fields_} | \
        {"size": ctypes.sizeof(structure)}


def assembly_offsets(include):
    """{field: N} of the `.set karg_<field>, N` lines of asm/gfx950/<include> ("size": the struct's size)."""
    text = (ROOT / "asm" / "gfx950" / include).read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\.set karg_(\w+), (\d+)\s*$", text, re.M)}


FwdKernarg = mirror("fwd_kernarg.h", "fp_gfx950_fwd_kernarg")
QuantizeKernarg = mirror("quantize_kernarg.h", "fp_gfx950_quantize_kernarg")
MergeStateKernarg = mirror("merge_state_kernarg.h", "fp_gfx950_merge_state_kernarg")
VarlenCheckKernarg = mirror("varlen_check_kernarg.h", "fp_gfx950_varlen_check_kernarg")
QuantizePagedKernarg = mirror("quantize_kernarg.h", "fp_gfx950_quantize_paged_kernarg")
# where the assembly's karg_* lines live
FWD_CONTRACT, QUANTIZE_CONTRACT, QUANTIZE_PAGED_CONTRACT = "fwd_contract.inc", "quantize.inc", "quantize_paged.inc"
MERGE_STATE_CONTRACT, VARLEN_CHECK_CONTRACT = "merge_state.inc", "varlen_check.s"
