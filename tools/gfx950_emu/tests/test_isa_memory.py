"""The emulator's global memory and LDS instructions, and the barrier (tools/gfx950_emu/isa_memory.py, memory.py),
each on a tiny hand-written kernel."""
import ml_dtypes
import numpy as np
import pytest

import markers
from tiny_kernels import EmulatorError, run, store_rows

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]


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


def test_store_with_exec_zero_writes_nothing(tmp_path):
    """A store issued with EXEC 0 (a loop that ran out of lanes) touches no memory and is no error."""
    body = """
  v_mov_b32 v2, 7
  s_mov_b64 s[10:11], exec
  s_mov_b64 exec, 0
  global_store_dword v1, v2, s[4:5]
  global_store_dwordx4 v1, v[2:5], s[4:5]
  s_mov_b64 exec, s[10:11]
"""
    out, _ = run(tmp_path, body, np.full(64, 5, np.uint32))
    assert (out == 5).all()
