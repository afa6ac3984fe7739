"""Broken copies of the shipped gfx950 kernels must fail in the emulator (tools/gfx950_emu): each mutation deletes or
moves one synchronizing instruction in a copy of asm/gfx950/ in a temporary directory, the copy is assembled as
`make amd` does, and the run must raise the emulator's error naming the race. Without the timing-adversarial model
(loads landing at their s_waitcnt, LDS ordered between waves only by a wait and a barrier) these copies passed every
test."""
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import markers

from test_gfx950_kernel_emulated import RNG, ROOT, _run

pytestmark = markers.needs_rebuild22
_FILL_WAIT = """    .if \\lds_wait
    s_waitcnt lgkmcnt(0)
    .endif
.endm"""


def _assemble(tmp_path, name, file, old, new):
    """The code object of kernel `name` assembled from a copy of asm/gfx950 with `old` replaced by `new` in `file`
    (where old occurs once)."""
    src = tmp_path / "gfx950"
    shutil.copytree(ROOT / "asm" / "gfx950", src)
    text = (src / file).read_text()
    assert text.count(old) == 1, f"the mutation's text is not in {file} exactly once"
    (src / file).write_text(text.replace(old, new))
    obj, co = tmp_path / f"{name}.o", tmp_path / f"{name}.co"
    for cmd in (["clang-22", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx950", "-mcode-object-version=5", f"-I{src}",
                 "-c", str(src / f"{name}.s"), "-o", str(obj)], ["ld.lld-22", "-shared", str(obj), "-o", str(co)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    return co


_KERNELS = ["fwd_bf16_hd128", "fwd_bf16_qk192", "fwd_fp8_hd128", "fwd_fp8_qk192"]
_PHASE_M_END = """    mma_s "read_v 0", "read_v 1"
    s_setprio 0
    s_barrier
"""
MUTATIONS = {  # name: (file, text, replacement, the error it must raise)
    # fill_commit without its `s_waitcnt lgkmcnt(0)` before the phase's s_barrier: the first tiles' K rows are read by
    # other waves while the ds_write_b128 that wrote them may still be in flight
    "fill_without_lds_wait": ("fwd_tile_loop.inc", _FILL_WAIT, _FILL_WAIT.replace("    s_waitcnt lgkmcnt(0)\n", ""),
                              r"'ds_read_b\S+ [^']*' at 0x[0-9a-f]+ in wave \d reads what is written by 'ds_write_b128 "
                              r"[^']*' at 0x[0-9a-f]+ in wave \d \(its wave has not yet passed an s_waitcnt lgkmcnt "
                              r"covering it\)"),
    # phase M without its closing s_barrier: the two wave groups' phases overlap, and fills meet reads of one buffer
    "phase_m_without_barrier": ("fwd_tile_loop.inc", _PHASE_M_END, _PHASE_M_END.replace("    s_barrier\n", ""),
                                r"'ds_\S+ [^']*' at 0x[0-9a-f]+ in wave \d (reads what is written|overwrites what is "
                                r"still read|overwrites what is written) by 'ds_\S+ [^']*' at 0x[0-9a-f]+ in wave \d"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("name", _KERNELS)
def test_mutation_fails(tmp_path, name, mutation):
    file, old, new, error = MUTATIONS[mutation]
    co = _assemble(tmp_path, name, file, old, new)
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    dim_qk = 192 if name.endswith("qk192") else 128
    dtype = ml_dtypes.float8_e4m3fn if "fp8" in name else ml_dtypes.bfloat16
    q, k, v = (rng.standard_normal((1, 130, 1, d)).astype(dtype) for d in (dim_qk, dim_qk, 128))
    descales = tuple(np.asarray(1.0, np.float32) for _ in range(3)) if "fp8" in name else None
    from gfx950_emu import EmulatorError
    with pytest.raises(EmulatorError, match=r"LDS race at byte 0x[0-9a-f]+: " + error):
        _run(name, q, k, v, True, descales, seed=seed, code_object=co)
