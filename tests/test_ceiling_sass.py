"""The wgmma loop's machine code (CPU only; build/ceiling/wgmma_loop.cu.o from `make ceiling`): the forward kernels'
wgmma forms, the loop's issued back to back (S(n) with P(n-1) V(n-1) as one run of wgmma, nothing but uniform
descriptor arithmetic between), no local memory, and a ptxas report without spills or serialized wgmma. A ceiling whose
loop waits between its wgmma, or spills, would measure less than the tensor cores give. (Outside the loop, tile 0's S
and the last P.V, ptxas puts the next item's index arithmetic between the wgmma: issue slots the wgmma leave free.)"""
import pathlib
import re
import subprocess

import pytest

import markers
from test_sass import MMA, NOT_MMA, _cuobjdump

ROOT = pathlib.Path(__file__).resolve().parents[1]
OBJECT = ROOT / "build" / "ceiling" / "wgmma_loop.cu.o"
PTXAS_REPORT = ROOT / "build" / "ceiling" / "wgmma_loop.ptxas.txt"
# loop kernel: (its name's FwdConfig part, test_sass's kind of the forward kernel it mirrors, wgmma per K tile of
# S = Q K^T, of P.V)
KERNELS = {"fp8_kv192": ("flashprefill_dtype2ELi128ELi128EL26flashprefill_probabilities0ELi192E", "fp8-kv192", 4, 6),
           "fp8_kv128": ("flashprefill_dtype2ELi128ELi128EL26flashprefill_probabilities0ELi128E", "fp8", 4, 8),
           "bf16_kv128": ("flashprefill_dtype1ELi128ELi128EL26flashprefill_probabilities0ELi128E", "bf16", 8, 8)}


@pytest.fixture(scope="module")
def sass():
    if not OBJECT.exists():
        pytest.fail(f"{OBJECT} is missing: run `make ceiling` first")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip(markers.NO_CUOBJDUMP)
    text = subprocess.run([tool, "--dump-sass", str(OBJECT)], capture_output=True, text=True, check=True).stdout
    return {name.strip(): body for name, _, body in (chunk.partition("\n") for chunk in text.split("Function : ")[1:])}


def _instructions(sass, kernel):
    bodies = [body for name, body in sass.items() if "wgmma_loop_kernel" in name and KERNELS[kernel][0] in name]
    assert len(bodies) == 1, f"expected one {kernel} wgmma_loop_kernel, found {len(bodies)} in {list(sass)}"
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s+", "", line.split(";")[0]) for line in bodies[0].splitlines()
            if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)]


def _wgmma_runs(instructions):
    """The lengths of the runs of wgmma with only uniform-datapath instructions (U*) and NOP between them."""
    runs, current = [], 0
    for line in instructions:
        opcode = line.split()[0] if not line.startswith("@") else line.split()[1]
        if "GMMA" in opcode:
            current += 1
        elif current and not (opcode.startswith("U") or opcode == "NOP"):
            runs.append(current)
            current = 0
    return runs


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_forward_kernels_wgmma(sass, kernel):
    body = "\n".join(_instructions(sass, kernel))
    kind = KERNELS[kernel][1]
    for mma in MMA[kind]:
        assert mma in body, f"{kernel} lacks {mma}"
    for mma in NOT_MMA[kind]:
        assert mma not in body, f"{kernel} has {mma}"
    assert "UTMALDG" in body, f"{kernel} loads no tile through TMA"
    assert not re.findall(r"\b(LDL|STL)\b", body), f"{kernel} uses local memory"


@pytest.mark.parametrize("kernel", KERNELS)
def test_loop_issues_its_wgmma_back_to_back(sass, kernel):
    """Tile 0's S, then per tile S(n) and P(n-1) V(n-1) as one run (the loop, not unrolled), then the last P.V."""
    _, _, s_steps, pv_steps = KERNELS[kernel]
    runs = _wgmma_runs(_instructions(sass, kernel))
    assert sum(runs) == 2 * (s_steps + pv_steps) and runs.count(s_steps + pv_steps) == 1, \
        f"{kernel}: runs of wgmma {runs}, expected one of {s_steps + pv_steps} among {2 * (s_steps + pv_steps)}"


def test_ptxas_report_clean():
    report = PTXAS_REPORT.read_text()
    assert report.count("Compiling entry function") == len(KERNELS), report
    assert "serializ" not in report, report
    assert not re.search(r"[1-9]\d* bytes (spill|stack frame)", report), report
