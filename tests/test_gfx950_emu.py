"""Tests of the gfx950 emulator (tools/gfx950_emu): each instruction family on tiny
hand-written kernels, assembled with clang-22 and run from their disassembly."""
import struct
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import markers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from gfx950_emu import EmulatorError, GlobalMemory, load_code_object, run_kernel  # noqa: E402

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]


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


def store_rows(regs):
    """Asm storing each VGPR in `regs` as row i (64 dwords) of arg0 (v9: scratch)."""
    return "\n".join(f"  v_add_u32 v9, {256 * i}, v1\n  global_store_dword v9, {r}, s[4:5]"
                      for i, r in enumerate(regs))


def u32(x):
    return np.asarray(x, np.int64).astype(np.uint64).astype(np.uint32)


# ---- scalar ALU ------------------------------------------------------------------------------
def test_scalar_alu(tmp_path):
    body = """
  s_mov_b32 s10, 0xfffffffe
  s_add_u32 s11, s10, 3          // 1, carry
  s_addc_u32 s12, 5, 0           // 6
  s_sub_u32 s13, 2, 5            // -3, borrow
  s_cselect_b32 s14, 7, 9        // scc=1 -> 7
  s_mul_i32 s15, -3, 7           // -21
  s_mul_hi_u32 s16, s10, 4       // 3
  s_lshl_b32 s17, 3, 4           // 48
  s_lshr_b32 s18, s10, 28        // 15
  s_mov_b64 s[20:21], 1
  s_lshl_b64 s[20:21], s[20:21], 33   // hi = 2
  s_mov_b32 s22, 0xf0f0
  s_and_b32 s22, s22, 0xff00     // 0xf000
  s_or_b32 s23, 0xf0, 0xf        // 0xff
  s_mov_b64 s[24:25], -1
  s_andn2_b64 s[24:25], s[24:25], s[20:21]   // hi = ~2
  s_min_i32 s26, -4, 3
  s_max_i32 s27, -4, 3
  s_add_i32 s28, 10, -12
  s_sub_i32 s29, 10, 12
  s_cmp_lt_i32 -1, 0
  s_cselect_b32 s30, 1, 0        // signed: 1
  s_cmp_lt_u32 -1, 0
  s_cselect_b32 s31, 1, 0        // unsigned: 0
  s_cmp_ge_u32 5, 5
  s_cselect_b32 s32, 1, 0
  s_cmp_lg_i32 5, 5
  s_cselect_b32 s33, 1, 0
  s_cmp_eq_u64 s[20:21], 0       // hi = 2: not zero
  s_cselect_b32 s34, 1, 0
  v_cmp_gt_u32 vcc, 0, v0        // no lane: vcc = 0
  s_cmp_eq_u64 vcc, 0
  s_cselect_b32 s35, 1, 0
  s_cmp_lg_u64 s[24:25], -1      // hi = ~2
  s_cselect_b32 s36, 1, 0
"""
    regs = ["s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s21", "s22", "s23", "s25",
            "s26", "s27", "s28", "s29", "s30", "s31", "s32", "s33", "s34", "s35", "s36"]
    movs = "\n".join(f"  v_mov_b32 v{10 + i}, {r}" for i, r in enumerate(regs))
    out, _ = run(tmp_path, body + movs + "\n" + store_rows([f"v{10 + i}" for i in range(len(regs))]),
                 np.zeros((len(regs), 64), np.uint32))
    expect = u32([1, 6, -3, 7, -21, 3, 48, 15, 2, 0xF000, 0xFF, ~2, -4, 3, -2, -2, 1, 0, 1, 0, 0, 1, 1])
    np.testing.assert_array_equal(out[:, 0], expect)
    assert (out == out[:, :1]).all()


# ---- vector integer ALU --------------------------------------------------------------------------
def test_vector_int(tmp_path, rng):
    a, b = rng.integers(0, 2**32, (2, 64), dtype=np.uint64).astype(np.uint32)
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_waitcnt vmcnt(0)
  v_add_u32 v10, v2, v3
  v_sub_u32 v11, v2, v3
  v_mul_lo_u32 v12, v2, v3
  v_mul_u32_u24 v13, v2, v3
  v_lshlrev_b32 v14, 5, v2
  v_lshrrev_b32 v15, 7, v2
  v_lshl_add_u32 v16, v2, 3, v3
  v_and_b32 v17, v2, v3
  v_or_b32 v18, v2, v3
  v_xor_b32 v19, 0x12345678, v2
  v_mov_b32 v20, -7
  v_max_i32 v21, v2, v3
  v_bfe_u32 v22, v2, 3, 5
"""
    out, _ = run(tmp_path, body + store_rows([f"v{i}" for i in range(10, 23)]),
                 np.zeros((13, 64), np.uint32), (a, b))
    A, B = a.astype(np.uint64), b.astype(np.uint64)
    m24 = np.uint64(0xFFFFFF)
    expect = [A + B, A - B, A * B, (A & m24) * (B & m24), A << np.uint64(5), A >> np.uint64(7),
              (A << np.uint64(3)) + B, A & B, A | B, A ^ np.uint64(0x12345678),
              np.full(64, 2**32 - 7, np.uint64),
              np.maximum(a.view(np.int32), b.view(np.int32)).view(np.uint32),
              (A >> np.uint64(3)) & np.uint64(31)]
    for row, e in zip(out, expect):
        np.testing.assert_array_equal(row, np.asarray(e).astype(np.uint64).astype(np.uint32))


def test_carry_chain_and_mad_u64(tmp_path, rng):
    a, b = rng.integers(0, 2**32, (2, 64), dtype=np.uint64).astype(np.uint32)
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_waitcnt vmcnt(0)
  v_add_co_u32 v10, vcc, v2, v3          // 64-bit (a | a<<32) + (b | 0)
  v_addc_co_u32 v11, vcc, v2, 0, vcc
  v_mov_b32 v4, 7
  v_mov_b32 v5, 0xffffffff
  v_mad_u64_u32 v[12:13], s[10:11], v2, v3, v[4:5]
  v_mov_b32 v14, s10
  v_mov_b32 v15, s11
"""
    out, _ = run(tmp_path, body + store_rows([f"v{i}" for i in range(10, 16)]),
                 np.zeros((6, 64), np.uint32), (a, b))
    A, B = [x.astype(object) for x in (a, b)]
    s = [(int(x) | int(x) << 32) + int(y) for x, y in zip(A, B)]
    np.testing.assert_array_equal(out[0], [v & 0xFFFFFFFF for v in s])
    np.testing.assert_array_equal(out[1], [(v >> 32) & 0xFFFFFFFF for v in s])
    m = [int(x) * int(y) + 0xFFFFFFFF00000007 for x, y in zip(A, B)]
    np.testing.assert_array_equal(out[2], [v & 0xFFFFFFFF for v in m])
    np.testing.assert_array_equal(out[3], [(v >> 32) & 0xFFFFFFFF for v in m])
    carry = sum(1 << i for i, v in enumerate(m) if v >> 64)
    assert (out[4, 0], out[5, 0]) == (carry & 0xFFFFFFFF, carry >> 32)


# ---- vector float ALU --------------------------------------------------------------------------
def test_vector_float(tmp_path, rng):
    x = rng.standard_normal(64).astype(np.float32) * 4
    y = rng.standard_normal(64).astype(np.float32)
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_mov_b32 s12, 0x3e000000
  s_waitcnt vmcnt(0)
  v_add_f32 v10, v2, v3
  v_sub_f32 v11, v2, v3
  v_mul_f32 v12, s12, v2
  v_fma_f32 v13, v2, v3, 0.5
  v_max_f32 v14, v2, v3
  v_min_f32 v15, v2, v3
  v_exp_f32 v16, v2
  v_log_f32 v17, |v2|
  v_rcp_f32 v18, v2
  v_add_f32 v19, -v2, |v3|
  v_mul_f32 v20, 0x40490fdb, v2
  v_cvt_f32_i32 v21, -5
  v_mov_b32 v4, 0xfffffff0
  v_cvt_f32_u32 v22, v4
"""
    out, _ = run(tmp_path, body + store_rows([f"v{i}" for i in range(10, 23)]),
                 np.zeros((13, 64), np.float32), (x, y))
    f32 = np.float32
    expect = [x + y, x - y, f32(0.125) * x,
              (x.astype(np.float64) * y + 0.5).astype(f32), np.maximum(x, y), np.minimum(x, y),
              np.exp2(x), np.log2(np.abs(x)), f32(1) / x, -x + np.abs(y),
              f32(np.pi) * x, np.full(64, -5, f32), np.full(64, 4294967280, f32)]
    for row, e in zip(out, expect):
        np.testing.assert_array_equal(row, np.asarray(e, f32))


def test_float_max_and_nan(tmp_path, rng):
    """Our reading of the ISA: v_max_f32 and v_max3_f32 (IEEE mode) return the other operand for a NaN;
    v_maximum3_f32 (IEEE 754-2019 maximum, the forward kernels' row max) returns NaN."""
    x = rng.standard_normal(64).astype(np.float32)
    x[rng.choice(64, 16, replace=False)] = np.nan
    y = rng.standard_normal(64).astype(np.float32)
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_waitcnt vmcnt(0)
  v_max_f32 v10, v2, v3
  v_max3_f32 v11, v3, v2, -1.0
  v_maximum3_f32 v12, v3, v2, -1.0
"""
    out, _ = run(tmp_path, body + store_rows(["v10", "v11", "v12"]), np.zeros((3, 64), np.float32), (x, y))
    np.testing.assert_array_equal(out[0], np.fmax(x, y))
    np.testing.assert_array_equal(out[1], np.fmax(np.fmax(y, x), np.float32(-1)))
    np.testing.assert_array_equal(out[2], np.maximum(np.maximum(y, x), np.float32(-1)))
    assert np.isnan(out[2]).sum() == 16 and not np.isnan(out[:2]).any()


@pytest.mark.parametrize("denorm_mode", [0, 3])
def test_denormals_follow_the_descriptor_mode(tmp_path, denorm_mode):
    """FLOAT_DENORM_MODE_32 = 0 flushes f32 denormal inputs and results; 3 keeps them."""
    body = """
  v_mov_b32 v2, 0x00400000            // denormal 2^-127
  v_mul_f32 v10, 1.0, v2              // denormal input
  v_mov_b32 v3, 0x00800000            // 2^-126, the smallest normal
  v_mul_f32 v11, 0.5, v3              // denormal result
""" + store_rows(["v10", "v11"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32), denorm_mode=denorm_mode)
    expect = 0 if denorm_mode == 0 else 0x00400000
    np.testing.assert_array_equal(out, expect)


def test_packed_f32_op_sel(tmp_path, rng):
    """v_pk_mul/add/fma_f32 on register pairs: op_sel_hi:[1,0] gives both halves the low half of source 1 (the
    broadcast compilers emit), op_sel picks the high half for the low result."""
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_waitcnt vmcnt(0)
  v_mov_b32 v4, 0x3e000000
  v_mov_b32 v5, 0x7fc00000
  v_pk_mul_f32 v[10:11], v[2:3], v[4:5] op_sel_hi:[1,0]
  v_pk_add_f32 v[12:13], v[2:3], v[2:3] op_sel:[1,0]
  v_pk_fma_f32 v[14:15], v[2:3], v[2:3], v[4:5]
""" + store_rows([f"v{i}" for i in range(10, 16)])
    out, _ = run(tmp_path, body, np.zeros((6, 64), np.float32), (x, y))
    f32 = np.float32
    expect = [x * f32(0.125), y * f32(0.125), y + x, y + y,
              (x.astype(np.float64) * x + 0.125).astype(f32), np.full(64, np.nan, f32)]
    for row, e in zip(out[:5], expect[:5]):
        np.testing.assert_array_equal(row, e)
    assert np.isnan(out[5]).all()  # y * y + NaN


def test_cvt_pk_f16_clamp_keeps_subnormals(tmp_path, rng):
    """v_cvt_pk_f16_f32: round to nearest even into float16, subnormals kept (FLOAT_DENORM_MODE_16_64 = 3, the
    default); clamp saturates to [0, 1] and turns NaN into 0 (DX10 clamp, the default): the exp-free code path."""
    codes = np.arange(64, dtype=np.float32) * 2 - 3  # -3 .. 123 code steps of 2^-24
    x = (codes + 0.5) * np.float32(2.0**-24)  # ties: round to even
    y = np.array([-1.0, np.nan, 2.0, 0.25] * 16, np.float32)
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_waitcnt vmcnt(0)
  v_cvt_pk_f16_f32 v10, v2, v3 clamp
  v_cvt_pk_f16_f32 v11, v2, v2
""" + store_rows(["v10", "v11"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32), (x, y))
    lo = out[0] & 0x7FFF  # the sign of a clamped -0 is not pinned (the kernels read the low byte only)
    even = np.where(codes + 0.5 < 0, 0, np.round(codes + 0.5))  # numpy rounds half to even
    np.testing.assert_array_equal(lo, even)
    np.testing.assert_array_equal(out[0] >> 16, np.array([0, 0, 0x3C00, 0x3400] * 16))  # -1, NaN, 2 -> 0, 0, 1
    np.testing.assert_array_equal(out[1] & 0xFFFF, x.astype(np.float16).view(np.uint16))


def test_cvt_pk_bf16_rounds_to_nearest_even(tmp_path, rng):
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0xBF808001], np.uint32)  # halfway cases
    x[:4] = ties.view(np.float32)
    y[:2] = [np.inf, -0.0]
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[8:9]
  s_waitcnt vmcnt(0)
  v_cvt_pk_bf16_f32 v10, v2, v3
""" + store_rows(["v10"])
    out, _ = run(tmp_path, body, np.zeros((1, 64), np.uint32), (x, y))
    lo = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    hi = y.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(out[0], lo.astype(np.uint32) | (hi.astype(np.uint32) << 16))
    assert [hex(v & 0xFFFF) for v in out[0, :4]] == ["0x3f80", "0x3f82", "0x3f81", "0xbf81"]


def test_permlane32_swap_refuses_partial_exec(tmp_path):
    """Its EXEC semantics are not modelled, so a swap with lanes off is an error, not a guess."""
    body = """
  s_mov_b64 exec, 0xffff
  v_permlane32_swap_b32 v12, v13
  s_mov_b64 exec, -1
""" + store_rows(["v12"])
    with pytest.raises(EmulatorError, match="EXEC not all ones"):
        run(tmp_path, body, np.zeros((1, 64), np.uint32))


def test_perm_readfirstlane_permlane32_accvgpr(tmp_path):
    body = """
  v_mov_b32 v2, 0x44332211
  v_mov_b32 v3, 0x88776655
  s_mov_b32 s10, 0x0c0d0700        // bytes: sel 0 -> 0x55, 7 -> 0x44, 13 -> 0xff, 12 -> 0x00
  v_perm_b32 v10, v2, v3, s10
  v_add_u32 v4, 100, v0
  s_mov_b64 exec, 0xf0
  v_readfirstlane_b32 s11, v4      // lane 4 -> 104
  s_mov_b64 exec, -1
  v_mov_b32 v11, s11
  v_mov_b32 v12, v0
  v_add_u32 v13, 1000, v0
  v_permlane32_swap_b32 v12, v13
  v_accvgpr_write_b32 a3, v4
  v_accvgpr_read_b32 v14, a3
""" + store_rows(["v10", "v11", "v12", "v13", "v14"])
    out, _ = run(tmp_path, body, np.zeros((5, 64), np.uint32), agprs=8)
    lane = np.arange(64)
    np.testing.assert_array_equal(out[0], 0x00FF4455)
    np.testing.assert_array_equal(out[1], 104)
    np.testing.assert_array_equal(out[2], np.where(lane < 32, lane, 1000 + lane - 32))
    np.testing.assert_array_equal(out[3], np.where(lane < 32, lane + 32, 1000 + lane))
    np.testing.assert_array_equal(out[4], 100 + lane)


# ---- EXEC masking, compares, branches ------------------------------------------------------------
def test_compare_cndmask_and_exec_masking(tmp_path, rng):
    x = rng.standard_normal(64).astype(np.float32)
    body = """
  global_load_dword v2, v1, s[6:7]
  s_waitcnt vmcnt(0)
  v_cmp_lt_f32 vcc, 0, v2             // x > 0
  v_cndmask_b32 v10, -1.0, 1.0, vcc
  v_cmp_gt_u32 s[10:11], 10, v0       // lane < 10
  v_mov_b32 v11, 0
  s_and_saveexec_b64 s[12:13], s[10:11]
  v_mov_b32 v11, 7                    // only lanes 0..9
  s_cbranch_execz .Lskip
  v_add_u32 v11, 1, v11
.Lskip:
  s_mov_b64 exec, s[12:13]
  v_mov_b32 v12, s10
  v_mov_b32 v13, vcc_lo
  v_mov_b32 v14, vcc_hi
  s_mov_b64 exec, 0
  s_cbranch_execz .Lnone              // taken: no lane active
  v_mov_b32 v11, 99
.Lnone:
  s_mov_b64 exec, -1
""" + store_rows(["v10", "v11", "v12", "v13", "v14"])
    out, _ = run(tmp_path, body, np.zeros((5, 64), np.uint32), (x,))
    np.testing.assert_array_equal(out[0].view(np.float32), np.where(x > 0, 1.0, -1.0))
    np.testing.assert_array_equal(out[1], np.where(np.arange(64) < 10, 8, 0))
    assert out[2, 0] == 0x3FF
    vcc = sum(1 << i for i in range(64) if x[i] > 0)
    assert (out[3, 0], out[4, 0]) == (vcc & 0xFFFFFFFF, vcc >> 32)


def test_scalar_loop_and_vcc_branch(tmp_path):
    body = """
  s_mov_b32 s10, 0                    // i
  s_mov_b32 s11, 0                    // sum
.Lloop:
  s_add_u32 s10, s10, 1
  s_add_u32 s11, s11, s10
  s_cmp_lt_u32 s10, 10
  s_cbranch_scc1 .Lloop
  v_mov_b32 v10, s11                  // 55
  v_cmp_eq_u32 vcc, 1000, v0          // no lane -> vcc = 0
  s_cbranch_vccz .Lzero
  v_mov_b32 v10, 0
.Lzero:
  v_cmp_eq_u32 vcc, 3, v0
  s_cbranch_vccnz .Lnonzero
  v_mov_b32 v10, 0
.Lnonzero:
  s_branch .Lend
  v_mov_b32 v10, 0
.Lend:
""" + store_rows(["v10"])
    out, stats = run(tmp_path, body, np.zeros((1, 64), np.uint32))
    np.testing.assert_array_equal(out[0], 55)
    assert stats.instructions["s_cbranch_scc1"] == 10
    assert stats.instructions["s_add_u32"] == 20


# ---- global memory ------------------------------------------------------------------------------
def test_global_widths_and_address_forms(tmp_path):
    src = np.arange(64 * 4, dtype=np.uint32) * 0x01010101 + 0x80004000
    half = (np.arange(64, dtype=np.uint16) * 3 + 0x8001)
    body = """
  v_lshlrev_b32 v2, 4, v0
  global_load_dwordx4 v[10:13], v2, s[6:7]
  v_mov_b32 v3, s7                      // 64-bit address form: s[6:7] + 16 * lane + 4
  v_add_co_u32 v4, vcc, s6, v2
  v_addc_co_u32 v5, vcc, v3, 0, vcc
  global_load_dwordx2 v[14:15], v[4:5], off offset:4
  v_lshlrev_b32 v6, 1, v0
  global_load_ushort v16, v6, s[8:9]
  v_mov_b32 v17, 0x12345678
  v_mov_b32 v18, 0x12345678
  global_load_short_d16 v17, v6, s[8:9]
  global_load_short_d16_hi v18, v6, s[8:9]
  s_waitcnt vmcnt(0)
  v_add_u32 v7, 0x1c00, v6              // row 28 of arg0, as shorts
  global_store_short v7, v16, s[4:5]
""" + store_rows(["v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18"])
    out, _ = run(tmp_path, body, np.zeros((30, 64), np.uint32), (src, half))
    s4 = src.reshape(64, 4)
    for i in range(4):
        np.testing.assert_array_equal(out[i], s4[:, i])
    np.testing.assert_array_equal(out[4], s4[:, 1])
    np.testing.assert_array_equal(out[5], s4[:, 2])
    h = half.astype(np.uint32)
    np.testing.assert_array_equal(out[6], h)
    np.testing.assert_array_equal(out[7], 0x12340000 | h)
    np.testing.assert_array_equal(out[8], (h << 16) | 0x5678)
    np.testing.assert_array_equal(out[28:30].reshape(-1).view(np.uint16)[:64], half)


def test_byte_loads_into_16_bit_halves(tmp_path):
    """global_load_ubyte_d16 / _d16_hi: one byte, zero-extended, into bits 15:0 / 31:16; the other half kept."""
    src = (np.arange(64, dtype=np.uint8) * 7 + 0x81).astype(np.uint8)
    body = """
  v_mov_b32 v17, 0x12345678
  v_mov_b32 v18, 0x12345678
  global_load_ubyte_d16 v17, v0, s[6:7]
  global_load_ubyte_d16_hi v18, v0, s[6:7]
  s_waitcnt vmcnt(0)
""" + store_rows(["v17", "v18"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32), (src,))
    b = src.astype(np.uint32)
    np.testing.assert_array_equal(out[0], 0x12340000 | b)
    np.testing.assert_array_equal(out[1], (b << 16) | 0x5678)


def test_ds_read_d16_halves(tmp_path):
    """ds_read_u8_d16(_hi) / ds_read_u16_d16(_hi): one byte or short from LDS, zero-extended, into one half."""
    src = (np.arange(64, dtype=np.uint32) * 0x01030507 + 0x8091A0B0).astype(np.uint32)
    body = """
  v_lshlrev_b32 v2, 2, v0
  global_load_dword v3, v2, s[6:7]
  s_waitcnt vmcnt(0)
  ds_write_b32 v2, v3
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v10, 0x12345678
  v_mov_b32 v11, 0x12345678
  v_mov_b32 v12, 0x12345678
  v_mov_b32 v13, 0x12345678
  ds_read_u8_d16 v10, v2 offset:1
  ds_read_u8_d16_hi v11, v2
  ds_read_u16_d16 v12, v2 offset:2
  ds_read_u16_d16_hi v13, v2
  s_waitcnt lgkmcnt(0)
""" + store_rows(["v10", "v11", "v12", "v13"])
    out, _ = run(tmp_path, body, np.zeros((4, 64), np.uint32), (src,), lds=256)
    np.testing.assert_array_equal(out[0], 0x12340000 | ((src >> 8) & 0xFF))
    np.testing.assert_array_equal(out[1], ((src & 0xFF) << 16) | 0x5678)
    np.testing.assert_array_equal(out[2], 0x12340000 | (src >> 16))
    np.testing.assert_array_equal(out[3], ((src & 0xFFFF) << 16) | 0x5678)


def test_cvt_pk_f32_fp8_decodes_ocp_e4m3(tmp_path):
    """v_cvt_pk_f32_fp8: bytes 0 and 1 of the source as OCP e4m3 (gfx950), exactly; all 256 codes."""
    codes = np.arange(256, dtype=np.uint8).reshape(64, 4)
    body = """
  v_lshlrev_b32 v2, 2, v0
  global_load_dword v3, v2, s[6:7]
  s_waitcnt vmcnt(0)
  v_cvt_pk_f32_fp8 v[10:11], v3
  v_lshrrev_b32 v4, 16, v3
  v_cvt_pk_f32_fp8 v[12:13], v4
""" + store_rows(["v10", "v11", "v12", "v13"])
    out, _ = run(tmp_path, body, np.zeros((4, 64), np.uint32), (codes.reshape(-1),))
    want = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32).T
    np.testing.assert_array_equal(out.view(np.float32), want)  # NaN codes compare equal as NaN


def test_out_of_bounds_access_names_instruction(tmp_path):
    body = """
  global_load_dword v2, v1, s[6:7] offset:4
  s_waitcnt vmcnt(0)
"""
    with pytest.raises(EmulatorError, match=r"global_load_dword v2, v1, s\[6:7\] offset:4.*outside"):
        run(tmp_path, body, np.zeros(1, np.uint32), (np.zeros(64, np.uint32),))


# ---- wait counts, unknown instructions, descriptors ----------------------------------------------
def test_use_before_waitcnt_is_reported(tmp_path):
    body = """
  global_load_dword v2, v1, s[6:7]
  v_add_u32 v3, 1, v2
"""
    with pytest.raises(EmulatorError, match=r"v2 read by 'v_add_u32.*before an s_waitcnt.*global_load_dword"):
        run(tmp_path, body, np.zeros(1, np.uint32), (np.zeros(64, np.uint32),))


def test_partial_waitcnt_retires_oldest_first(tmp_path):
    body = """
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[6:7]
  s_waitcnt vmcnt(1)
  v_mov_b32 v4, v2                    // fine: the older load is complete
  v_mov_b32 v4, v3                    // the newer one is not
"""
    with pytest.raises(EmulatorError, match=r"v3 read by 'v_mov_b32_e32 v4, v3'"):
        run(tmp_path, body, np.zeros(1, np.uint32), (np.zeros(64, np.uint32),))


def test_scalar_load_needs_lgkmcnt_zero(tmp_path):
    body = """
  s_load_dword s10, s[6:7], 0x0
  s_load_dword s11, s[6:7], 0x4
  s_waitcnt lgkmcnt(1)                // scalar loads return out of order: not enough
  s_add_u32 s12, s10, 1
"""
    with pytest.raises(EmulatorError, match=r"s10 read by 's_add_u32"):
        run(tmp_path, body, np.zeros(1, np.uint32), (np.zeros(64, np.uint32),))


def test_unknown_instruction_is_an_error(tmp_path):
    with pytest.raises(EmulatorError, match=r"unknown instruction v_sin_f32: 'v_sin_f32_e32 v2, v1' at 0x"):
        run(tmp_path, "  v_sin_f32 v2, v1", np.zeros(1, np.uint32))


def test_descriptor_features_not_set_up_are_refused(tmp_path):
    with pytest.raises(EmulatorError, match=r"user SGPRs other than the kernarg pointer"):
        run(tmp_path, "", np.zeros(1, np.uint32), extra="  .amdhsa_user_sgpr_dispatch_ptr 1")


def test_vgpr_beyond_allocation_is_an_error(tmp_path):
    with pytest.raises(EmulatorError, match=r"v40 .* beyond the kernel's 40 VGPRs"):
        run(tmp_path, "  v_mov_b32 v40, 0", np.zeros(1, np.uint32), vgprs=32, agprs=8)


# ---- LDS, barrier -------------------------------------------------------------------------------
def test_lds_and_barrier_across_waves(tmp_path):
    """Wave 1 spins before writing its LDS slot; wave 0 must still read it after s_barrier."""
    body = """
  v_readfirstlane_b32 s10, v0
  s_cmp_eq_u32 s10, 0
  s_cbranch_scc1 .Lwrite
  s_mov_b32 s11, 50
.Lspin:
  s_sub_u32 s11, s11, 1
  s_cmp_lg_u32 s11, 0
  s_cbranch_scc1 .Lspin
.Lwrite:
  v_add_u32 v10, 500, v0
  ds_write_b32 v1, v10                 // LDS[4 * tid] = 500 + tid
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_xor_b32 v2, 0x100, v1              // the other wave's slot
  ds_read_b32 v11, v2
  v_mov_b32 v12, v0
  v_mov_b32 v13, 0
  v_lshlrev_b32 v3, 3, v0
  ds_write_b64 v3, v[12:13] offset:512
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_xor_b32 v3, 0x200, v3
  ds_read_b64 v[14:15], v3 offset:512
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v9, 2, v0
  global_store_dword v9, v11, s[4:5]
  global_store_dword v9, v14, s[4:5] offset:512
"""
    out, stats = run(tmp_path, body, np.zeros((2, 128), np.uint32), waves=2, lds=2048)
    tid = np.arange(128)
    np.testing.assert_array_equal(out[0], 500 + (tid ^ 64))
    np.testing.assert_array_equal(out[1], tid ^ 64)
    assert stats.waves == 2 and stats.instructions["s_barrier"] == 4


def test_lds_out_of_range_is_an_error(tmp_path):
    with pytest.raises(EmulatorError, match=r"ds_write_b32 v1, v0 offset:1024.*outside the workgroup's 1024 bytes"):
        run(tmp_path, "  ds_write_b32 v1, v0 offset:1024", np.zeros(1, np.uint32), lds=1024)


def test_ds_bpermute(tmp_path):
    body = """
  v_add_u32 v10, 1000, v0
  v_sub_u32 v2, 63, v0                 // read from lane 63 - lane
  v_lshlrev_b32 v2, 2, v2
  ds_bpermute_b32 v11, v2, v10
  s_waitcnt lgkmcnt(0)
""" + store_rows(["v11"])
    out, _ = run(tmp_path, body, np.zeros((1, 64), np.uint32))
    np.testing.assert_array_equal(out[0], 1000 + 63 - np.arange(64))


@pytest.mark.parametrize("bits", [16, 8])
def test_ds_read_b64_tr(tmp_path, bits, rng):
    """LDS holds an n x 16 tile per 16-lane group (n = 64 / bits), row-major; lane j of the
    group reads 64 bits at row j // (16 / n), element column n * (j % (16 / n)); lane i
    must receive column i (its element r = tile[r][i])."""
    n = 64 // bits
    dtype = np.uint16 if bits == 16 else np.uint8
    tiles = rng.integers(0, 2**bits, (4, n, 16)).astype(dtype)   # [group, row, column]
    lanes_per_row = 16 // n
    body = f"""
  v_lshlrev_b32 v4, 3, v0                   // 8 bytes per lane
  global_load_dwordx2 v[2:3], v4, s[6:7]
  s_waitcnt vmcnt(0)
  ds_write_b64 v4, v[2:3]                   // LDS = the four tiles, contiguous
  s_waitcnt lgkmcnt(0)
  v_and_b32 v5, 15, v0                      // j
  v_lshrrev_b32 v6, 4, v0
  v_lshlrev_b32 v6, 7, v6                   // group * 128 bytes
  v_lshrrev_b32 v7, {lanes_per_row.bit_length() - 1}, v5
  v_lshlrev_b32 v7, {(2 * bits).bit_length() - 1}, v7   // row * (16 * bits / 8) bytes
  v_and_b32 v8, {lanes_per_row - 1}, v5
  v_lshl_add_u32 v8, v8, 3, v7              // + 8 bytes * column block
  v_add_u32 v8, v8, v6
  ds_read_b64_tr_b{bits} v[10:11], v8
  s_waitcnt lgkmcnt(0)
""" + store_rows(["v10", "v11"])
    out, _ = run(tmp_path, body, np.zeros((2, 64), np.uint32),
                 (tiles.reshape(-1).view(np.uint32),), lds=512)
    got = out.T.copy().view(dtype).reshape(4, 16, n)              # [group, lane, element]
    np.testing.assert_array_equal(got, tiles.transpose(0, 2, 1))
    # hand-checked corner: lane 5 of group 0 gets column 5
    np.testing.assert_array_equal(got[0, 5], tiles[0, :, 5])


# ---- MFMA: register images packed from the layouts documented in mfma.py -----------------------
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


@pytest.mark.parametrize("shape", ["32x32x16", "16x16x32"])
def test_mfma_bf16(tmp_path, shape, rng):
    m, _, k = (int(x) for x in shape.split("x"))
    rows = 64 // (k // 8)                        # lanes sharing a k block: 32 or 16
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, m)).astype(ml_dtypes.bfloat16)
    c = rng.standard_normal((m, m)).astype(np.float32)
    a_img = _images(lambda l, j: l % rows, lambda l, j: 8 * (l // rows) + j, a, 8)
    b_img = _images(lambda l, j: 8 * (l // rows) + j, lambda l, j: l % rows, b, 8)
    d_regs = 16 if m == 32 else 4
    body = _mfma_kernel(f"v_mfma_f32_{shape}_bf16", 4, d_regs, use_agprs=m == 32)
    d, stats = _run_mfma(tmp_path, body, a_img, b_img, c, _d32 if m == 32 else _d16, d_regs)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-6)
    assert stats.instructions[f"v_mfma_f32_{shape}_bf16"] == 1


def _fp8_k(l, j):
    return 32 * (j // 16) + 16 * (l // 32) + j % 16


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_mfma_f8f6f4_32x32x64(tmp_path, fmt, rng):
    dtype = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
    a = (rng.standard_normal((32, 64)) * 4).astype(dtype)
    b = (rng.standard_normal((64, 32)) * 4).astype(dtype)
    c = rng.standard_normal((32, 32)).astype(np.float32)
    a_img = _images(lambda l, j: l % 32, _fp8_k, a, 32)
    b_img = _images(_fp8_k, lambda l, j: l % 32, b, 32)
    mods = "" if fmt == "e4m3" else "cbsz:1 blgp:1"
    body = _mfma_kernel("v_mfma_f32_32x32x64_f8f6f4", 8, 16, use_agprs=True, mods=mods)
    d, _ = _run_mfma(tmp_path, body, a_img, b_img, c, _d32, 16)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-5)


def test_mfma_scale_f32_32x32x64_f8f6f4(tmp_path, rng):
    """E8M0 scales: byte 1 of the A-scale VGPR, byte 2 of the B-scale VGPR (op_sel)."""
    a = (rng.standard_normal((32, 64)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((64, 32)) * 4).astype(ml_dtypes.float8_e4m3fn)
    c = rng.standard_normal((32, 32)).astype(np.float32)
    ea = rng.integers(120, 135, (2, 32))       # [block, row]
    eb = rng.integers(120, 135, (2, 32))       # [block, column]
    a_img = _images(lambda l, j: l % 32, _fp8_k, a, 32)
    b_img = _images(_fp8_k, lambda l, j: l % 32, b, 32)
    body = _mfma_kernel("v_mfma_f32_32x32x64_f8f6f4", 8, 16, use_agprs=True)
    # lane l holds the scales of block l // 32, row / column l % 32; A's in byte 1 of
    # v100, B's in byte 2 of v101 (loaded from after the C image)
    scale_img = np.stack([ea.reshape(-1) << 8, eb.reshape(-1) << 16], axis=1)
    load_scales = """
  v_lshlrev_b32 v4, 3, v0
  v_add_u32 v4, 0x1000, v4
  global_load_dwordx2 v[100:101], v4, s[8:9]
  s_waitcnt vmcnt(0)
"""
    body = body.replace("  v_mfma_f32_32x32x64_f8f6f4 a[0:15], v[10:17], v[30:37], a[0:15] \n",
                        load_scales +
                        "  v_mfma_scale_f32_32x32x64_f8f6f4 a[0:15], v[10:17], v[30:37], a[0:15], "
                        "v100, v101 op_sel:[1,0,0] op_sel_hi:[0,1,0]\n")
    assert "v_mfma_scale" in body
    d, stats = _run_mfma(tmp_path, body, a_img, b_img, c, _d32, 16, scale_img)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    ref = c.astype(np.float64)
    for blk in range(2):
        ks = slice(32 * blk, 32 * blk + 32)
        ref = ref + np.exp2(ea[blk] - 127.0)[:, None] * np.exp2(eb[blk] - 127.0)[None, :] * (af[:, ks] @ bf[ks])
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-5)
    assert stats.instructions["v_mfma_scale_f32_32x32x64_f8f6f4"] == 1
