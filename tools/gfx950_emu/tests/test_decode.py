"""The gfx950 decoder (tools/gfx950_emu/decode*.py) against LLVM 22: every instruction of our code objects
and of the AMD objects the emulator runs decodes to the Instruction llvm-objdump-22's text parses to, and so
does a fresh random sample of the amd-aiter wheel's other gfx950 objects (all of them:
`python -m tools.gfx950_emu.decode_check --all`). Encodings our objects and AMD's never use (source
modifiers, SDWA, DPP controls, cache-policy bits, SMEM offsets, ...) are checked one by one against what
llvm-mc-22 prints for the words it assembles.
"""
import functools
import os
import pathlib
import subprocess
import sys

import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
from gfx950_emu import EmulatorError, decode_check  # noqa: E402
from gfx950_emu.decode import decode_one, decode_section  # noqa: E402
from gfx950_emu.instruction import make_instruction  # noqa: E402

pytestmark = markers.needs_llvm_mc22
SAMPLE_OBJECTS = 24


def _short(path):
    return os.path.relpath(path, decode_check.amd_dir() or ROOT) if "aiter_meta" in path else os.path.basename(path)


def _check(path):
    count, mismatches = decode_check.check_object(path)
    assert count > 0, f"{path}: no instruction decoded"
    assert not mismatches, f"{len(mismatches)} of {count} instructions differ:\n" + "\n".join(mismatches[:20])


@pytest.mark.parametrize("path", decode_check.our_objects(), ids=_short)
def test_our_objects_decode_as_objdump_reads_them(path):
    _check(path)


def test_our_objects_exist():
    assert decode_check.our_objects(), "build/gfx950/*.co missing: run `make amd`"


@markers.needs_aiter
@pytest.mark.parametrize("path", decode_check.amd_objects("run"), ids=_short)
def test_amd_objects_we_run_decode_as_objdump_reads_them(path):
    _check(path)


@markers.needs_aiter
def test_amd_objects_we_run_are_there():
    assert len(decode_check.amd_objects("run")) >= len(decode_check.AMD_RUN)


@markers.needs_aiter
def test_random_amd_objects_decode_as_objdump_reads_them(rng):
    rest = sorted(set(decode_check.amd_objects("all")) - set(decode_check.amd_objects("run")))
    picked = [rest[i] for i in rng.choice(len(rest), size=min(SAMPLE_OBJECTS, len(rest)), replace=False)]
    objects, count, mismatches = decode_check.check_objects(picked)
    print(f"{objects} objects, {count} instructions: " + " ".join(_short(p) for p in picked))
    assert not mismatches, f"{len(mismatches)} of {count} instructions differ:\n" + "\n".join(mismatches[:20])


# One line per feature the objects above do not exercise; each assembled by llvm-mc-22, then decoded.
ASSEMBLY = """
v_add_f32_e64 v1, -|v2|, v3 clamp mul:2
v_add_f32_e64 v1, -1.0, |s2| div:2
v_fma_f16 v1, v2, v3, v4 op_sel:[1,0,0,1] clamp
v_mad_u64_u32 v[0:1], vcc, v2, v3, v[4:5]
v_mad_u64_u32 v[0:1], s[2:3], v2, v3, v[4:5] clamp
v_cndmask_b32_e64 v1, v2, v3, s[4:5]
v_readlane_b32 s10, v20, s30
v_writelane_b32 v1, s2, m0
v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7] op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_lo:[1,0,0] neg_hi:[0,0,1]
v_pk_mul_f32 v[0:1], v[2:3], v[4:5] op_sel:[0,1] op_sel_hi:[0,1]
v_pk_mul_f32 v[0:1], v[2:3], 1.0
v_mfma_f32_32x32x16_bf16 a[0:15], v[0:3], v[4:7], a[0:15] cbsz:1 abid:2 blgp:3
v_mfma_f32_32x32x16_bf16 a[0:15], v[0:3], v[4:7], 1.0
v_mfma_f32_16x16x128_f8f6f4 v[0:3], v[4:9], v[10:13], v[0:3] cbsz:2 blgp:4
v_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[16:23], a[0:7], v[0:15], v4, v9 op_sel:[1,0,0] op_sel_hi:[0,1,0]
v_accvgpr_read_b32 v1, a2
v_accvgpr_write_b32 a1, 5
v_mov_b32 v1, 0xffffff9c
v_mov_b32 v1, 0.15915494
s_mov_b64 s[0:1], exec
s_add_u32 s1, 0x12345, -4
s_movk_i32 s1, 0x8000
s_cmpk_eq_u32 s57, 3
s_set_gpr_idx_on s92, gpr_idx(SRC0,SRC1,DST)
s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(15)
s_waitcnt vmcnt(40) expcnt(2)
s_endpgm 3
s_load_dword s1, s[2:3], -0x10
s_load_dword s1, s[2:3], s4 offset:0x10 glc
s_load_dword s1, s[2:3], s4
s_buffer_load_dwordx4 s[4:7], s[8:11], 0x10
v_fmamk_f32 v1, v2, 0x41200000, v3
v_mov_b32_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_1
v_add_f32_sdwa v1, -v2, |v3| clamp dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:WORD_0
v_cmp_eq_f32_sdwa s[4:5], v2, v3 src0_sel:BYTE_1 src1_sel:WORD_0
v_mov_b32_dpp v1, v2 row_mirror row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_bcast:31 row_mask:0x3 bank_mask:0x5
v_add_f32_dpp v1, -v2, |v3| wave_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
v_cndmask_b32_dpp v1, v2, v3, vcc quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
ds_write2_b32 v1, v2, v3 offset1:4
ds_read2st64_b64 v[0:3], v4 offset0:1 offset1:9
ds_read_b128 a[0:3], v5 offset:65535
buffer_load_dword v1, off, s[4:7], s9
buffer_load_dword v1, v[2:3], s[4:7], 0 idxen offen offset:16 sc0 nt
buffer_store_dwordx2 a[2:3], v1, s[4:7], 64 offen offset:4095 sc1
global_load_dword v1, v[2:3], off offset:-16 sc0 nt sc1
global_load_dword a1, v2, s[2:3] offset:4095 nt
global_atomic_add_f32 v1, v2, v3, s[4:5] offset:8 sc0
global_atomic_cmpswap_x2 v[0:1], v[2:3], v[4:7], off sc0
buffer_atomic_add_f32 v1, v2, s[4:7], 0 offen sc0
flat_load_dword v1, v[2:3] offset:16 sc1
scratch_load_dword v1, v2, off offset:16
scratch_load_dword v1, off, s2 offset:-4096
scratch_store_dwordx2 off, v[2:3], off
"""


@functools.lru_cache(maxsize=1)
def _assembled():
    """[(llvm-mc-22's text, encoding words)] for each line of ASSEMBLY."""
    out = subprocess.run(["llvm-mc-22", "-arch=amdgcn", "-mcpu=gfx950", "-show-encoding"], input=ASSEMBLY,
                         capture_output=True, text=True, check=True).stdout
    cases = []
    for line in out.splitlines():
        text, _, enc = line.strip().partition("; encoding: [")
        if enc:
            raw = bytes(int(b, 16) for b in enc.rstrip("]").split(","))
            cases.append((text.strip(), [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]))
    return cases


@pytest.mark.parametrize("case", range(len([s for s in ASSEMBLY.splitlines() if s.strip()])))
def test_assembled_feature_decodes_as_llvm_prints_it(case):
    cases = _assembled()
    assert len(cases) == len([s for s in ASSEMBLY.splitlines() if s.strip()]), "llvm-mc-22 refused a line"
    text, words = cases[case]
    mnemonic, _, operands = text.partition(" ")
    want = make_instruction(0x1000, 4 * len(words), mnemonic, operands.strip())
    got = decode_one(words + [0xBF810000], 0x1000)          # an s_endpgm after it: size must not read on
    assert (got.text, got.size, got.ops, got.mods) == (want.text, want.size, want.ops, want.mods)


@pytest.mark.parametrize("words, why", [
    ([0xD3AC0000, 0x00000000, 0xBF810000], "MFMA it scales"),        # v_mfma_ld_scale_b32 alone
    ([0xD3AC0000, 0x00000000, 0xD3B70000, 0x00000000], "takes no scales"),  # before a bf16 MFMA
    ([0xC8000000, 0], "no gfx950 encoding"),                          # VINTRP: not in gfx950's formats
    ([0xBF800000 | 0x7F << 16], "not a gfx950 instruction"),          # SOPP opcode 0x7f
    ([0x7E0002FF], "runs past"),                                      # a literal the section lacks
])
def test_undecodable_words_are_refused(words, why):
    with pytest.raises(EmulatorError, match=why):
        decode_section(0x1000, b"".join(w.to_bytes(4, "little") for w in words))
