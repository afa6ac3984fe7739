"""The gfx950 emulator's timing-adversarial rules (tools/gfx950_emu: waitcnt.py, lds_order.py, run.py), each on a
tiny hand-written kernel in a form that must fail and one that must pass: loads land only at the s_waitcnt that
guarantees them (vmcnt in order; lgkmcnt in order for LDS, scalar loads only at lgkmcnt(0)), registers a load will
write may be neither read nor written before, a store of more than 64 bits holds its data VGPRs for two wait
states, LDS accesses of different waves must be ordered by the accessor's wait
and a barrier, and the waves interleave in a seeded random order."""
import struct

import numpy as np
import pytest

import markers
from tiny_kernels import EmulatorError, GlobalMemory, build, run_kernel

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]

RNG = np.random.default_rng()
_RACE = r"LDS race at byte 0x[0-9a-f]+: "


def run(tmp_path, body, waves=1, seed=0, lds=1024):
    """Runs `body` (after the prologue of tiny_kernels.py: s[4:5] = out, s[6:7] = src, v1 = 4 * tid) on `waves`
    waves; out: 4 rows of 64 * waves dwords (poisoned), src: 256 random dwords. Returns (out, src)."""
    co = build(tmp_path, body, lds=lds)
    mem = GlobalMemory()
    src = RNG.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
    out = mem.alloc_array(np.full((4, 64 * waves), 0xDEADBEEF, np.uint32))
    kernarg = struct.pack("<3Q", out, mem.alloc_array(src), 0)
    run_kernel(co, "k", grid=(1, 1, 1), workgroup_size=64 * waves, kernarg=kernarg, memory=mem, seed=seed)
    return mem.read(out, np.uint32, (4, 64 * waves)), src


# Each case: (name, body with {a} where the variants differ, variant that must pass, variant that must fail and the
# error it must raise).
_WAVE_ID = """
  v_readfirstlane_b32 s10, v0
  s_lshr_b32 s10, s10, 6
  s_cmp_eq_u32 s10, 0
"""
CASES = [
    ("vmcnt_in_order", """
  v_and_b32 v1, 0xff, v1
  global_load_dword v2, v1, s[6:7]
  global_load_dword v3, v1, s[6:7] offset:4
  s_waitcnt vmcnt(1)
  {a}
""", "v_mov_b32 v4, v2", "v_mov_b32 v4, v3",
     r"v3 read by 'v_mov_b32_e32 v4, v3' at 0x[0-9a-f]+ in wave 0 before an s_waitcnt guarantees the load "
     r"'global_load_dword v3, v1, s\[6:7\] offset:4' at 0x[0-9a-f]+ that writes it \(vmcnt\)"),
    ("lgkmcnt_lds_in_order_smem_not", """
  s_load_dword s10, s[6:7], 0x0
  ds_read_b32 v2, v1
  ds_read_b32 v3, v1 offset:256
  s_waitcnt lgkmcnt(1)                 // at most one outstanding: the scalar load, or the younger LDS read
  {a}
""", "v_mov_b32 v4, v2", "s_mov_b32 s11, s10",
     r"s10 read by 's_mov_b32 s11, s10' at 0x[0-9a-f]+ in wave 0 before an s_waitcnt guarantees the load "
     r"'s_load_dword s10, s\[6:7\], 0x0' at 0x[0-9a-f]+ that writes it \(lgkmcnt\)"),
    ("lgkmcnt_younger_lds_read", """
  s_load_dword s10, s[6:7], 0x0
  ds_read_b32 v2, v1
  ds_read_b32 v3, v1 offset:256
  s_waitcnt lgkmcnt({a})
  v_mov_b32 v4, v3
""", "0", "1", r"v3 read by 'v_mov_b32_e32 v4, v3'.*'ds_read_b32 v3, v1 offset:256'.*\(lgkmcnt\)"),
    ("waw_by_alu", """
  v_and_b32 v1, 0xff, v1
  global_load_dword v2, v1, s[6:7]
  {a}
  s_waitcnt vmcnt(0)
  v_mov_b32 v2, 0
""", "", "v_mov_b32 v2, 0",
     r"v2 written by 'v_mov_b32_e32 v2, 0' at 0x[0-9a-f]+ in wave 0 before an s_waitcnt guarantees the load "
     r"'global_load_dword v2, v1, s\[6:7\]'"),
    ("waw_by_load", """
  v_and_b32 v1, 0xff, v1
  global_load_dword v2, v1, s[6:7]
  {a}
  s_waitcnt vmcnt(0) lgkmcnt(0)
""", "global_load_dword v2, v1, s[6:7] offset:4", "ds_read_b32 v2, v1",
     r"v2 loaded by 'ds_read_b32 v2, v1' at 0x[0-9a-f]+ in wave 0 while the load 'global_load_dword v2, v1, "
     r"s\[6:7\]' at 0x[0-9a-f]+ \(vmcnt\) that writes it is outstanding"),
    ("smem_waw", """
  s_load_dword s10, s[6:7], 0x0
  s_load_dword {a}, s[6:7], 0x4
  s_waitcnt lgkmcnt(0)
""", "s11", "s10", r"s10 loaded by 's_load_dword s10, s\[6:7\], 0x4'.*while the load 's_load_dword s10, "
                    r"s\[6:7\], 0x0'.*\(lgkmcnt\)"),
    ("store_data_wait_states", """
  global_store_dwordx4 v1, v[4:7], s[4:5]
  {a}
  v_mov_b32 v6, 0
""", "s_nop 1", "s_nop 0",
     r"'v_mov_b32_e32 v6, 0' at 0x[0-9a-f]+ in wave 0 writes data VGPRs of the store 'global_store_dwordx4 v1, "
     r"v\[4:7\], s\[4:5\]' at 0x[0-9a-f]+ 1 wait states after it; a store of more than 64 bits needs 2"),
    ("lds_own_wave_in_order", """
  ds_write_b32 v1, v0
  ds_read_b32 v11, v1                  // the same wave: in order, no wait needed between
  {a}
  v_mov_b32 v12, v11
""", "s_waitcnt lgkmcnt(0)", "", r"v11 read by 'v_mov_b32_e32 v12, v11'.*'ds_read_b32 v11, v1'"),
    ("lds_raw_needs_writers_wait", """
  v_add_u32 v10, 500, v0
  ds_write_b32 v1, v10                 // LDS[4 tid] = 500 + tid
  {a}
  s_barrier
  v_xor_b32 v2, 0x100, v1              // the other wave's slot
  ds_read_b32 v11, v2
  s_waitcnt lgkmcnt(0)
""", "s_waitcnt lgkmcnt(0)", "",
     _RACE + r"'ds_read_b32 v11, v2' at 0x[0-9a-f]+ in wave [01] reads what is written by 'ds_write_b32 v1, v10' at "
     r"0x[0-9a-f]+ in wave [01] \(its wave has not yet passed an s_waitcnt lgkmcnt covering it\)"),
    ("lds_raw_needs_barrier", """
  v_add_u32 v10, 500, v0
  ds_write_b32 v1, v10
  s_waitcnt lgkmcnt(0)
  {a}
  v_xor_b32 v2, 0x100, v1
  ds_read_b32 v11, v2
  s_waitcnt lgkmcnt(0)
""", "s_barrier", "s_nop 0",
     _RACE + r"'ds_(read_b32 v11, v2|write_b32 v1, v10)' .* in wave [01] (reads what is written by|overwrites what is "
     r"still read by) 'ds_(write|read)_b32"),
    ("lds_war_needs_readers_wait", """
  v_xor_b32 v2, 0x100, v1
  ds_read_b32 v11, v2                  // the other wave's slot
  {a}
  s_barrier
  ds_write_b32 v1, v0                  // own slot, which the other wave read
  s_waitcnt lgkmcnt(0)
""", "s_waitcnt lgkmcnt(0)", "",
     _RACE + r"'ds_write_b32 v1, v0' at 0x[0-9a-f]+ in wave [01] overwrites what is still read by "
     r"'ds_read_b32 v11, v2' at 0x[0-9a-f]+ in wave [01] \(its wave has not yet passed an s_waitcnt lgkmcnt "
     r"covering it\)"),
    ("lds_waw_across_waves", _WAVE_ID + """
  v_mov_b32 v2, 0
  s_cbranch_scc0 .Lsecond
  ds_write_b32 v2, v0                  // wave 0 writes word 0 ...
.Lsecond:
  {a}
  s_barrier
  s_cmp_eq_u32 s10, 0
  s_cbranch_scc1 .Ldone
  ds_write_b32 v2, v0                  // ... then wave 1
.Ldone:
  s_waitcnt lgkmcnt(0)
""", "s_waitcnt lgkmcnt(0)", "",
     _RACE + r"'ds_write_b32 v2, v0' at 0x[0-9a-f]+ in wave 1 overwrites what is written by 'ds_write_b32 v2, v0' at "
     r"0x[0-9a-f]+ in wave 0"),
]


@pytest.mark.parametrize("variant", ["passes", "fails"])
@pytest.mark.parametrize("name, body, good, bad, error", CASES, ids=[c[0] for c in CASES])
def test_rule(tmp_path, name, body, good, bad, error, variant):
    seed = int(RNG.integers(1 << 31))
    waves = 2 if name.startswith("lds_") and name != "lds_own_wave_in_order" else 1
    if variant == "passes":
        run(tmp_path, body.format(a=good), waves=waves, seed=seed)
    else:
        with pytest.raises(EmulatorError, match=error):
            run(tmp_path, body.format(a=bad), waves=waves, seed=seed)


def test_loads_land_at_the_wait(tmp_path):
    """Two loads into halves of one VGPR, both outstanding, and two loads into one VGPR on the same counter: each
    lands in issue order at the wait, so the VGPR ends as both halves / the younger load."""
    body = """
  v_and_b32 v1, 0xff, v1
  global_load_short_d16 v2, v1, s[6:7]
  global_load_short_d16_hi v2, v1, s[6:7] offset:2
  global_load_dword v3, v1, s[6:7]
  global_load_dword v3, v1, s[6:7] offset:4
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 v9, 2, v0
  global_store_dword v9, v2, s[4:5]
  global_store_dword v9, v3, s[4:5] offset:256
"""
    out, src = run(tmp_path, body, seed=int(RNG.integers(1 << 31)))
    lane = np.arange(64) % 64
    np.testing.assert_array_equal(out[0], src[lane])
    np.testing.assert_array_equal(out[1], src[lane + 1])


def test_ordered_lds_values_cross_waves(tmp_path):
    """The must-pass form of lds_raw_needs_writers_wait, with its values: each wave reads the other's slot."""
    body = {c[0]: c[1] for c in CASES}["lds_raw_needs_writers_wait"].format(a="s_waitcnt lgkmcnt(0)")
    body += "  global_store_dword v1, v11, s[4:5]\n"
    out, _ = run(tmp_path, body, waves=2, seed=int(RNG.integers(1 << 31)))
    np.testing.assert_array_equal(out[0], 500 + (np.arange(128) ^ 64))


def test_schedule_follows_the_seed(tmp_path):
    """Four waves store their index to one address: which store lands last varies with the seed, and one seed
    replays the same order."""
    body = _WAVE_ID + """
  v_mov_b32 v2, s10
  v_mov_b32 v3, 0
  global_store_dword v3, v2, s[4:5]
"""
    last = {seed: run(tmp_path, body, waves=4, seed=seed)[0][0, 0] for seed in range(16)}
    assert len(set(last.values())) > 1, last
    assert run(tmp_path, body, waves=4, seed=3)[0][0, 0] == last[3]


def test_registers_and_lds_undefined_at_launch(tmp_path):
    """A VGPR the ABI does not set and LDS never written hold seeded random bits, not zeros."""
    body = """
  ds_read_b32 v11, v1
  s_waitcnt lgkmcnt(0)
  global_store_dword v1, v5, s[4:5]
  global_store_dword v1, v11, s[4:5] offset:256
"""
    a, b = (run(tmp_path, body, seed=s)[0] for s in (1, 2))
    assert (a[:2] != 0).mean() > 0.9 and (a[:2] != b[:2]).mean() > 0.9


def test_loads_to_lds_wait_even_for_their_own_wave():
    """lds_order.py directly (no load-to-LDS instruction is emulated yet): a write on vmcnt (a buffer load to LDS)
    is ordered before its own wave's later accesses only once retired, before other waves' only after a barrier too;
    writes on lgkmcnt are in their wave's order at once."""
    from types import SimpleNamespace

    from gfx950_emu.lds_order import LdsOrder
    dma, read, write = (SimpleNamespace(text=t, addr=a) for t, a in (("buffer_load_dword v1, s[0:3], 0 lds", 0x10),
                                                                     ("ds_read_b32 v2, v1", 0x20),
                                                                     ("ds_write_b32 v1, v2", 0x30)))
    order, word = LdsOrder(64, 2), np.arange(4)
    access = order.write(0, dma, "vmcnt", word)
    with pytest.raises(EmulatorError, match=r"'ds_read_b32 v2, v1' at 0x20 in wave 0 reads what is written by "
                                            r"'buffer_load_dword .* lds' at 0x10 in wave 0 \(its wave has not yet "
                                            r"passed an s_waitcnt vmcnt covering it\)"):
        order.read(0, read, "lgkmcnt", word)
    with pytest.raises(EmulatorError, match=r"'ds_write_b32 v1, v2' at 0x30 in wave 0 overwrites what is written by"):
        order.write(0, write, "lgkmcnt", word)
    order.retire(access)
    order.read(0, read, "lgkmcnt", word)
    with pytest.raises(EmulatorError, match=r"in wave 1 reads what is written by .* \(no s_barrier since"):
        order.read(1, read, "lgkmcnt", word)
    order.barrier()
    order.read(1, read, "lgkmcnt", word + 8)
    order.write(1, write, "lgkmcnt", word + 8)   # its own read, in its LDS order
    order.read(1, read, "lgkmcnt", word + 8)
    order.read(1, read, "lgkmcnt", word)
