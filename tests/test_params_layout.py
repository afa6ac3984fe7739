"""The ctypes mirrors (python/flashprefill/_params.py) match include/flashprefill.h: same fields, offsets, sizes.

A small C program compiled against the header prints sizeof and offsetof of every field the mirror names; the
header's struct bodies are parsed for field names so that a field added in C but not in Python fails too.
"""
import ctypes
import pathlib
import re
import shutil
import subprocess

import pytest

import markers

from flashprefill._params import (Descale, DescaleKind, DType, MergeStateParams, Params, PrepareVParams,
                                  QuantizePagedParams, QuantizeParams, QueryParams, QueryResult, Status, VLayout)

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "flashprefill.h"
C_TYPES = {Params: "flashprefill_params", Descale: "flashprefill_descale",
           QuantizeParams: "flashprefill_quantize_params", QuantizePagedParams: "flashprefill_quantize_paged_params",
           PrepareVParams: "flashprefill_prepare_v_params",
           MergeStateParams: "flashprefill_merge_state_params", QueryParams: "flashprefill_query_params",
           QueryResult: "flashprefill_query_result"}


def mirrored_fields(struct, prefix=""):
    """[(dotted name, offset, size)] of every leaf field of a ctypes Structure, nested structs flattened."""
    fields = []
    for name, ctype in struct._fields_:
        offset = getattr(struct, name).offset
        if issubclass(ctype, ctypes.Structure):
            fields += [(f"{prefix}{name}.{sub}", offset + sub_offset, size)
                       for sub, sub_offset, size in mirrored_fields(ctype)]
        else:
            fields.append((f"{prefix}{name}", offset, ctypes.sizeof(ctype)))
    return fields


def header_fields(c_type):
    """Field names of `typedef struct c_type {...} c_type;` in the header, in order."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (c_type, c_type), text, flags=re.S).group(1)
    names = []
    for declaration in body.split(";"):
        declaration = declaration.strip()
        if declaration:
            declarators = re.sub(r"^(const\s+)?\w+\s*", "", declaration)  # drop the type
            names += [d.strip().lstrip("*").strip() for d in declarators.split(",")]
    return names


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    """{(c_type, dotted field or ""): (offset, size)} as the C compiler lays them out."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip(markers.NO_CC)
    lines = []
    for struct, c_type in C_TYPES.items():
        lines.append(f'printf("{c_type} - 0 %zu\\n", sizeof({c_type}));')
        for name, _, _ in mirrored_fields(struct):
            lines.append(f'printf("{c_type} {name} %zu %zu\\n", offsetof({c_type}, {name}), '
                         f'sizeof((({c_type} *)0)->{name}));')
    source = ("#include <stddef.h>\n#include <stdio.h>\n#include \"flashprefill.h\"\nint main(void)\n{\n    "
              + "\n    ".join(lines) + "\n    return 0;\n}\n")
    directory = tmp_path_factory.mktemp("layout")
    (directory / "probe.c").write_text(source)
    subprocess.run([compiler, "-std=c11", "-Wall", "-Werror", f"-I{HEADER.parent}", "probe.c", "-o", "probe"],
                   cwd=directory, check=True)
    output = subprocess.run([str(directory / "probe")], check=True, capture_output=True, text=True).stdout
    layout = {}
    for line in output.splitlines():
        c_type, name, offset, size = line.split()
        layout[(c_type, "" if name == "-" else name)] = (int(offset), int(size))
    return layout


@pytest.mark.parametrize("struct", C_TYPES, ids=C_TYPES.values())
def test_struct_size(c_layout, struct):
    assert ctypes.sizeof(struct) == c_layout[(C_TYPES[struct], "")][1]


@pytest.mark.parametrize("struct", C_TYPES, ids=C_TYPES.values())
def test_field_offsets_and_sizes(c_layout, struct):
    for name, offset, size in mirrored_fields(struct):
        assert (offset, size) == c_layout[(C_TYPES[struct], name)], name


@pytest.mark.parametrize("struct", C_TYPES, ids=C_TYPES.values())
def test_every_c_field_is_mirrored(struct):
    assert [name for name, _ in struct._fields_] == header_fields(C_TYPES[struct])


def header_enum(c_type):
    """{NAME: value} of `typedef enum c_type {...}` in the header."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    body = re.search(r"typedef enum %s \{(.*?)\}" % c_type, text, flags=re.S).group(1)
    return {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*(-?\d+)", body)}


@pytest.mark.parametrize("enum, c_type, prefix", [
    (Status, "flashprefill_status", "FLASHPREFILL_"),
    (DType, "flashprefill_dtype", "FLASHPREFILL_DTYPE_"),
    (DescaleKind, "flashprefill_descale_kind", "FLASHPREFILL_DESCALE_"),
    (VLayout, "flashprefill_v_layout", "FLASHPREFILL_V_LAYOUT_"),
], ids=["status", "dtype", "descale_kind", "v_layout"])
def test_enums_match_header(enum, c_type, prefix):
    assert {f"{prefix}{member.name}": int(member) for member in enum} == header_enum(c_type)


@pytest.mark.parametrize("struct", [Params, QuantizeParams, QuantizePagedParams, PrepareVParams, MergeStateParams,
                                    QueryParams, QueryResult], ids=lambda s: C_TYPES[s])
def test_struct_bytes_defaults_to_the_c_size(c_layout, struct):
    """A new mirror carries its size first, as the header's *_init() functions set it; an explicit value stays."""
    assert struct().struct_bytes == c_layout[(C_TYPES[struct], "")][1]
    assert c_layout[(C_TYPES[struct], "struct_bytes")] == (0, 4)
    assert struct(struct_bytes=7).struct_bytes == 7


# flashprefill_params as 0.9.0 left it: 0.10.0's fields (varlen batches, paged KV) come after all of these.
PARAMS_0_9_LAST_FIELD = "v_layout"
PARAMS_0_10_FIELDS = ["cu_seqlens_q", "cu_seqlens_k", "seqused_k", "total_q", "total_k", "block_table",
                      "block_table_stride", "page_size", "num_pages", "workspace", "workspace_bytes", "q_dtype",
                      "q_rotation_signs"]


def test_params_fields_of_0_10_are_appended(c_layout):
    """The ABI appends (the header's rule from 0.8.0 on): 0.9.0's struct is a prefix of 0.10.0's, at the same offsets,
    and the new fields begin where it ended."""
    names = [name for name, _ in Params._fields_]
    first = names.index(PARAMS_0_9_LAST_FIELD) + 1
    assert names[first:] == PARAMS_0_10_FIELDS
    prefix = type("Params_0_9", (ctypes.Structure,), {"_fields_": Params._fields_[:first]})
    assert c_layout[("flashprefill_params", PARAMS_0_10_FIELDS[0])][0] == ctypes.sizeof(prefix)
