"""Mutation score of the gfx950 kernels' synchronization: how many single-instruction weakenings of it our checks
notice. For each kernel, every s_waitcnt, s_nop, s_barrier and s_setprio of the macro-expanded assembly (llvm-mc's
output, which reassembles to the same code object) is removed, one instance at a time, and every run of s_nop is
shortened by one wait state; each mutant is rebuilt in a temporary directory and checked, cheapest first, by the
hazard lint (tools/gfx950_lint.py), the static checks of tests/test_gfx950_static.py that take a kernel name, and
small emulated runs (the test functions of tests/test_gfx950_kernel_emulated.py, test_gfx950_varlen_emulated.py,
test_gfx950_paged_emulated.py, test_gfx950_bf16q_emulated.py, test_gfx950_quantize_emulated.py,
test_gfx950_quantize_packed_emulated.py, test_gfx950_quantize_paged_emulated.py, test_gfx950_merge_state_emulated.py
and test_gfx950_varlen_check_emulated.py, once per seed of --seeds, the emulator in whatever mode is its default).
A mutant is killed by the first check that fails; the survivors are printed with the source line they expand from
(file:line) and the score killed / total.

Usage: PYTHONPATH=python .venv/bin/python tools/gfx950_mutate.py [kernel ...] [-j N] [--seeds 1,2] [--limit N]
(kernels default to every asm/gfx950/*.s; -j runs mutants in parallel processes, -j1 while others share the machine.)
"""
import argparse
import contextlib
import dataclasses
import importlib
import inspect
import multiprocessing
import pathlib
import re
import signal
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
ASM = ROOT / "asm" / "gfx950"
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests"), str(ROOT / "python")]
import gfx950_lint  # noqa: E402

SITE = re.compile(r"^\s*(s_waitcnt|s_nop|s_barrier|s_setprio)\b(.*)$")
MARK = "__mutation_site_"
GFX950 = ["-target", "amdgcn-amd-amdhsa", "-mcpu=gfx950", "-mcode-object-version=5"]
EMULATED_SECONDS = 600  # a mutant that hangs the emulator (a lost barrier, say) counts as killed past this

# The emulated checks per kernel: (test module, test function, arguments); small problems that still cross tiles,
# mask keys on the causal diagonal and (fp8) load per-block exponents.
EMULATED = {
    "fwd_bf16_hd128": [("test_gfx950_kernel_emulated", "test_fwd_bf16",
                        dict(shape=(1, 70, 70, 1, 1), causal=True, dim_qk=128))],
    "fwd_bf16_qk192": [("test_gfx950_kernel_emulated", "test_fwd_bf16",
                        dict(shape=(1, 70, 70, 1, 1), causal=True, dim_qk=192))],
}
for _dim in (128, 192):
    EMULATED[f"fwd_fp8_{'hd128' if _dim == 128 else 'qk192'}"] = [
        ("test_gfx950_kernel_emulated", "test_fwd_fp8_block_scales",
         dict(shape=(1, 100, 100, 1, 1), block_tokens=64, causal=True, dim_qk=_dim)),
        ("test_gfx950_kernel_emulated", "test_fwd_fp8",  # the descales' loads
         dict(shape=(1, 70, 70, 1, 1), causal=True, per_head=True, dim_qk=_dim))]
for _dim, _family in ((128, "bf16_hd128"), (192, "bf16_qk192")):  # varlen: the sequence's rows and lengths
    EMULATED[f"fwd_{_family}"].append(("test_gfx950_varlen_emulated", "test_varlen_bf16",
                                       dict(causal=True, seqused=True, dim_qk=_dim)))
for _dim, _family in ((128, "fp8_hd128"), (192, "fp8_qk192")):
    EMULATED[f"fwd_{_family}"].append(("test_gfx950_varlen_emulated", "test_varlen_fp8",
                                       dict(causal=True, seqused=True, descale="per_block", dim_qk=_dim)))
for _name in ("fwd_bf16_hd128", "fwd_bf16_qk192", "fwd_fp8_hd128", "fwd_fp8_qk192"):  # paged: each row's page, and
    _descale = "per_block" if "fp8" in _name else None                                 # fp8's exponents by page
    EMULATED[_name].append(("test_gfx950_paged_emulated", "test_paged",
                            dict(name=_name, page_size=64, causal=True, descale=_descale)))
EMULATED["fwd_fp8_hd128"].append(("test_gfx950_bf16q_emulated", "test_bf16_q_varlen", dict(rotate=True)))  # bf16 q
for _dim in (32, 64, 96, 128, 160, 192, 224, 256):
    EMULATED[f"quantize_d{_dim}"] = [("test_gfx950_quantize_emulated", "test_bit_identical_to_the_model",
                                      dict(dim=_dim, dtype=dtype, mode="rotate_smooth"))
                                     for dtype in ("float32", "bfloat16")]
    EMULATED[f"quantize_d{_dim}"].append(("test_gfx950_quantize_packed_emulated", "test_bit_identical_to_the_model",
                                          dict(dim=_dim, dtype="bfloat16", mode="rotate_smooth", block_tokens=16)))
    EMULATED[f"quantize_paged_d{_dim}"] = [("test_gfx950_quantize_paged_emulated", "test_prompt_then_decode_steps",
                                            dict(dim=_dim, page_size=16, dtype=dtype, rotate=True))
                                           for dtype in ("float32", "bfloat16")]
for _pair in ("bf16_bf16", "bf16_f32", "f32_bf16", "f32_f32"):  # rows of a pass, pieces of a row, in place
    _dtypes = tuple({"bf16": "bfloat16", "f32": "float32"}[x] for x in _pair.split("_"))
    EMULATED[f"merge_state_{_pair}"] = [
        ("test_gfx950_merge_state_emulated", "test_matches_the_reference",
         dict(shape=(2, 37, 2, 128), dtypes=_dtypes, padded=True, stub=None)),
        ("test_gfx950_merge_state_emulated", "test_matches_the_reference",
         dict(shape=(1, 3, 2, 520), dtypes=_dtypes, padded=False, stub=None))]
EMULATED["varlen_check"] = [("test_gfx950_varlen_check_emulated", "test_steps_of_the_wave", {})]

# Survivors no functional check can kill, by mnemonic, with the reason. (A redundant wait kept on purpose says so
# in its source line's comment, starting "kept:"; the survivor list shows it.)
PERFORMANCE_ONLY = {"s_setprio": "a scheduling hint (the ping-pong's issue priority between the waves of a SIMD): "
                                 "results do not depend on it"}


@dataclasses.dataclass(frozen=True)
class Mutant:
    kernel: str
    line: int           # index into the expanded assembly's lines
    where: str          # the source file:line it expands from
    instance: str       # which of that line's expansions in the kernel, "k/n"
    instruction: str
    change: str         # "remove", or "shorten" (s_nop N -> N - 1)

    def describe(self):
        verb = "without" if self.change == "remove" else "shortened by one wait state:"
        return f"{self.where} ({self.instance}) {verb} `{self.instruction}` ({self.kernel})"

    def source_comment(self):
        path, number = self.where.rsplit(":", 1)
        text = (ROOT / path).read_text().splitlines()[int(number) - 1]
        return text.split("//", 1)[1].strip() if "//" in text else ""


def _annotated_copy(directory):
    """asm/gfx950 copied to `directory`, each site's source line preceded by `.set __mutation_site_<file>_<line>`:
    assignments llvm-mc prints where the expansion puts them, naming the line each site comes from."""
    names = sorted(p.name for p in ASM.iterdir() if p.suffix in (".s", ".inc"))
    for index, name in enumerate(names):
        out = []
        for number, text in enumerate((ASM / name).read_text().splitlines(), 1):
            if SITE.match(text):
                out.append(f".set {MARK}{index}_{number}, 0")
            out.append(text)
        (directory / name).write_text("\n".join(out) + "\n")
    return names


def expand(kernel, directory):
    """(expanded assembly lines without the marks, [(line index, source file:line)] of every site)."""
    names = _annotated_copy(directory)
    text = subprocess.run(["llvm-mc-22", "-triple", "amdgcn-amd-amdhsa", "-mcpu=gfx950", "-I", str(directory),
                           str(directory / f"{kernel}.s")], capture_output=True, text=True, check=True).stdout
    lines, sites, where = [], [], None
    for text_line in text.splitlines():
        mark = re.match(rf"^\s*(?:\.set\s+)?{MARK}(\d+)_(\d+)\b", text_line)
        if mark:
            where = f"asm/gfx950/{names[int(mark.group(1))]}:{mark.group(2)}"
            continue
        if re.match(rf"^\s*\.no_dead_strip\s+{MARK}", text_line):
            continue
        if SITE.match(text_line):
            sites.append((len(lines), where))
            where = None
        lines.append(text_line)
    return lines, sites


def mutants(kernel, lines, sites):
    out, count, seen = [], {}, {}
    for _, where in sites:
        count[where] = count.get(where, 0) + 1
    for index, where in sites:
        seen[where] = seen.get(where, 0) + 1
        instance, instruction = f"{seen[where]}/{count[where]}", lines[index].strip()
        out.append(Mutant(kernel, index, where, instance, instruction, "remove"))
        m = re.match(r"s_nop\s+(\d+)", instruction)
        if m and int(m.group(1)) > 0 and not (index + 1 < len(lines) and lines[index + 1].strip().startswith("s_nop")):
            out.append(Mutant(kernel, index, where, instance, instruction, "shorten"))  # the last s_nop of its run
    return out


def build(lines, kernel, directory):
    """The code object of `lines` (expanded assembly), or None when it does not assemble."""
    source, obj, co = directory / f"{kernel}.s", directory / f"{kernel}.o", directory / f"{kernel}.co"
    source.write_text("\n".join(lines) + "\n")
    made = subprocess.run(["clang-22", *GFX950, "-c", str(source), "-o", str(obj)], capture_output=True)
    if made.returncode == 0:
        made = subprocess.run(["ld.lld-22", "-shared", str(obj), "-o", str(co)], capture_output=True)
    return co if made.returncode == 0 else None


def _mutated(lines, mutant):
    out = list(lines)
    if mutant.change == "remove":
        out[mutant.line] = ""
    else:
        n = int(re.match(r"\s*s_nop\s+(\d+)", out[mutant.line]).group(1))
        out[mutant.line] = f"\ts_nop {n - 1}"
    return out


def _static_checks(kernel):
    """The tests of test_gfx950_static.py that take only a kernel name and are parametrized over this one."""
    module = importlib.import_module("test_gfx950_static")
    checks = []
    for name, fn in vars(module).items():
        if not name.startswith("test_") or name == "test_no_hazards":
            continue
        if list(inspect.signature(fn).parameters) != ["name"]:
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize" and m.args[0] == "name"]
        if marks and kernel in marks[0].args[1]:
            checks.append((name, fn))
    return module, checks


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds):
    def expire(*_):
        raise _Timeout()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _patched(module, **values):
    """The module's globals set to `values` for the block, restored after (a test session may share the module)."""
    saved = {name: getattr(module, name) for name in values}
    vars(module).update(values)
    try:
        yield module
    finally:
        vars(module).update(saved)


def check(kernel, code_object, seeds):
    """The first check the code object fails ("lint", "static <test>", "emulated <test> seed <s>"), or None."""
    if gfx950_lint.lint(gfx950_lint.disassemble(str(code_object))):
        return "lint"
    static, checks = _static_checks(kernel)
    with _patched(static, code_object=lambda name: code_object):
        for name, fn in checks:
            try:
                fn(kernel)
            except Exception:
                return f"static {name}"
    import numpy as np
    with tempfile.TemporaryDirectory() as root:  # a tree whose build/gfx950 holds the mutant
        root = pathlib.Path(root)
        (root / "asm").symlink_to(ROOT / "asm")
        (root / "build" / "gfx950").mkdir(parents=True)
        (root / "build" / "gfx950" / f"{kernel}.co").symlink_to(code_object)
        for module_name, function, arguments in EMULATED[kernel]:
            if "stub" in arguments:  # the tests that launch through the library want the stand-in HIP runtime
                import hip_stub
                arguments = {**arguments, "stub": hip_stub.build(root)}
            module = importlib.import_module(module_name)
            for seed in seeds:
                try:
                    with _patched(module, ROOT=root, RNG=np.random.default_rng(seed)), _deadline(EMULATED_SECONDS):
                        getattr(module, function)(**arguments)
                except (Exception, _Timeout) as e:
                    return f"emulated {function} seed {seed}: {type(e).__name__}"
    return None


def _run_one(job):
    lines, mutant, seeds = job
    with tempfile.TemporaryDirectory() as directory:
        co = build(_mutated(lines, mutant), mutant.kernel, pathlib.Path(directory))
        return mutant, ("build" if co is None else check(mutant.kernel, co, seeds))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="*", default=sorted(p.stem for p in ASM.glob("*.s")))
    parser.add_argument("-j", type=int, default=1, help="mutants checked in parallel (1 on a shared machine)")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds, one emulated run of each check per seed")
    parser.add_argument("--limit", type=int, default=0, help="only the first N mutants of each kernel")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = []
    for kernel in args.kernels:
        with tempfile.TemporaryDirectory() as directory:
            directory = pathlib.Path(directory)
            lines, sites = expand(kernel, directory)
            co = build(lines, kernel, directory)
            assert co and co.read_bytes() == (ROOT / "build" / "gfx950" / f"{kernel}.co").read_bytes(), \
                f"{kernel}: the expanded assembly does not rebuild build/gfx950/{kernel}.co (run `make amd`)"
            failed = check(kernel, co, seeds)
            assert failed is None, f"{kernel}: the unmutated kernel fails a check: {failed}"
        found = mutants(kernel, lines, sites)
        jobs += [(lines, m, seeds) for m in (found[:args.limit] if args.limit else found)]
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(multiprocessing.Pool(args.j)) if args.j > 1 else None
        results = []
        for mutant, killer in (pool.imap(_run_one, jobs) if pool else map(_run_one, jobs)):
            print(f"{'killed by ' + killer if killer else 'SURVIVES':<60} {mutant.describe()}", flush=True)
            results.append((mutant, killer))
    survivors = [m for m, killer in results if killer is None]
    print()
    for m in survivors:
        reason = PERFORMANCE_ONLY.get(m.instruction.split()[0])
        comment = m.source_comment()
        print(f"survivor: {m.describe()}" + (f" -- performance-only: {reason}" if reason else "")
              + (f" -- source says: {comment}" if comment else ""))
    performance_only = sum(1 for m in survivors if m.instruction.split()[0] in PERFORMANCE_ONLY)
    kept = sum(1 for m in survivors if m.source_comment().startswith("kept:"))
    print(f"score: {len(results) - len(survivors)} / {len(results)} killed; survivors: {performance_only} "
          f"performance-only, {kept} kept with the reason in the source, "
          f"{len(survivors) - performance_only - kept} others")


if __name__ == "__main__":
    main()
