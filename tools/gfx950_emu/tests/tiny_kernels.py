"""Tiny hand-written gfx950 kernels for the emulator's own tests: assembled with clang-22 and ld.lld-22, loaded and
run by tools/gfx950_emu, with the register images the MFMA tests pack (layouts documented in mfma.py)."""
import pathlib
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from gfx950_emu import EmulatorError, GlobalMemory, load_code_object, run_kernel  # noqa: E402,F401


# s[0:1] kernarg; s[4:5] = arg0 (out), s[6:7] = arg1, s[8:9] = arg2; v1 = lane * 4 bytes
_PROLOGUE = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  v_lshlrev_b32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
"""


def build(tmp_path, body, vgprs=64, agprs=0, lds=0, denorm_mode=3, extra=""):
    """Assemble `body` (after the standard prologue) as kernel `k`; returns the CodeObject."""
    src = f""".text
.globl k
.p2align 8
.type k,@function
k:
{_PROLOGUE}
{body}
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_next_free_vgpr {vgprs + agprs}
  .amdhsa_next_free_sgpr 40
  .amdhsa_accum_offset {vgprs}
  .amdhsa_group_segment_fixed_size {lds}
  .amdhsa_kernarg_size 24
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_float_denorm_mode_32 {denorm_mode}
{extra}
.end_amdhsa_kernel
"""
    s, o, co = tmp_path / "k.s", tmp_path / "k.o", tmp_path / "k.co"
    s.write_text(src)
    for cmd in (["clang-22", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx950", "-c", str(s), "-o", str(o)],
                ["ld.lld-22", "-shared", str(o), "-o", str(co)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    return load_code_object(co)


def run(tmp_path, body, out, args=(), waves=1, **build_kw):
    """Run kernel with arg0 = a copy of `out`, arg1.. = args; returns (out array, stats)."""
    co = build(tmp_path, body, **build_kw)
    mem = GlobalMemory()
    addrs = [mem.alloc_array(a) for a in (out, *args)]
    addrs += [0] * (3 - len(addrs))
    stats = run_kernel(co, "k", grid=(1, 1, 1), workgroup_size=64 * waves,
                       kernarg=struct.pack("<3Q", *addrs), memory=mem)
    return mem.read(addrs[0], out.dtype, out.shape), stats


# Asm loading each lane's dword of arg1 into v2 and of arg2 into v3 (v1: the lane's byte offset), then waiting.
LOAD_V2_V3 = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_waitcnt vmcnt(0)
"""


def store_rows(regs):
    """Asm storing each VGPR in `regs` as row i (64 dwords) of arg0 (v9: scratch)."""
    return "\n".join(f"  v_add_u32 v9, {256 * i}, v1\n  global_store_dword v9, {r}, s[4:5]"
                      for i, r in enumerate(regs))


def u32(x):
    return np.asarray(x, np.int64).astype(np.uint64).astype(np.uint32)



def _images(m_of, k_of, mat, elems):
    """[64, elems] operand image: lane l, element j = mat[m_of(l, j), k_of(l, j)]."""
    lane, j = np.meshgrid(np.arange(64), np.arange(elems), indexing="ij")
    return mat[m_of(lane, j), k_of(lane, j)]


def _d32(lane, g):
    return 8 * (g // 4) + 4 * (lane // 32) + g % 4, lane % 32


def _d16(lane, g):
    return 4 * (lane // 16) + g, lane % 16


def _mfma_kernel(mnemonic, a_dwords, d_regs, use_agprs, mods=""):
    """Asm: A image at arg1[lane], B image right after it, C image at arg2[lane]; D -> arg0."""
    ab = f"v_lshlrev_b32 v2, {(4 * a_dwords).bit_length() - 1}, v0\n"
    ab += "".join(f"  global_load_dwordx4 v[{10 + 4 * i}:{13 + 4 * i}], v2, s[6:7] offset:{16 * i}\n"
                  for i in range(a_dwords // 4))
    ab += f"  v_add_u32 v2, {64 * 4 * a_dwords}, v2\n"
    ab += "".join(f"  global_load_dwordx4 v[{30 + 4 * i}:{33 + 4 * i}], v2, s[6:7] offset:{16 * i}\n"
                  for i in range(a_dwords // 4))
    cd = f"  v_lshlrev_b32 v3, {(4 * d_regs).bit_length() - 1}, v0\n"
    cd += "".join(f"  global_load_dwordx4 v[{50 + 4 * i}:{53 + 4 * i}], v3, s[8:9] offset:{16 * i}\n"
                  for i in range(d_regs // 4))
    cd += "  s_waitcnt vmcnt(0)\n"
    a = f"v[10:{9 + a_dwords}]"
    b = f"v[30:{29 + a_dwords}]"
    if use_agprs:
        cd += "".join(f"  v_accvgpr_write_b32 a{g}, v{50 + g}\n" for g in range(d_regs))
        acc = f"a[0:{d_regs - 1}]"
        op = f"  {mnemonic} {acc}, {a}, {b}, {acc} {mods}\n"
        op += "".join(f"  v_accvgpr_read_b32 v{50 + g}, a{g}\n" for g in range(d_regs))
    else:
        acc = f"v[50:{49 + d_regs}]"
        op = f"  {mnemonic} {acc}, {a}, {b}, {acc} {mods}\n"
    op += "  s_nop 7\n  s_nop 7\n"
    store = "".join(f"  global_store_dwordx4 v3, v[{50 + 4 * i}:{53 + 4 * i}], s[4:5] offset:{16 * i}\n"
                    for i in range(d_regs // 4))
    return ab + cd + op + store


def _run_mfma(tmp_path, body, a_img, b_img, c, d_of, d_regs, extra=()):
    """Run an MFMA kernel; arg2 = the C image followed by `extra` dwords."""
    c_img = _images(lambda l, g: d_of(l, g)[0], lambda l, g: d_of(l, g)[1], c, d_regs)
    ab = np.concatenate([a_img.reshape(64, -1).view(np.uint32).reshape(-1),
                         b_img.reshape(64, -1).view(np.uint32).reshape(-1)])
    arg2 = np.concatenate([c_img.astype(np.float32).view(np.uint32).reshape(-1),
                           np.asarray(extra, np.uint32).reshape(-1)])
    out, stats = run(tmp_path, body, np.zeros((64, d_regs), np.float32),
                     (ab, arg2), vgprs=128, agprs=16)
    d = np.zeros_like(c)
    lane, g = np.meshgrid(np.arange(64), np.arange(d_regs), indexing="ij")
    d[d_of(lane, g)] = out
    return d, stats
