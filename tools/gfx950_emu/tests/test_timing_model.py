"""The timing mode's rules (tools/gfx950_emu/timing.py), each on a tiny hand-written kernel timed two ways that
differ in one thing: a chain of accumulating MFMAs costs its passes, a VALU read of an MFMA's result waits for it,
s_waitcnt waits for its load, s_barrier holds a wave for the slowest, s_setprio reorders arbitration; and timing
mode leaves what a kernel computes unchanged."""
import numpy as np
import pytest

import markers
from tiny_kernels import GlobalMemory, build, run_kernel

from gfx950_emu.timing import run_timed
from gfx950_emu.timing_params import PARAMS, value

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
RNG = np.random.default_rng()
VALU = int(value("valu_cycles"))
MFMA_32X32X16_BF16 = "v_mfma_f32_32x32x16_bf16 v[16:31], v[2:5], v[6:9], v[16:31]"

_ZERO_MFMA_REGISTERS = "\n".join(f"v_mov_b32 v{i}, 0" for i in [*range(2, 10), *range(16, 32)]) + "\n"


def timed(tmp_path, body, waves=1, params=None, enforce_waits=True):
    """(WorkgroupTiming, out) of `body` after tiny_kernels' prologue on `waves` waves; out: 64 * waves dwords."""
    co = build(tmp_path, _ZERO_MFMA_REGISTERS + body, lds=1024)
    mem = GlobalMemory()
    out = mem.alloc_array(np.zeros(64 * waves, np.uint32))
    src = mem.alloc_array(RNG.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32))
    kernarg = np.array([out, src, 0], np.uint64).tobytes()
    run = run_timed(co, "k", (1, 1, 1), 64 * waves, kernarg, mem, params=params, enforce_waits=enforce_waits)
    return run.workgroups[0], mem.read(out, np.uint32, (64 * waves,))


@pytest.mark.parametrize("chain", [2, 5])
def test_mfma_chain_costs_its_passes(tmp_path, chain):
    """Accumulating MFMAs issue back to back as the pipe frees: 8 passes of 4 cycles each (LLVM's gfx950 model)."""
    short, _ = timed(tmp_path, MFMA_32X32X16_BF16)
    long, _ = timed(tmp_path, "\n".join([MFMA_32X32X16_BF16] * chain))
    assert long.cycles - short.cycles == (chain - 1) * 8 * VALU
    assert long.xdl_busy[0] == chain * 8 * VALU


def test_valu_read_of_an_mfma_result_waits(tmp_path):
    """A VALU reading the result issues P + 4 wait states after the MFMA (the hazard table's count), one reading
    another register on the next issue."""
    independent, _ = timed(tmp_path, MFMA_32X32X16_BF16 + "\nv_mov_b32 v40, v1")
    dependent, _ = timed(tmp_path, MFMA_32X32X16_BF16 + "\nv_mov_b32 v40, v16")
    wait_states = 8 + int(value("mfma_result_extra_passes")) + 1
    assert dependent.cycles - independent.cycles == wait_states * int(value("wait_state_cycles")) - VALU


@pytest.mark.parametrize("latency", [300, 700])
def test_waitcnt_waits_for_its_load(tmp_path, latency):
    """The VALUs after `s_waitcnt vmcnt(0)` start once the load's bytes have passed and its latency elapsed; without
    the wait they overlap it."""
    valus = "\n".join(["v_add_u32 v3, v3, v3"] * 20)
    load = "v_and_b32 v1, 0xff, v1\nglobal_load_dword v2, v1, s[6:7]\n"
    params = {"vmem_latency": latency}
    waited, _ = timed(tmp_path, load + "s_waitcnt vmcnt(0)\n" + valus, params=params)
    overlapped, _ = timed(tmp_path, load + valus, params=params)
    transfer = 64 * 4 / value("vmem_bytes_per_cycle")
    assert overlapped.cycles >= latency + transfer          # the load still drains before the wave ends
    assert waited.cycles - overlapped.cycles >= 20 * VALU - VALU
    assert waited.cycles >= latency + transfer + 20 * VALU


@pytest.mark.parametrize("latency", [64, 200])
def test_a_read_without_a_wait_is_counted_not_stalled(tmp_path, latency):
    """Code that relies on latency (enforce_waits=False): an LDS read's result used 12 VALUs later is not waited for
    (the hardware does not interlock) but recorded with its distance, when the LDS latency is longer than that."""
    body = "ds_read_b32 v2, v1\n" + "\n".join(["v_add_u32 v3, v3, v3"] * 12) + "\nv_mov_b32 v4, {}\n"
    params = {"lds_latency": latency}
    run, _ = timed(tmp_path, body.format("v2"), params=params, enforce_waits=False)
    unrelated, _ = timed(tmp_path, body.format("v1"), params=params, enforce_waits=False)
    gap = 13 * VALU
    assert run.early_reads == ([("ds_read_b32", gap)] if latency > gap else [])
    assert unrelated.early_reads == []
    assert run.cycles == unrelated.cycles


def test_barrier_holds_a_wave_for_the_slowest(tmp_path):
    """Wave 0 skips 24 VALUs that wave 1 runs; with an s_barrier after them, wave 0 ends after wave 1 arrives."""
    branch = """
  v_readfirstlane_b32 s10, v0
  s_cmp_eq_u32 s10, 0
  s_cbranch_scc1 skip
""" + "\n".join(["v_add_u32 v3, v3, v3"] * 24) + "\nskip:\n"
    free, _ = timed(tmp_path, branch, waves=2)
    held, _ = timed(tmp_path, branch + "s_barrier\n", waves=2)
    assert free.wave_cycles[0] < free.wave_cycles[1] - 20 * VALU
    assert held.wave_cycles[0] >= held.wave_cycles[1] - VALU
    assert held.wave_cycles[0] >= free.wave_cycles[1] + value("barrier_cycles") - VALU


def test_setprio_wins_arbitration(tmp_path):
    """Waves 0 and 4 share SIMD 0 and its VALU and leave a barrier together: the older wins ties, unless the
    younger has raised its s_setprio."""
    body = """
  v_readfirstlane_b32 s10, v0
  s_cmp_eq_u32 s10, 0
  s_cbranch_scc1 low
  {setprio}
low:
  s_barrier
""" + "\n".join(["v_exp_f32 v3, v3"] * 8)
    plain, _ = timed(tmp_path, body.format(setprio="s_nop 0"), waves=5)
    raised, _ = timed(tmp_path, body.format(setprio="s_setprio 3"), waves=5)
    assert plain.wave_cycles[0] < plain.wave_cycles[4]
    assert raised.wave_cycles[4] < raised.wave_cycles[0]


def test_timing_mode_computes_the_same(tmp_path):
    """The same kernel (per-lane loads, an MFMA, stores) writes the same bits with and without timing mode."""
    body = """
  v_and_b32 v1, 0xff, v1
  global_load_dwordx4 v[2:5], v1, s[6:7]
  global_load_dwordx4 v[6:9], v1, s[6:7] offset:16
  s_waitcnt vmcnt(0)
  v_mov_b32 v16, 0
""" + "\n".join(f"v_mov_b32 v{i}, v{i - 1}" for i in range(17, 32)) + f"""
  {MFMA_32X32X16_BF16}
  s_nop 15
  v_lshlrev_b32 v40, 2, v0
  global_store_dword v40, v20, s[4:5]
"""
    co = build(tmp_path, body)
    src = RNG.integers(0, 2**16, 256, dtype=np.uint64).astype(np.uint32) * 0x10001 & 0x3F7F3F7F  # finite bf16
    outs = []
    for timing in (False, True):
        mem = GlobalMemory()
        out = mem.alloc_array(np.full(128, 0xDEADBEEF, np.uint32))
        kernarg = np.array([out, mem.alloc_array(src), 0], np.uint64).tobytes()
        (run_timed if timing else run_kernel)(co, "k", (1, 1, 1), 128, kernarg, mem)
        outs.append(mem.read(out, np.uint32, (128,)))
    assert not (outs[0] == 0xDEADBEEF).any()
    np.testing.assert_array_equal(outs[1], outs[0])


def test_every_parameter_has_a_source():
    assert all(p.source for p in PARAMS.values())
