"""Static checks of the gfx950 code objects (CPU only; `make amd` builds them with clang-22): the kernel
argument offsets against hip/fwd_kernarg.h (the forward kernels, fwd_*), hip/quantize_kernarg.h (quantize_d*,
quantize_paged_d*), hip/merge_state_kernarg.h (merge_state_*) and hip/varlen_check_kernarg.h (varlen_check), the
varlen check's fault codes against src/launch_common.h, the resources in the code object metadata against the
kernel's own register map, the instruction mix, and the wait-state hazard lint (tools/gfx950_lint.py, its table
tools/gfx950_hazards.py)."""
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import kernargs
import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gfx950_hazards  # noqa: E402
import gfx950_lint  # noqa: E402

pytestmark = markers.needs_llvm22
ALL_KERNELS = sorted(p.stem for p in (ROOT / "asm" / "gfx950").glob("*.s"))
KERNELS = [name for name in ALL_KERNELS if name.startswith("fwd_")]  # the forward kernels' contract
QUANTIZERS = [name for name in ALL_KERNELS if name.startswith("quantize_d")]  # the quantizer's, one per head dim
PAGED_WRITERS = [name for name in ALL_KERNELS if name.startswith("quantize_paged_d")]  # the paged cache writer's
MERGERS = [name for name in ALL_KERNELS if name.startswith("merge_state_")]  # merge_state's, one per dtype pair
ONE_WAVE = QUANTIZERS + PAGED_WRITERS + MERGERS + ["varlen_check"]  # the one-wave kernels
assert QUANTIZERS and PAGED_WRITERS and MERGERS and sorted(KERNELS + ONE_WAVE) == ALL_KERNELS, ALL_KERNELS
# each one-wave kernel's argument struct, by name prefix
ONE_WAVE_KERNARGS = {"quantize_d": ("quantize_kernarg.h", "fp_gfx950_quantize_kernarg"),
                     "quantize_paged_d": ("quantize_kernarg.h", "fp_gfx950_quantize_paged_kernarg"),
                     "merge_state_": ("merge_state_kernarg.h", "fp_gfx950_merge_state_kernarg"),
                     "varlen_check": ("varlen_check_kernarg.h", "fp_gfx950_varlen_check_kernarg")}
LDS_BYTES = 160 * 1024
VGPRS_PER_LANE = 512
def code_object(name):
    path = ROOT / "build" / "gfx950" / f"{name}.co"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make amd`")
    return path


def assembly_text(name):
    """asm/gfx950/<name>.s with the files it .includes."""
    text = (ROOT / "asm" / "gfx950" / f"{name}.s").read_text()
    for include in re.findall(r'^\.include "([^"]+)"', text, re.M):
        text += (ROOT / "asm" / "gfx950" / include).read_text()
    return text


def assembly_sets(name):
    """The `.set symbol, integer` lines (a comment may follow) of asm/gfx950/<name>.s and its includes."""
    text = assembly_text(name)
    return {m.group(1): int(m.group(2), 0)
            for m in re.finditer(r"^\.set (\w+), (\d+|0x[0-9a-fA-F]+)\s*(?://.*)?$", text, re.M)}


@pytest.mark.parametrize("name", ALL_KERNELS)
def test_register_names_do_not_share_a_register(name):
    """Every SGPR / VGPR name of the kernel and its includes (`.set` / `.equiv` to a number) names its own
    register. (The fp8 kernel once put its score scale in the SGPR of the wave index, which the ping-pong's
    exit barrier reads: it passed the emulator only because waves that end release the barrier.)"""
    text = assembly_text(name)
    for kind in ("s", "v"):
        names = {}
        for m in re.finditer(rf"^\.(?:set|equiv) ({kind}_\w+), (\d+)\b", text, re.M):
            names.setdefault(int(m.group(2)), []).append(m.group(1))
        shared = {n: sorted(set(ns)) for n, ns in names.items() if len(set(ns)) > 1}
        assert not shared, f"{name}: {kind.upper()}GPRs named twice: {shared}"


def _c_offsets(tmp, header, struct):
    """offsetof each field of `struct` in hip/<header> (as kernargs.py reads the fields), and its sizeof, from a
    compiled C program."""
    fields = [f for f, _ in kernargs.declared_fields(header, struct)]
    body = "\n".join(f'    printf("{f} %zu\\n", offsetof({struct}, {f}));' for f in fields)
    (tmp / "k.c").write_text(f"""#include <stddef.h>
#include <stdio.h>
#include "{header}"
int main(void) {{
{body}
    printf("size %zu\\n", sizeof({struct}));
    return 0;
}}
""")
    subprocess.run(["cc", "-I", str(ROOT / "hip"), str(tmp / "k.c"), "-o", str(tmp / "k")], check=True)
    out = subprocess.run([str(tmp / "k")], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


@pytest.fixture(scope="module")
def c_kernarg(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip(markers.NO_CC)
    return _c_offsets(tmp_path_factory.mktemp("kernarg"), "fwd_kernarg.h", "fp_gfx950_fwd_kernarg")


def test_kernarg_mirrors_match_c(c_kernarg, tmp_path):
    """The ctypes structs that tests/kernargs.py builds from the headers lay out every field as the C compiler does."""
    assert kernargs.offsets(kernargs.FwdKernarg) == c_kernarg
    quantize = _c_offsets(tmp_path, "quantize_kernarg.h", "fp_gfx950_quantize_kernarg")
    assert kernargs.offsets(kernargs.QuantizeKernarg) == quantize
    paged = _c_offsets(tmp_path, "quantize_kernarg.h", "fp_gfx950_quantize_paged_kernarg")
    assert kernargs.offsets(kernargs.QuantizePagedKernarg) == paged
    merge = _c_offsets(tmp_path, "merge_state_kernarg.h", "fp_gfx950_merge_state_kernarg")
    assert kernargs.offsets(kernargs.MergeStateKernarg) == merge
    check = _c_offsets(tmp_path, "varlen_check_kernarg.h", "fp_gfx950_varlen_check_kernarg")
    assert kernargs.offsets(kernargs.VarlenCheckKernarg) == check


@pytest.mark.parametrize("name", KERNELS)
def test_kernarg_offsets_match_c(name, c_kernarg):
    sets = {k.removeprefix("karg_"): v for k, v in assembly_sets(name).items() if k.startswith("karg_")}
    assert sets == c_kernarg, name


@pytest.mark.parametrize("name", ONE_WAVE)
def test_one_wave_kernarg_offsets_match_c(name, tmp_path):
    if shutil.which("cc") is None:
        pytest.skip(markers.NO_CC)
    (header, struct), = (v for prefix, v in ONE_WAVE_KERNARGS.items() if name.startswith(prefix))
    c = _c_offsets(tmp_path, header, struct)
    sets = {k.removeprefix("karg_"): v for k, v in assembly_sets(name).items() if k.startswith("karg_")}
    assert sets == c, name


def _metadata(path):
    notes = subprocess.run(["llvm-readelf-22", "--notes", str(path)], capture_output=True, text=True, check=True).stdout
    fields = dict(re.findall(r"^\s+\.(\w+):\s+(\S+)\s*$", notes, re.M))
    return {k: int(v) for k, v in fields.items() if v.isdigit()}


WAVES_PER_WORKGROUP, SIMDS_PER_CU, VGPRS_PER_SIMD_LANE = 8, 4, 512
SGPRS_PER_WAVE = 102  # addressable s0..s101 on gfx9 (VCC and the trap registers above)


@pytest.mark.parametrize("name", KERNELS)
def test_descriptor_within_plan(name):
    """The descriptor the assembler computed: no AGPRs, no scratch, the LDS of three KV tile buffers, and few
    enough VGPRs that the 8 waves of a workgroup fit the CU (two waves per SIMD)."""
    from gfx950_emu import load_code_object
    kd = load_code_object(str(code_object(name))).kernel(name).descriptor
    sets = assembly_sets(name)
    assert kd.agprs == 0 and kd.scratch_bytes == 0
    own = re.search(r"^\.set kHeadDimQk, (\d+)", (ROOT / "asm" / "gfx950" / f"{name}.s").read_text(), re.M)
    # kBuffers x (K tile + V tile, rows padded by kLdsPad and kVLdsPad, and K's dims 128-191 in rows half as long:
    # fwd_lds_layout)
    keys, row, pad, v_pad = sets["kTileKeys"], sets["kRowBytes"], sets["kLdsPad"], sets["kVLdsPad"]
    k_tail = keys * (row // 2 + pad) if own and int(own.group(1)) == 192 else 0
    assert kd.lds_bytes == 3 * (keys * (row + pad) + k_tail + keys * (row + v_pad))
    assert kd.vgprs <= VGPRS_PER_SIMD_LANE // (WAVES_PER_WORKGROUP // SIMDS_PER_CU), f"{kd.vgprs} VGPRs"
    assert kd.vgprs >= sets["v_end"], "the allocation must cover the register map"
    meta = _metadata(code_object(name))
    used_sgprs = max(int(m) for m in re.findall(r"\bs\[?(\d+)", "\n".join(
        ops for _, _, ops in gfx950_lint.disassemble(str(code_object(name)))))) + 1
    assert used_sgprs <= meta["sgpr_count"] <= SGPRS_PER_WAVE, f"s{used_sgprs - 1} used, {meta['sgpr_count']} declared"


@pytest.mark.parametrize("name", ONE_WAVE)
def test_one_wave_descriptor_within_plan(name):
    """The quantizer, merge_state and the varlen check: one wave, no LDS, no AGPRs, no scratch; the declared SGPRs
    cover those used."""
    from gfx950_emu import load_code_object
    kd = load_code_object(str(code_object(name))).kernel(name).descriptor
    assert kd.agprs == 0 and kd.scratch_bytes == 0 and kd.lds_bytes == 0
    assert assembly_sets(name)["v_end"] <= kd.vgprs <= VGPRS_PER_LANE
    meta = _metadata(code_object(name))
    assert meta["max_flat_workgroup_size"] == 64
    used_sgprs = max(int(m) for m in re.findall(r"\bs\[?(\d+)", "\n".join(
        ops for _, _, ops in gfx950_lint.disassemble(str(code_object(name)))))) + 1
    assert used_sgprs <= meta["sgpr_count"] <= SGPRS_PER_WAVE, f"s{used_sgprs - 1} used, {meta['sgpr_count']} declared"


@pytest.mark.parametrize("name", ALL_KERNELS)
def test_resources_within_plan(name):
    meta, sets = _metadata(code_object(name)), assembly_sets(name)
    assert meta["kernarg_segment_size"] == sets["karg_size"]
    assert meta["vgpr_count"] <= sets["v_end"] <= VGPRS_PER_LANE, "more VGPRs than the register map allots"
    assert meta["group_segment_fixed_size"] <= LDS_BYTES
    assert meta["private_segment_fixed_size"] == 0, "scratch memory: something spilled"
    used = max(int(m) for m in re.findall(r"\bv\[?(\d+)", "\n".join(
        ops for _, _, ops in gfx950_lint.disassemble(str(code_object(name))))))
    assert used < meta["vgpr_count"], f"the code touches v{used}, beyond the declared {meta['vgpr_count']}"


@pytest.mark.parametrize("name, mfma, count", [
    ("fwd_bf16_hd128", "v_mfma_f32_32x32x16_bf16", 24),    # per 32-key tile 8 for S, 8 for P.V; the last P.V
    ("fwd_bf16_qk192", "v_mfma_f32_32x32x16_bf16", 28),    # 12 for S at dim_qk 192
    ("fwd_fp8_hd128", "v_mfma_f32_32x32x64_f8f6f4", 6),    # per 64-key tile: 2 x 2 for S, 1 for P's row
                                                            # sums; the last tile's row sums
    ("fwd_fp8_hd128", "v_mfma_scale_f32_32x32x64_f8f6f4", 8),  # 4 for P.V with V's block scale; the last P.V
    ("fwd_fp8_qk192", "v_mfma_f32_32x32x64_f8f6f4", 6),    # 2 x 3 for S; row sums on the VALU
    ("fwd_fp8_qk192", "v_mfma_scale_f32_32x32x64_f8f6f4", 8),
])
def test_instruction_mix(name, mfma, count):
    mnemonics = [m for _, m, _ in gfx950_lint.disassemble(str(code_object(name)))]
    assert mnemonics.count(mfma) == count
    full_rate = ("v_mfma_f32_32x32x16_bf16", "v_mfma_f32_32x32x64_f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4")
    assert not [m for m in mnemonics if m.startswith("v_mfma") and m not in full_rate], "only full-rate MFMAs"
    assert not [m for m in mnemonics if m.startswith(("scratch_", "buffer_", "flat_"))], \
        "no scratch, buffer or generic flat memory instructions"


@pytest.mark.parametrize("name", KERNELS)
def test_ping_pong_structure(name):
    """Two barriers per KV tile, one per group to offset them and one after the first tiles reach LDS; MFMA
    phases at raised priority; K and V reach the MFMAs through LDS only (16-byte global loads fill it)."""
    mnemonics = [m for _, m, _ in gfx950_lint.disassemble(str(code_object(name)))]
    assert mnemonics.count("s_barrier") == 5
    assert mnemonics.count("s_setprio") == 2
    global_loads = {m for m in mnemonics if m.startswith("global_load")}
    assert global_loads == {"global_load_dwordx4", "global_load_dword"} | ({"global_load_sbyte"} if "fp8" in name
                                                                          else set()), \
        global_loads  # dword: a paged cache's page ids; sbyte: the per-block exponents
    # K and V of a tile (and K's dims 128-191 at dim_qk 192): two first tiles, one in the loop
    assert mnemonics.count("ds_write_b128") == (9 if "qk192" in name else 6)
    transpose = "ds_read_b64_tr_b8" if "fp8" in name else "ds_read_b64_tr_b16"
    assert mnemonics.count(transpose) == 16, "V^T through the transposing LDS reads: 16 per tile"
    assert not [m for m in mnemonics if m.startswith(("ds_read_u8", "ds_read_u16"))]


@pytest.mark.parametrize("name", ["fwd_fp8_hd128", "fwd_fp8_qk192"])
def test_fp8_kernel_is_exp_free(name):
    """The fp8 probabilities come from one FMA per score (two per v_pk_fma_f32) and a float16 conversion per two:
    v_exp_f32 only for the per-tile rescale."""
    mnemonics = [m.removesuffix("_e32").removesuffix("_e64")
                 for _, m, _ in gfx950_lint.disassemble(str(code_object(name)))]
    assert mnemonics.count("v_exp_f32") == 1
    assert mnemonics.count("v_pk_fma_f32") == 16 and mnemonics.count("v_cvt_pk_f16_f32") == 16


@pytest.mark.parametrize("name", ALL_KERNELS)
def test_no_hazards(name):
    assert gfx950_lint.lint(gfx950_lint.disassemble(str(code_object(name)))) == []


@pytest.mark.parametrize("name", [n for n in KERNELS if "fp8" in n])
def test_mfma_result_wait_is_the_tables(name):
    """The fp8 kernels' wait_mfma_result (kMfmaResultWaitStates, before the epilogue) is what the hazard table asks
    after their MFMAs. (The bf16 kernels need none: their epilogue reads the first accumulators first.)"""
    mfmas = {m for _, m, _ in gfx950_lint.disassemble(str(code_object(name))) if m.startswith("v_mfma")}
    need = max(gfx950_hazards.wait_states(m, gfx950_hazards.RESULT_READ) for m in mfmas)
    assert assembly_sets(name)["kMfmaResultWaitStates"] == need


def _lint_body(tmp_path, body):
    """The lint's findings on a one-kernel code object around `body` (assembled and linked here)."""
    source = (".amdgcn_target \"amdgcn-amd-amdhsa--gfx950\"\n.text\n.globl k\n.p2align 8\n.type k,@function\nk:"
              + body + "  s_endpgm\n.rodata\n.p2align 6\n.amdhsa_kernel k\n  .amdhsa_next_free_vgpr 64\n"
              "  .amdhsa_next_free_sgpr 8\n  .amdhsa_accum_offset 64\n.end_amdhsa_kernel\n")
    (tmp_path / "k.s").write_text(source)
    subprocess.run(["clang-22", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx950", "-c", str(tmp_path / "k.s"),
                    "-o", str(tmp_path / "k.o")], check=True)
    subprocess.run(["ld.lld-22", "-shared", str(tmp_path / "k.o"), "-o", str(tmp_path / "k.co")], check=True)
    return gfx950_lint.lint(gfx950_lint.disassemble(str(tmp_path / "k.co")))


HAZARDS = """
  v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], 0
  s_nop 7
  v_add_f32 v30, v1, v1
  v_mov_b32 v16, 1.0
  v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]
  s_nop 7
  s_nop 3
  v_add_f32 v30, v1, v1
"""


def test_lint_finds_hazards(tmp_path):
    problems = _lint_body(tmp_path, HAZARDS)
    assert len(problems) == 2, problems
    assert "v_add_f32" in problems[0] and "after 8 of 12" in problems[0]              # an 8-pass MFMA's result
    assert "v_mfma" in problems[1] and "mfma_read" in problems[1] and "0 of 2" in problems[1]  # v16 right before


WAIT_STATE_EDGES = """
  v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], 0
  s_nop 7
  s_nop 7
  s_nop 2
  v_add_f32 v40, v1, v1
  v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], 0
  s_nop 7
  s_nop 3
  v_add_f32 v40, v1, v1
  v_exp_f32 v41, v42
  v_add_f32 v43, v41, v41
  v_exp_f32 v44, v42
  s_nop 0
  v_add_f32 v45, v44, v44
  v_exp_f32 v46, v42
  v_exp_f32 v47, v46
  v_mov_b32 v36, v37
  s_nop 0
  v_permlane32_swap_b32 v36, v38
  v_mov_b32 v34, v37
  s_nop 1
  v_permlane32_swap_b32 v34, v38
  v_cmp_gt_u32 vcc, 5, v37
  v_cndmask_b32 v33, v35, v39, vcc
  v_cmp_gt_u32 vcc, 5, v37
  s_nop 1
  v_cndmask_b32 v33, v35, v39, vcc
  v_add_u32 v48, 1, v37
  v_readfirstlane_b32 s4, v48
  v_add_u32 v48, 1, v37
  s_nop 0
  v_readfirstlane_b32 s4, v48
  v_cmp_gt_u32 vcc, 5, v37
  s_cbranch_scc1 .Lskip
  s_nop 7
.Lskip:
  v_cndmask_b32 v33, v35, v39, vcc
"""


def test_lint_counts_wait_states_between(tmp_path):
    """Wait states are the instructions between producer and consumer, the producer not among them. A 16-pass
    MFMA's result read after 19 of its 20 is a hazard, an 8-pass one's after 12 is not; a transcendental's read by the
    next VALU is one, after an s_nop 0 not, by another transcendental not; a VALU write a v_permlane32_swap reads after
    1 of its 2 wait states is one, after 2 not; VCC from a compare read by the next v_cndmask_b32 (e32: implicitly) is
    one, after 2 wait states not; a VGPR v_readfirstlane reads right after its VALU write is one, after 1 not; and a
    forward branch carries the compare to its target past the s_nop it skips."""
    problems = _lint_body(tmp_path, WAIT_STATE_EDGES)
    assert len(problems) == 6, problems
    assert "v_add_f32" in problems[0] and "after 19 of 20" in problems[0]
    assert "v_add_f32" in problems[1] and "v_exp_f32" in problems[1] and "0 of 1" in problems[1]
    assert "v_permlane32_swap" in problems[2] and "1 of 2" in problems[2]
    assert "v_cndmask_b32_e32" in problems[3] and "vcc" in problems[3] and "0 of 2" in problems[3]
    assert "v_readfirstlane_b32" in problems[4] and "0 of 1" in problems[4]
    assert "v_cndmask_b32_e32" in problems[5] and "1 of 2" in problems[5]


OVERWRITES = """
  v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[32:47]
  s_nop 7
  s_nop 5
  v_mov_b32 v33, 0
  global_store_dwordx4 v[48:49], v[50:53], off
  v_mov_b32 v51, 0
  global_store_dwordx2 v[48:49], v[54:55], off
  v_mov_b32 v54, 0
"""


def test_lint_finds_overwrites(tmp_path):
    """Write-after-read: a VALU overwriting an in-flight MFMA's C after 14 of its 15 wait states, and the data of a
    16-byte global store right after it; an 8-byte store's data may be overwritten at once."""
    problems = _lint_body(tmp_path, OVERWRITES)
    assert len(problems) == 2, problems
    assert "src_c_overwrite: v33" in problems[0] and "14 of 15" in problems[0]
    assert "valu_write: v51" in problems[1] and "0 of 2" in problems[1]


@pytest.mark.parametrize("name", QUANTIZERS + PAGED_WRITERS)
def test_quantizer_permutes_in_flight_together(name):
    """Each cross-lane butterfly stage of the quantizers' largest part issues the lane permutes of all its slots (one
    per 64 elements of the part) before one wait for them (quantize_rows.inc, butterflies_across)."""
    dim = int(name.rsplit("_d", 1)[1])
    slots = max((1 << (dim.bit_length() - 1)) // 64, 1)  # the largest part's elements per lane (part 2 alone: 1)
    in_flight, groups = 0, []
    for _, mnemonic, ops in gfx950_lint.disassemble(str(code_object(name))):
        if mnemonic == "ds_bpermute_b32":
            in_flight += 1
        elif mnemonic == "s_waitcnt" and "lgkmcnt(0)" in ops and in_flight:
            groups.append(in_flight)
            in_flight = 0
    assert max(groups) == slots, f"{name}: permutes per wait {sorted(set(groups))}, expected up to {slots}"


def test_varlen_check_fault_codes_match_c():
    """The check kernel's fault codes are fp_varlen_error's (src/launch_common.h), which flashprefill_workspace_error
    turns into messages."""
    header = (ROOT / "src" / "launch_common.h").read_text()
    # FP_VARLEN_CU_SEQLENS_Q = 1 -> kVarlenCuSeqlensQ
    c = {re.sub(r"_(\w)", lambda m: m.group(1).upper(), name.lower()).replace("varlen", "kVarlen", 1): int(value)
         for name, value in re.findall(r"FP_(VARLEN_[A-Z_]+) = (\d+)", header)}
    sets = {k: v for k, v in assembly_sets("varlen_check").items() if k.startswith("kVarlen")}
    assert sets and all(c[name] == value for name, value in sets.items()), (sets, c)
