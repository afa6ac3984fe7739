"""tools/gfx950_mutate.py kept working on the smallest kernel (quantize_d32): its macro expansion rebuilds the very
code object `make amd` built, each site names the source line it came from, a removed wait state the lint asks for
is killed by the lint, and a two-mutant run ends on its score line. (The full run, every kernel: the tool itself.)"""
import pathlib
import subprocess
import sys

import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gfx950_mutate  # noqa: E402

pytestmark = markers.needs_assembler22
KERNEL = "quantize_d32"


@pytest.fixture(scope="module")
def expanded(tmp_path_factory):
    built = ROOT / "build" / "gfx950" / f"{KERNEL}.co"
    if not built.exists():
        pytest.fail(f"{built} is missing: run `make amd`")
    lines, sites = gfx950_mutate.expand(KERNEL, tmp_path_factory.mktemp("expand"))
    return lines, sites, built


def test_expansion_rebuilds_the_code_object(expanded, tmp_path):
    lines, sites, built = expanded
    assert gfx950_mutate.build(lines, KERNEL, tmp_path).read_bytes() == built.read_bytes()
    assert sites and all(where and where.startswith("asm/gfx950/") for _, where in sites)
    for index, where in sites:
        path, number = where.rsplit(":", 1)
        source = (ROOT / path).read_text().splitlines()[int(number) - 1].split("//")[0].split()
        assert source[0] == lines[index].split()[0], (where, lines[index])


def test_lint_kills_a_needed_wait_state(expanded, tmp_path):
    """An s_nop the source marks as a VCC wait state, removed: the lint catches it (no emulation needed)."""
    lines, sites, _ = expanded
    mutant = next(m for m in gfx950_mutate.mutants(KERNEL, lines, sites)
                  if m.change == "remove" and "VCC" in (ROOT / m.where.rsplit(":", 1)[0]).read_text().splitlines()[
                      int(m.where.rsplit(":", 1)[1]) - 1])
    co = gfx950_mutate.build(gfx950_mutate._mutated(lines, mutant), KERNEL, tmp_path)
    assert gfx950_mutate.check(KERNEL, co, [1]) == "lint"


def test_two_mutants_end_on_a_score():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gfx950_mutate.py"), KERNEL, "--limit", "2"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    score = out.stdout.strip().splitlines()[-1]
    assert score.startswith("score: ") and " / 2 killed" in score, out.stdout
