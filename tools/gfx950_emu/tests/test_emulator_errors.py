"""What the emulator refuses (tools/gfx950_emu: waitcnt.py, codeobject.py, run.py): a use before its s_waitcnt,
an unknown instruction, descriptor features it does not set up, a VGPR beyond the allocation."""
import numpy as np
import pytest

import markers
from tiny_kernels import EmulatorError, run

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]


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
