"""tools/mi355x_check.py on the host: its dry run (numpy stand-ins for every device call) over each form, a wrong or
unwritten output (or verdict) failing it, its arguments, its refusal without ROCm, and the case table; the reading of
the check's verdict through the gfx950 library's flashprefill_workspace_error (with tests/hip_stub.c as
libamdhip64.so). The device path (torch or CuPy for ROCm, HIP events, aiter launches through libamdhip64) has never
run: no AMD GPU was available."""
import json
import pathlib
import re
import sys

import numpy as np
import pytest

import hip_stub
import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import mi355x_cases as cases  # noqa: E402
import mi355x_check  # noqa: E402
import mi355x_device  # noqa: E402
import mi355x_judge  # noqa: E402
from mi355x_standins import StandIns  # noqa: E402
import varlen_verdict  # noqa: E402

FAST = ["--dry-run", "--rounds", "1", "--launches", "1", "--idle-s", "0"]
# one case of each form, small: the dry run's stand-ins compute on the host in float64
EVERY_FORM = ["bf16_d128_causal_2x200x200x4x2", "fp8_d128_varlen_set0", "bf16_d192_paged64_set0",
              "quantize_d192_2x200x2", "quantize_d64_packed", "quantize_paged_d64_pages64",
              "merge_state_f32_bf16_1x26x2x136", "merge_state_bf16_f32_nonfinite", "varlen_check_paged_page_negative"]


def _run(tmp_path, names, *extra):
    rc = mi355x_check.main(FAST + ["--out", str(tmp_path), "--only", *names, *extra])
    return rc, json.loads((tmp_path / "mi355x_check.json").read_text())


def test_dry_run_checks_every_form(tmp_path, capsys):
    rc, report = _run(tmp_path, EVERY_FORM)
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert report["dry_run"] and [c["case"] for c in report["cases"]] == [
        c.name for c in cases.all_cases() if c.name in EVERY_FORM]
    for case in report["cases"]:
        assert case["ok"] and case["checks"] and all(c["ok"] for c in case["checks"]), case
        assert case["timing"]["flashprefill"]["median_ms"] > 0
    varlen = next(c["checks"] for c in report["cases"] if c["form"] == "varlen")
    assert not any(c["what"].startswith("sequence 1 ") for c in varlen)  # sequence 1 has no queries
    # 360 queries over 380 keys: judged on the first and the last 128 rows; 300 queries over 30 keys: the first
    # 128 see no key (out 0, lse -inf)
    judged = {c["what"] for c in varlen}
    assert {"sequence 4 rows 0..127 lse", "sequence 4 rows 232..359 lse", "sequence 3 rows 0..127 out"} <= judged
    if markers.AITER_GFX950 is not None:  # equal lengths: aiter's fmha_v3 beside ours, checked alike
        first = next(c for c in report["cases"] if c["form"] == "equal")
        assert first["aiter_checks"] and all(c["ok"] for c in first["aiter_checks"])
        assert first["ours_over_aiter"] > 0 and "aiter" in first["timing"]
    table = (tmp_path / "mi355x_check.md").read_text()
    assert f"{len(EVERY_FORM)} of {len(EVERY_FORM)} cases pass" in table
    assert all(f"| {name} |" in table for name in EVERY_FORM)
    assert "rocprofv3 --pmc SQ_WAVES SQ_INSTS_VALU SQ_INSTS_MFMA" in printed
    assert f"--only {EVERY_FORM[0]} " in printed and "SQ_WAVES per call should be 64" in printed  # 1 x 4 x 2 x 8
    # a varlen call's two dispatches (its first: bf16_d192_paged64_set0), split by name
    assert "--kernel-include-regex '^(varlen_check|fwd_bf16_qk192)$' -d rocprof/varlen_split" in printed


@pytest.mark.parametrize("name, waves", [
    ("merge_state_bf16_bf16_2x37x2x128", 2 * 2 * 2),  # 16 pieces a row: 4 rows a pass, 32 a workgroup
    ("merge_state_f32_bf16_1x26x2x136", 2 * 2),       # 17 pieces: 3 rows a pass, 24 a workgroup
    ("merge_state_f32_f32_1x3x2x520", 1 * 2),         # 65 pieces: 1 row a pass, 8 a workgroup
    ("merge_state_bf16_f32_1x16384x16x128", 512 * 16),
    ("varlen_check_paged_valid", 1),
])
def test_expected_waves(name, waves):
    """SQ_WAVES per call of merge_state (hip/merge_state_launch.c's grid, one wave a workgroup) and of the check."""
    assert mi355x_check.expected_waves(next(c for c in cases.all_cases() if c.name == name)) == waves


def _spoiled_attention(how):
    original = StandIns.attention

    def attention(self, *args, **kwargs):
        out, lse = original(self, *args, **kwargs)
        if how == "unwritten":
            out[1, 150, 3, 7] = np.nan
        elif how == "perturbed":
            out[0, 199, 0] = out[0, 199, 0].astype(np.float32) + 0.25
        else:
            lse[1, 2, 17] += 0.01
        return out, lse
    return attention


@pytest.mark.parametrize("how", ["unwritten", "perturbed", "lse"])
def test_a_wrong_attention_output_fails(tmp_path, monkeypatch, how):
    monkeypatch.setattr(StandIns, "attention", _spoiled_attention(how))
    rc, report = _run(tmp_path, ["bf16_d128_causal_2x200x200x4x2"], "--no-aiter")
    assert rc == 1
    failed = [c for c in report["cases"][0]["checks"] if not c["ok"]]
    assert failed and failed[0]["detail"], report["cases"][0]["checks"]
    assert ("lse" in failed[0]["what"]) == (how == "lse")
    assert "0 of 1 cases pass" in (tmp_path / "mi355x_check.md").read_text()


def test_a_wrong_code_fails(tmp_path, monkeypatch):
    original = StandIns.quantize_fp8

    def quantize_fp8(x, block=128, *, codes=None, exponents=None):
        codes, scales = original(x, block, codes=codes, exponents=exponents)
        codes.view(np.uint8)[1, 100, 1, 5] ^= 1
        return codes, scales
    monkeypatch.setattr(StandIns, "quantize_fp8", staticmethod(quantize_fp8))
    rc, report = _run(tmp_path, ["quantize_d64_2x200x2"])
    assert rc == 1
    codes = report["cases"][0]["checks"][0]
    assert not codes["ok"] and "first at [1, 100, 1, 5]" in codes["detail"]


def test_a_wrong_paged_write_fails(tmp_path, monkeypatch):
    """A code changed anywhere in the cache after the writes (here in row 0 of page 0): the whole cache is judged."""
    original, calls = StandIns.quantize_paged, []

    def quantize_paged(x, slot_mapping, codes_cache, exponents):
        original(x, slot_mapping, codes_cache, exponents)
        if not calls:  # once: each check makes two writes
            codes_cache.view(np.uint8)[0, 0, 1, 5] ^= 1
        calls.append(1)
    monkeypatch.setattr(StandIns, "quantize_paged", staticmethod(quantize_paged))
    rc, report = _run(tmp_path, ["quantize_paged_d32_pages16"])
    assert rc == 1
    codes = report["cases"][0]["checks"][0]
    assert not codes["ok"] and "first at [0, 0, 1, 5]" in codes["detail"]


def _spoiled_merge(how):
    original = StandIns.merge_state

    def merge_state(out_a, lse_a, out_b, lse_b, out=None, lse_out=None):
        original(out_a, lse_a, out_b, lse_b, out=out, lse_out=lse_out)
        if how == "unwritten":
            out[1, 30, 1, 7] = np.nan
        elif how == "perturbed":
            out[0, 5, 0] = out[0, 5, 0].astype(np.float32) * 1.05
        elif how == "lse":
            lse_out[1, 0, 20] += 1e-5 * abs(lse_out[1, 0, 20]) + 1e-5
        else:  # nonfinite: row 0 (a saw no key) must be b's exactly
            out[0, 0, 0, 0] = out[0, 0, 0, 0].astype(np.float32) * (1 + 2.0**-20)
        return out, lse_out
    return merge_state


@pytest.mark.parametrize("how, case, failing", [
    ("unwritten", "merge_state_bf16_bf16_2x37x2x128", "out"),
    ("perturbed", "merge_state_bf16_f32_2x37x2x128", "out"),
    ("lse", "merge_state_f32_f32_2x37x2x128", "lse"),
    ("nonfinite", "merge_state_f32_f32_nonfinite", "out of rows 0..2 (the other part)"),
])
def test_a_wrong_merge_fails(tmp_path, monkeypatch, how, case, failing):
    monkeypatch.setattr(StandIns, "merge_state", staticmethod(_spoiled_merge(how)))
    rc, report = _run(tmp_path, [case])
    assert rc == 1
    failed = [c for c in report["cases"][0]["checks"] if not c["ok"]]
    assert [c["what"] for c in failed] == [failing] and failed[0]["detail"], report["cases"][0]["checks"]


def test_dry_run_every_fault(tmp_path):
    """Every varlen_check case: its verdict read back is the rule's, out and lse NaN at fault, judged valid else."""
    rc, report = _run(tmp_path, ["varlen_check"])
    assert rc == 0 and len(report["cases"]) == len(cases.VARLEN_FAULTS)
    for case in report["cases"]:
        checks = {c["what"]: c["ok"] for c in case["checks"]}
        assert case["ok"] and checks["verdict"], case
        valid = cases.VARLEN_FAULTS[case["fault"]][3] == varlen_verdict.OK
        assert ("out NaN after the fault" in checks) != valid and len(checks) > 1


def _spoiled_check(how):
    original_call, original_error = StandIns.attention_varlen, StandIns.workspace_error

    def attention_varlen(self, *args, workspace=None, **kwargs):
        result = original_call(self, *args, workspace=workspace, **kwargs)
        if how == "header unwritten":
            workspace[...] = mi355x_check.WORKSPACE_POISON
        elif how == "out not NaN":
            kwargs["out"][3, 1, 5] = 0.0
        return result

    def workspace_error(workspace):
        code, message = original_error(workspace)
        return code, message.replace("sequence 1,", "sequence 2,") if how == "sequence" else message
    return attention_varlen, staticmethod(workspace_error)


@pytest.mark.parametrize("how, failing", [("sequence", "verdict"), ("header unwritten", "verdict"),
                                          ("out not NaN", "out NaN after the fault")])
def test_a_wrong_verdict_fails(tmp_path, monkeypatch, how, failing):
    attention_varlen, workspace_error = _spoiled_check(how)
    monkeypatch.setattr(StandIns, "attention_varlen", attention_varlen)
    monkeypatch.setattr(StandIns, "workspace_error", workspace_error)
    rc, report = _run(tmp_path, ["varlen_check_paged_page_negative"])  # (BLOCK_TABLE, sequence 1, value -3)
    assert rc == 1
    failed = [c for c in report["cases"][0]["checks"] if not c["ok"]]
    assert [c["what"] for c in failed] == [failing], report["cases"][0]["checks"]
    if failing == "verdict":
        assert "the rule: (6, 1, -3)" in failed[0]["detail"]


# In its own process with the stub as libamdhip64.so, whose hipMemcpy copies host memory: a header in a numpy array.
_VERDICT_SCRIPT = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import flashprefill, mi355x_check, mi355x_device
host = mi355x_device.Host()
verdicts = [mi355x_check.workspace_verdict(flashprefill, host, np.array(header, np.int32).view(np.uint8))
            for header in ([0, 0, 0, 0], [6, 3, 99, 0], [3, 1, -5, 7])]
print(json.dumps(verdicts))
"""


@markers.needs_cc
def test_verdict_read_through_the_library(tmp_path):
    """workspace_verdict off the dry run: flashprefill_workspace_error of the gfx950 library through ctypes, the
    sequence and value taken from its message."""
    library = ROOT / "build" / "libflashprefill_gfx950.so"
    if not library.exists():
        pytest.fail(f"{library} is missing: run `make amd`")
    hip_stub.build(tmp_path)
    out = hip_stub.run(tmp_path, [sys.executable, "-c", _VERDICT_SCRIPT, ROOT / "tools"],
                       PYTHONPATH=str(ROOT / "python"), FLASHPREFILL_GFX950_LIBRARY=str(library))
    valid, page, keys = json.loads(out)
    assert valid == [0, 0, 0, "valid"]
    assert page[:3] == [6, 3, 99] and page[3].startswith("block_table holds a page id outside [0, num_pages)")
    assert keys[:3] == [3, 1, -5]


def test_fault_codes_are_the_library_s():
    """tools/varlen_verdict.py's codes are fp_varlen_error's (src/launch_common.h)."""
    header = (ROOT / "src" / "launch_common.h").read_text()
    c = dict(re.findall(r"FP_VARLEN_(\w+) = (\d+)", header))
    assert {name: int(c[name]) for name in ("OK", "CU_SEQLENS_Q", "SEQLEN_Q", "CU_SEQLENS_K", "SEQLEN_K",
                                            "SEQUSED_K", "BLOCK_TABLE")} == {
        "OK": varlen_verdict.OK, "CU_SEQLENS_Q": varlen_verdict.CU_Q, "SEQLEN_Q": varlen_verdict.SEQLEN_Q,
        "CU_SEQLENS_K": varlen_verdict.CU_K, "SEQLEN_K": varlen_verdict.SEQLEN_K,
        "SEQUSED_K": varlen_verdict.SEQUSED_K, "BLOCK_TABLE": varlen_verdict.BLOCK_TABLE}


def test_a_refusal_of_the_library_fails_the_case(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise ValueError("not taken")
    monkeypatch.setattr(StandIns, "attention_varlen", staticmethod(refuse))
    rc, report = _run(tmp_path, ["bf16_d128_varlen_set0"])
    assert rc == 1 and report["cases"][0]["error"] == "ValueError: not taken"


@pytest.mark.parametrize("argv, message", [
    (["--only", "fwd_bf16_hd256"], "no case or kernel named fwd_bf16_hd256"),
    (["--only", "fwd_fp8_qk192", "--max-seqlen", "8"], "no case of ['fwd_fp8_qk192'] has sequences of at most 8"),
])
def test_selection_refused(argv, message, capsys):
    assert mi355x_check.main(FAST + argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--launches", "-1"], ["--max-seqlen", "0"],
                                  ["--idle-s", "-1"], ["--rounds", "many"]])
def test_bad_arguments(argv):
    with pytest.raises(SystemExit) as e:
        mi355x_check.parse(argv)
    assert e.value.code == 2


def test_select_by_kernel_and_length():
    chosen = mi355x_check.select(cases.all_cases(), ["quantize_d128", "fwd_bf16_qk192"], 4096)
    assert {c.kernel for c in chosen} == {"quantize_d128", "fwd_bf16_qk192"}
    assert all(c.longest <= 4096 for c in chosen) and {c.form for c in chosen} == {"quantize", "equal", "varlen",
                                                                                   "paged"}


def test_refuses_without_rocm(capsys):
    """Without a ROCm array library and a gfx950 device (CI, the Hopper machines) a plain run says what is missing."""
    try:
        backend = mi355x_device.detect(0, dry_run=False)
    except mi355x_device.Refusal as e:
        message = str(e)
        assert "torch for ROCm or CuPy for ROCm" in message or "not an MI355X" in message
    else:
        pytest.skip(markers.rocm_present(backend.arch, backend.name))
    assert mi355x_check.main(["--only", "quantize_d32"]) == 2
    assert message in capsys.readouterr().err


def test_every_kernel_form_and_length():
    all_cases = cases.all_cases()
    assert len({c.name for c in all_cases}) == len(all_cases)
    built = {p.stem for p in (ROOT / "asm" / "gfx950").glob("*.s")}
    assert {c.kernel for c in all_cases} == built
    for kernel in {c.kernel for c in all_cases if c.kernel.startswith("fwd_")}:
        mine = [c for c in all_cases if c.kernel == kernel]
        assert {c.form for c in mine} == {"equal", "varlen", "paged"}
        assert max(c.longest for c in mine) == 16384 and min(c.longest for c in mine) <= 400
        assert any(c.causal for c in mine) and any(not c.causal for c in mine)
    assert {c.descale for c in all_cases if c.dtype == "fp8"} == {"per_head", "per_block"}
    for kernel in {c.kernel for c in all_cases if c.kernel.startswith("merge_state_")}:
        mine = [c for c in all_cases if c.kernel == kernel]
        assert {c.form for c in mine} == {"merge_state", "merge_state_nonfinite"}
        assert {c.dim_v for c in mine} == {64, 128, 136, 520}
        assert min(c.longest for c in mine) == 1 and max(c.longest for c in mine) == 16384
    assert {c.kernel for c in all_cases if c.form.startswith("merge_state")} == {
        f"merge_state_{a}_{b}" for a in ("bf16", "f32") for b in ("bf16", "f32")}


def test_each_fault_makes_the_error_it_names():
    """Each varlen_check case's arrays hold the fault it names (by the rule), and every kind of fault has a case, varlen
    and paged alike where both can have it, and valid ones."""
    checks = [c for c in cases.all_cases() if c.form == "varlen_check"]
    assert [c.fault for c in checks] == list(cases.VARLEN_FAULTS)
    made = {}
    for case in checks:
        arrays, _ = cases.inputs(case, np.random.default_rng())
        error = mi355x_judge.expected_verdict(arrays)[0]
        assert error == cases.VARLEN_FAULTS[case.fault][3], case.name
        made.setdefault(error, set()).add(bool(case.page_size))
    assert set(made) == set(range(7))
    assert made[varlen_verdict.OK] == made[varlen_verdict.SEQUSED_K] == {False, True}


@pytest.mark.parametrize("sq, sk, causal, expected", [
    (200, 200, True, [(0, 200, 200)]),
    (16384, 16384, True, [(0, 128, 128), (16256, 16384, 16384)]),
    (700, 1300, True, [(0, 128, 728), (572, 700, 1300)]),
    (4096, 4096, False, [(0, 128, 4096), (3968, 4096, 4096)]),
    (300, 30, True, [(0, 128, 0), (172, 300, 30)]),
])
def test_row_blocks(sq, sk, causal, expected):
    assert mi355x_judge.row_blocks(sq, sk, causal) == expected


@pytest.mark.emulator
@markers.needs_llvm22
def test_emulator_counts_beside_the_rocprof_lines(tmp_path, capsys):
    """--emulator-counts: what the SQ counters should read per dispatch, from the built code object in the emulator."""
    name = "bf16_d128_causal_2x200x200x4x2"
    rc, report = _run(tmp_path, [name], "--no-aiter", "--emulator-counts")
    assert rc == 0
    counts = report["cases"][0]["emulator_counts"]
    case = next(c for c in cases.all_cases() if c.name == name)
    assert counts["SQ_WAVES"] == mi355x_check.expected_waves(case) == 64
    instructions = report["cases"][0]["emulator_instructions"]
    assert counts["SQ_INSTS_MFMA"] == sum(n for m, n in instructions.items() if m.startswith("v_mfma")) > 0
    assert counts["SQ_INSTS_VALU"] > counts["SQ_INSTS_MFMA"] and counts["SQ_INSTS_LDS"] > 0
    assert f"SQ_INSTS_MFMA {counts['SQ_INSTS_MFMA']}," in capsys.readouterr().out


def test_seed_replays_a_case_alone(tmp_path):
    """--seed S --only NAME gives NAME the inputs it had in a run of more cases with seed S (equal errors)."""
    name = "bf16_d128_causal_2x200x200x4x2"
    _, together = _run(tmp_path / "together", ["quantize_d32_2x200x2", name], "--no-aiter", "--seed", "5")
    _, alone = _run(tmp_path / "alone", [name], "--no-aiter", "--seed", "5")
    _, other = _run(tmp_path / "other", [name], "--no-aiter", "--seed", "6")
    errors = [[c["error"] for c in next(x for x in r["cases"] if x["case"] == name)["checks"]]
              for r in (together, alone, other)]
    assert errors[0] == errors[1] != errors[2]
