"""The first run on an MI355X (gfx950): every gfx950 kernel of the library checked against the float64 reference and
the fp8 numpy model with the emulated tests' bounds (tools/gfx950_bounds.py, tools/merge_state_bounds.py), the check
of varlen arrays by the verdict flashprefill_workspace_error reads against the rule's (tools/varlen_verdict.py), then
timed (HIP events, interleaved rounds: tools/timing.py), beside AMD's aiter fmha_v3 forward where the amd-aiter wheel
is installed.

    python tools/mi355x_check.py [--out DIR] [--only NAME ...] [--max-seqlen N] [--rounds R] [--launches L]
                                 [--no-aiter] [--emulator-counts] [--dry-run]

Needs torch for ROCm or CuPy for ROCm (detected in that order) and a gfx950 device, and `make amd`'s library;
refuses with a message otherwise (exit 2). Writes DIR/mi355x_check.json (every check and timing) and
DIR/mi355x_check.md (one table), prints the rocprofv3 command lines to run next and which counters to compare with
the emulator's. Exits 1 when any check fails. --only: case names or kernel names (fwd_fp8_qk192, quantize_d128,
merge_state_bf16_f32, varlen_check).
--dry-run: everything but the device calls, which numpy stand-ins make (tools/mi355x_standins.py), on the host.
Written without an AMD GPU: nothing but the dry run has ever run.
"""
import argparse
import ctypes
import datetime
import json
import pathlib
import re
import sys
import zlib

import numpy as np

TOOLS = pathlib.Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path[:0] = [str(TOOLS), str(ROOT / "python")]

import mi355x_cases as cases  # noqa: E402
import mi355x_device as device  # noqa: E402
import mi355x_judge  # noqa: E402
from mi355x_standins import StandIns  # noqa: E402
from records import git_commit  # noqa: E402
import timing  # noqa: E402
from gfx950_emu.aiter_args import FMHA_FWD_V3_KERNELS, fmha_fwd_v3_launch  # noqa: E402

ROUNDS, LAUNCHES = 5, 20
QUERIES_PER_WORKGROUP, WAVES_PER_WORKGROUP = 256, 8  # asm/gfx950/fwd_contract.inc
MERGE_LANES, MERGE_PIECE_ELEMS, MERGE_PASSES_PER_WORKGROUP = 64, 8, 8  # hip/merge_state_launch.c: one wave a group
WORKSPACE_POISON = 0x55  # every workspace byte before a checked call: a header the check did not write reads wrong
# rocprofv3 counters, in passes that fit the SQ's counter slots together; names as rocprofv3 --list-avail spells
# them on ROCm 6.4 / 7 (unchecked on gfx950: run --list-avail first)
PMC_PASSES = (("SQ_WAVES", "SQ_INSTS_VALU", "SQ_INSTS_MFMA", "SQ_INSTS_LDS"),
              ("SQ_INSTS_SALU", "SQ_INSTS_SMEM", "SQ_INSTS_VMEM_RD", "SQ_INSTS_VMEM_WR"),
              ("SQ_LDS_BANK_CONFLICT", "SQ_LDS_IDX_ACTIVE", "SQ_BUSY_CYCLES", "GRBM_GUI_ACTIVE"))


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "mi355x"), help="directory of the JSON and the table")
    ap.add_argument("--only", nargs="+", default=[], metavar="NAME", help="case or kernel names")
    ap.add_argument("--max-seqlen", type=int, default=None, help="leave out cases with a longer sequence")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--launches", type=int, default=LAUNCHES, help="timed calls per round")
    ap.add_argument("--idle-s", type=float, default=timing.IDLE_S, help="idle before each timing")
    ap.add_argument("--seed", type=int, default=None, help="input seed (default: a fresh one, printed)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--no-aiter", action="store_true", help="leave AMD's kernels out")
    ap.add_argument("--dry-run", action="store_true", help="numpy stand-ins for every device call")
    ap.add_argument("--emulator-counts", action="store_true",
                    help="also run each kernel's first small case in tools/gfx950_emu (seconds each, on the host) for "
                         "the instruction counts rocprofv3 should read")
    args = ap.parse_args(argv)
    for name in ("rounds", "launches"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.max_seqlen is not None and args.max_seqlen < 1:
        ap.error("--max-seqlen must be at least 1")
    if args.idle_s < 0:
        ap.error("--idle-s must be at least 0")
    return args


def select(all_cases, only, max_seqlen):
    """The cases named by `only` (case or kernel names; all when empty) no longer than max_seqlen; ValueError naming
    what matched nothing."""
    unknown = [n for n in only if not any(n in (c.name, c.kernel) for c in all_cases)]
    if unknown:
        raise ValueError(f"no case or kernel named {', '.join(unknown)}; kernels: "
                         f"{', '.join(sorted({c.kernel for c in all_cases}))}")
    chosen = [c for c in all_cases if (not only or c.name in only or c.kernel in only)
              and (max_seqlen is None or c.longest <= max_seqlen)]
    if not chosen:
        raise ValueError(f"no case of {only or 'all'} has sequences of at most {max_seqlen} tokens")
    return chosen


def aiter_directory(disabled):
    """aiter_meta/hsa/gfx950 of the installed amd-aiter wheel, or None."""
    if disabled:
        return None
    import importlib.util
    spec = importlib.util.find_spec("aiter_meta")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = pathlib.Path(spec.submodule_search_locations[0]) / "hsa" / "gfx950"
    return path if path.is_dir() else None


# ---------------------------------------------------------------------------------------------------------------
# One case

def _to_device(backend, library, value):
    if isinstance(value, np.ndarray):
        return backend.to_device(value)
    if isinstance(value, tuple):  # per-block exponents and their block
        return library.BlockScales(backend.to_device(value[0]), value[1])
    return value


def _poisoned(backend, shape, dtype, value=np.nan):
    """A device array of `shape` full of NaN (bf16, float32; or `value`, where NaN is an expected output), NaN codes
    (e4m3) or -128 (int8 exponents)."""
    fill = {"bfloat16": np.array(value, cases.BF16), "float32": np.array(value, np.float32),
            "float8_e4m3fn": np.array(cases.E4M3_NAN_CODE, np.uint8).view(cases.E4M3),
            "int8": np.array(cases.EXPONENT_POISON, np.int8)}[dtype]
    return backend.to_device(np.full(shape, fill))


def library_call(case, library, backend, dev):
    """() -> the case's device results, each call enqueuing the kernel once more: (out, lse), (codes, exponents) or,
    varlen_check, (out, lse, workspace)."""
    if case.form.startswith("merge_state"):
        poison = cases.SENTINEL if case.form == "merge_state_nonfinite" else np.nan
        out = _poisoned(backend, dev["out_a"].shape, cases.MERGE_DTYPES[case.out_dtype], poison)
        lse = _poisoned(backend, dev["lse_a"].shape, "float32", poison)
        return lambda: library.merge_state(dev["out_a"], dev["lse_a"], dev["out_b"], dev["lse_b"], out=out,
                                           lse_out=lse)
    if case.form == "quantize":
        x = dev["x"]
        batch, seq, heads, dim = x.shape
        codes = _poisoned(backend, x.shape, "float8_e4m3fn")
        exponents = _poisoned(backend, (batch, heads, -(-seq // cases.QUANTIZE_BLOCK)), "int8")

        def quantize():
            got_codes, scales = library.quantize_fp8(x, cases.QUANTIZE_BLOCK, codes=codes, exponents=exponents)
            return got_codes, scales.exponents
        return quantize
    if case.form == "quantize_packed":
        x, cu = dev["x"], dev["cu_seqlens"]
        slots = -(-dev["max_seqlen"] // cases.QUANTIZE_BLOCK)
        codes = _poisoned(backend, x.shape, "float8_e4m3fn")
        exponents = _poisoned(backend, (cu.shape[0] - 1, x.shape[1], slots), "int8")

        def quantize_packed():
            got_codes, scales = library.quantize_fp8(x, cases.QUANTIZE_BLOCK, codes=codes, exponents=exponents,
                                                     cu_seqlens=cu, max_seqlen=dev["max_seqlen"])
            return got_codes, scales.exponents
        return quantize_packed
    if case.form == "quantize_paged":  # the cache starts empty (EXPONENT_POISON is PAGE_EMPTY); repeated calls time
        _, heads_kv, dim = dev["x"].shape  # the same two writes into what the first ones left
        codes = _poisoned(backend, (dev["num_pages"], case.page_size, heads_kv, dim), "float8_e4m3fn")
        exponents = _poisoned(backend, (dev["num_pages"], heads_kv), "int8")

        def write_prompt_then_step():
            library.quantize_paged(dev["x"], dev["slot_mapping"], codes, exponents)
            library.quantize_paged(dev["x_step"], dev["slot_mapping_step"], codes, exponents)
            return codes, exponents
        return write_prompt_then_step
    descales = {n: dev[n] for n in ("q_descale", "k_descale", "v_descale") if n in dev}
    if case.form == "equal":
        out = _poisoned(backend, dev["q"].shape[:3] + (cases.DIM_V,), "bfloat16")
        return lambda: library.attention(dev["q"], dev["k"], dev["v"], causal=case.causal, out=out, return_lse=True,
                                         **descales)
    # the check's cases poison with a finite value: a fault must turn every element NaN
    poison = cases.SENTINEL if case.form == "varlen_check" else np.nan
    out = _poisoned(backend, (dev["q"].shape[0], case.heads[0], cases.DIM_V), "bfloat16", poison)
    lse = _poisoned(backend, (case.heads[0], dev["q"].shape[0]), "float32", poison)
    arrays = (dev["q"], dev["k"], dev["v"], dev["cu_seqlens_q"], dev["cu_seqlens_k"], dev["max_seqlen_q"],
              dev["max_seqlen_k"])
    options = dict(seqused_k=dev.get("seqused_k"), block_table=dev.get("block_table"), causal=case.causal,
                   **descales)
    if case.form != "varlen_check":
        return lambda: library.attention_varlen(*arrays, out=out, return_lse=True, lse=lse, **options)
    workspace_bytes = library.varlen_workspace_bytes(*arrays, **options)
    workspace = backend.to_device(np.full(workspace_bytes, WORKSPACE_POISON, np.uint8))  # the header written or not

    def checked_call():
        library.attention_varlen(*arrays, out=out, return_lse=True, lse=lse, workspace=workspace, **options)
        return out, lse, workspace
    return checked_call


def workspace_verdict(library, backend, workspace):
    """(code, sequence, value, message) of flashprefill_workspace_error on a finished call's workspace: the C ABI's
    function through ctypes (Python's check=True raises only the message), or the dry run's stand-in of it; sequence
    and value as the message states them (0, 0 when valid)."""
    if isinstance(library, StandIns):
        code, message = library.workspace_error(workspace)
    else:  # the backend's library: gfx950's, or on an NVIDIA GPU Hopper's (test_mi355x_device_gpu.py)
        from flashprefill import _lib
        c_library = _lib.lib(backend.library)
        error, text = ctypes.c_int32(), ctypes.create_string_buffer(512)
        status = c_library.flashprefill_workspace_error(backend.pointer(workspace), ctypes.byref(error), text, 512)
        if status != 0:
            raise RuntimeError(f"flashprefill_workspace_error: {c_library.flashprefill_last_error().decode()}")
        code, message = error.value, text.value.decode()
    stated = re.search(r"sequence (-?\d+), value (-?\d+)", message)
    return (code, *((int(stated[1]), int(stated[2])) if stated else (0, 0)), message)


def host_results(case, library, backend, results):
    """The call's device results on the host; varlen_check's workspace as workspace_verdict's reading of it."""
    if case.form == "varlen_check":
        out, lse, workspace = results
        return backend.to_host(out), backend.to_host(lse), workspace_verdict(library, backend, workspace)
    return [backend.to_host(x) for x in results]


def _verdicts_json(verdicts):
    return [{"what": what, "ok": bool(v.ok), "error": v.error, "bound": v.bound, "detail": "" if v.ok else v.detail}
            for what, v in verdicts]


def aiter_setup(case, rng, backend, library, modules, aiter, dry_run):
    """(run, judge) of aiter's fmha_v3 forward bf16 on the case's shape (fp8 cases: bf16 inputs of that shape), or
    None where aiter has no such kernel (equal-length, seqlen_q == seqlen_k, its head dims)."""
    sq, sk = case.lengths[0]
    if case.form != "equal" or sq != sk or case.dim_qk not in FMHA_FWD_V3_KERNELS:
        return None
    bf16_case = cases.Case(case.name, case.kernel, "equal", "bf16", case.dim_qk, case.causal, case.heads,
                           case.lengths)
    arrays, sequences = cases.equal_inputs(bf16_case, rng)
    dev = {n: backend.to_device(arrays[n]) for n in "qkv"}
    out = _poisoned(backend, dev["q"].shape[:3] + (cases.DIM_V,), "bfloat16")
    lse = backend.to_device(np.full((len(case.lengths), case.heads[0], sq), np.nan, np.float32))
    shapes = {"q": arrays["q"].shape, "k": arrays["k"].shape, "v": arrays["v"].shape, "o": out.shape}
    strides = {n: (h * d, d, s * h * d) for n, (_, s, h, d) in shapes.items()}  # (seq, head, batch), row-major
    pointers = {n: backend.pointer(x) for n, x in (("o", out), ("q", dev["q"]), ("k", dev["k"]), ("v", dev["v"]),
                                                   ("lse", lse))}
    launch = fmha_fwd_v3_launch(pointers, arrays["q"].shape, arrays["k"].shape, strides, case.causal,
                                case.dim_qk ** -0.5)
    stream = backend.stream()

    def run():
        modules.launch(aiter / launch.code_object, launch, stream)
        if dry_run:  # the stand-in of the kernel's work
            lse[...] = library.attention(dev["q"], dev["k"], dev["v"], causal=case.causal, out=out,
                                         return_lse=True)[1]

    def judge():
        backend.clock.synchronize()
        host = (backend.to_host(out), backend.to_host(lse))
        return mi355x_judge.judge(bf16_case, sequences, arrays, host)
    return run, judge


def run_case(case, args, backend, library, rng, aiter, modules):
    record = {"case": case.name, "kernel": case.kernel, "form": case.form, "dtype": case.dtype,
              "dim_qk": case.dim_qk, "dim_v": case.dim_v, "causal": case.causal, "heads": list(case.heads),
              "lengths": [list(p) for p in case.lengths], "descale": case.descale, "page_size": case.page_size,
              "out_dtype": case.out_dtype, "fault": case.fault, "flops": case.flops}
    try:
        arrays, sequences = cases.inputs(case, rng)
        dev = {n: _to_device(backend, library, x) for n, x in arrays.items()}
        call = library_call(case, library, backend, dev)
        results = call()
        backend.clock.synchronize()
        verdicts = mi355x_judge.judge(case, sequences, arrays, host_results(case, library, backend, results))
        record["checks"] = _verdicts_json(verdicts)
        setups = {"flashprefill": lambda _: call}
        aiter_parts = aiter_setup(case, rng, backend, library, modules, aiter, args.dry_run) if aiter else None
        if aiter_parts:
            setups["aiter"] = lambda _: aiter_parts[0]
        runs, unavailable = timing.prepare(setups, [None], backend.clock)
        if aiter_parts:
            record["aiter_checks"] = _verdicts_json(aiter_parts[1]())
        record["timing"] = timing.time_rounds(runs, args.rounds, args.launches, dict.fromkeys(runs, case.flops),
                                              backend.clock, args.idle_s)
        record["unavailable"] = unavailable
    except Exception as e:  # a refusal of the library or the runtime fails this case, not the run
        record["error"] = f"{type(e).__name__}: {e}"
    checks = record.get("checks", []) + record.get("aiter_checks", [])
    record["ok"] = "error" not in record and all(c["ok"] for c in checks)
    record["worst_error_over_bound"] = max((c["error"] / c["bound"] if c["bound"] else (0.0 if c["ok"] else
                                                                                         float("inf"))
                                            for c in record.get("checks", [])), default=None)
    t = record.get("timing", {})
    if "flashprefill" in t and "aiter" in t:
        record["ours_over_aiter"] = t["flashprefill"]["median_ms"] / t["aiter"]["median_ms"]
    return record


# ---------------------------------------------------------------------------------------------------------------
# Reports

def expected_waves(case):
    """SQ_WAVES of one call where the grid follows from the shape alone (equal-length forward, the quantizer)."""
    if case.form == "equal":
        sq = case.lengths[0][0]
        return -(-sq // QUERIES_PER_WORKGROUP) * case.heads[0] * len(case.lengths) * WAVES_PER_WORKGROUP
    if case.form == "quantize":
        seq = case.lengths[0][0]
        return 2 * -(-seq // cases.QUANTIZE_BLOCK) * case.heads[0] * len(case.lengths)  # two phases, one wave each
    if case.form == "quantize_packed":  # the grid of the longest sequence for each
        return 2 * -(-case.longest // cases.QUANTIZE_BLOCK) * case.heads[0] * len(case.lengths)
    if case.form == "quantize_paged":  # a wave per (token, head): the prompt's tokens and a skipped one per sequence,
        return (sum(n + 1 for n, _ in case.lengths) + len(case.lengths)) * case.heads[1]  # then the decode step's
    if case.form.startswith("merge_state"):  # one wave per workgroup of rows of one (batch, head)
        pieces = case.dim_v // MERGE_PIECE_ELEMS
        rows = (MERGE_LANES // pieces if pieces <= MERGE_LANES else 1) * MERGE_PASSES_PER_WORKGROUP
        return -(-case.lengths[0][0] // rows) * case.heads[0] * len(case.lengths)
    if case.form == "varlen_check":
        return 1
    return None


def profiled_cases(chosen):
    """The case rocprofv3 runs for each kernel: its first chosen one (the smallest)."""
    return [next(c for c in chosen if c.kernel == kernel) for kernel in dict.fromkeys(c.kernel for c in chosen)]


def emulated(chosen, rng):
    """{case name: (counters, mnemonics)} of the profiled cases the emulator takes (mi355x_counts.py)."""
    import mi355x_counts
    found = {}
    for case in profiled_cases(chosen):
        try:
            found[case.name] = mi355x_counts.emulator_counts(case, rng)
        except ValueError:
            continue  # not a small equal-length forward case: no prediction
    return found


def rocprof_lines(chosen, predicted=None):
    """The rocprofv3 commands for each kernel (its first chosen case, one round of one launch), and what to compare;
    predicted: {case name: (counters, mnemonics)} from the emulator."""
    checks = " && ".join("rocprofv3-avail pmc-check " + " ".join(counters) for counters in PMC_PASSES)
    lines = ["# Counters this ROCm offers, and whether a pass's counters can be collected together:",
             f"rocprofv3-avail list --pmc; {checks}"]
    for case in profiled_cases(chosen):
        kernel = case.kernel
        run = (f"python tools/mi355x_check.py --only {case.name} --rounds 1 --launches 1 --no-aiter "
               f"--out rocprof/{kernel}")
        trace = f"rocprofv3 --kernel-trace --stats --kernel-include-regex '^{kernel}$' -d rocprof/{kernel} -o trace"
        lines.append(f"# {kernel} ({case.name})")
        lines.append(f"{trace} -- {run}")
        for i, counters in enumerate(PMC_PASSES):
            lines.append(f"rocprofv3 --pmc {' '.join(counters)} --kernel-include-regex '^{kernel}$' "
                         f"-d rocprof/{kernel} -o pmc{i} -- {run}")
        waves = expected_waves(case)
        if waves is not None:
            lines.append(f"#   SQ_WAVES per call should be {waves} (the grid of the launch)")
        if case.name in (predicted or {}):
            counters = predicted[case.name][0]
            lines.append("#   the emulator, per dispatch: " + ", ".join(f"{k} {v}" for k, v in counters.items()))
    two_kernels = next((c for c in chosen if c.form in ("varlen", "paged", "varlen_check")), None)
    if two_kernels is not None:
        forward = cases.VARLEN_CHECK_FORWARD if two_kernels.form == "varlen_check" else two_kernels.kernel
        lines.append(f"# A varlen or paged call is two dispatches, varlen_check then {forward}: the times above are "
                     f"of both; their split ({two_kernels.name}):")
        lines.append(f"rocprofv3 --kernel-trace --stats --kernel-include-regex '^(varlen_check|{forward})$' "
                     f"-d rocprof/varlen_split -o trace -- python tools/mi355x_check.py --only {two_kernels.name} "
                     f"--rounds 1 --launches 1 --no-aiter --out rocprof/varlen_split")
    lines += [
        "# Compare with the emulator (tools/gfx950_emu, RunStats.instructions of the same kernel on a small shape, the",
        "# counts per wave scale with the KV tiles each wave visits): SQ_INSTS_MFMA with the v_mfma* count,",
        "# SQ_INSTS_VALU with the other v_* (MFMAs included where the counter counts them), SQ_INSTS_LDS with ds_*,",
        "# SQ_INSTS_SALU / SQ_INSTS_SMEM with s_* / s_load*, SQ_INSTS_VMEM_RD / _WR with the global and buffer loads",
        "# and stores. SQ_LDS_BANK_CONFLICT should be 0: the emulator's bank model (lds_banks.py) counts no extra",
        "# cycle for any LDS access of the four forward kernels. SQ_BUSY_CYCLES / GRBM_GUI_ACTIVE: the time base."]
    return lines


def _number(value, spec):
    return "" if value is None else format(value, spec)


def _ms(timing_entry):
    if timing_entry is None:
        return ""
    return f"{timing_entry['median_ms']:.4g} ({100 * timing_entry['spread']:.0f}%)"


def markdown(records, backend):
    caveat = (" (numpy stand-ins: the checks test the plumbing, the times are the host's)" if backend == "dry-run"
              else "")
    rows = [f"# MI355X check ({backend}): {sum(r['ok'] for r in records)} of {len(records)} cases pass{caveat}", "",
            "| case | kernel | check | worst error / bound | ours ms (spread) | TFLOP/s | aiter ms (spread) "
            "| ours / aiter |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        t = r.get("timing", {})
        ours, theirs = t.get("flashprefill"), t.get("aiter")
        worst = _number(r["worst_error_over_bound"], ".3g")
        check = "pass" if r["ok"] else ("ERROR " + r["error"][:60] if "error" in r else "FAIL")
        tflops = _number(ours["tflops"], ".1f") if ours and r["flops"] else ""
        rows.append(f"| {r['case']} | {r['kernel']} | {check} | {worst} | {_ms(ours)} | {tflops} | {_ms(theirs)} | "
                    f"{_number(r.get('ours_over_aiter'), '.3g')} |")
    if any(r["form"] in ("varlen", "paged", "varlen_check") for r in records):
        rows += ["", "Times of varlen, paged and varlen_check cases are of the library call: the check kernel "
                 "(varlen_check) and the forward kernel; rocprofv3 splits them (the printed lines)."]
    return "\n".join(rows) + "\n"


def main(argv=None):
    args = parse(argv)
    try:
        chosen = select(cases.all_cases(), args.only, args.max_seqlen)
        backend = device.detect(args.device, args.dry_run)
        if args.dry_run:
            library = StandIns()
        else:
            import flashprefill as library
            library.version("hip")  # loads build/libflashprefill_gfx950.so, or says why not
    except (ValueError, device.Refusal, ImportError, OSError) as e:
        print(f"mi355x_check: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # LibraryNotFoundError and the runtime's own errors
        print(f"mi355x_check: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    aiter, modules = aiter_directory(args.no_aiter), None
    if aiter:
        try:
            modules = device.modules(backend)
        except device.Refusal as e:  # ours still run; only the comparison is lost
            print(f"mi355x_check: aiter left out: {e}", file=sys.stderr)
            aiter = None
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(1 << 31))
    predicted = emulated(chosen, np.random.default_rng(seed)) if args.emulator_counts else {}
    print(f"mi355x_check: {len(chosen)} cases on {backend.name} ({backend.arch}), seed {seed}, aiter "
          f"{aiter or 'not installed' if not args.no_aiter else 'left out'}"
          + ("; DRY RUN: numpy stand-ins, no device" if args.dry_run else ""))
    records = []
    for case in chosen:
        rng = np.random.default_rng([seed, zlib.crc32(case.name.encode())])  # --only NAME --seed S: the same inputs
        record = run_case(case, args, backend, library, rng, aiter, modules)
        if case.name in predicted:
            record["emulator_counts"], record["emulator_instructions"] = predicted[case.name]
        records.append(record)
        ours = record.get("timing", {}).get("flashprefill")
        ratio = record.get("ours_over_aiter")
        print(f"  {'pass' if record['ok'] else 'FAIL'}  {case.name:44s} "
              + ("" if ours is None else f"{ours['median_ms']:.4g} ms")
              + ("" if ratio is None else f"  ours/aiter {ratio:.3g}")
              + (f"  {record['error']}" if "error" in record else ""), flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"commit": git_commit(), "when": datetime.datetime.now(datetime.timezone.utc).isoformat(),
               "backend": backend.name, "arch": backend.arch, "dry_run": args.dry_run, "seed": seed,
               "aiter": str(aiter) if aiter else None, "rounds": args.rounds, "launches": args.launches,
               "passed": sum(r["ok"] for r in records), "cases": records}
    (out / "mi355x_check.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    (out / "mi355x_check.md").write_text(markdown(records, backend.name))
    print(f"wrote {out / 'mi355x_check.json'} and {out / 'mi355x_check.md'}\n")
    print("\n".join(rocprof_lines(chosen, predicted)))
    return 0 if all(r["ok"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
