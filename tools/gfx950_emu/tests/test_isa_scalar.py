"""The emulator's scalar ALU, EXEC masking, compares and branches (tools/gfx950_emu/isa_scalar.py,
isa_vector.py), each on a tiny hand-written kernel."""
import numpy as np
import pytest

import markers
from tiny_kernels import run, store_rows, u32

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]


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


def test_ff1_and_readlane(tmp_path):
    """s_ff1_i32_b64: the lowest set bit's index (in the upper half too), -1 on 0; v_readlane by an SGPR index."""
    body = """
  s_mov_b32 s10, 0
  s_mov_b32 s11, 0x50
  s_ff1_i32_b64 s12, s[10:11]    // bit 36
  s_mov_b64 s[14:15], 0
  s_ff1_i32_b64 s13, s[14:15]    // none: -1
  s_mov_b64 s[16:17], 6
  s_ff1_i32_b64 s16, s[16:17]    // bit 1
  v_readlane_b32 s17, v0, s12    // lane 36's id
  v_mov_b32 v10, s12
  v_mov_b32 v11, s13
  v_mov_b32 v12, s16
  v_mov_b32 v13, s17
"""
    out, _ = run(tmp_path, body + store_rows(["v10", "v11", "v12", "v13"]), np.zeros((4, 64), np.uint32))
    np.testing.assert_array_equal(out[:, 0], u32([36, -1, 1, 36]))
