"""Check the decoder against llvm-objdump-22: every instruction of every given code object must decode
to the Instruction objdump's text of it parses to (mnemonic, text, operands, modifiers, size), and every
branch must reach the address objdump names.

    python -m tools.gfx950_emu.decode_check              # ours (build/gfx950) + the AMD kernels we run
    python -m tools.gfx950_emu.decode_check --all        # + every gfx950 object of the amd-aiter wheel
    python -m tools.gfx950_emu.decode_check --sample 40  # + a seeded sample of them
"""
import argparse
import glob
import importlib.util
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from .decode import branch_target_addr, decode_section
from .disasm import parse_instruction, run_objdump
from .elf import Elf
from .errors import EmulatorError
from .instruction import is_branch

# The AMD code objects the emulator runs (tests/test_gfx950_*): always checked when the wheel is there.
AMD_RUN = ("fmha_v3_fwd/fwd_hd128_bf16_causal.co", "fmha_v3_fwd/fwd_hd192_hd128_bf16_causal.co",
           "f8_block_scale_mi350_x*.co", "mla/mla_a8w8_qh16_qseqlen4_gqaratio16.co")
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def amd_dir():
    """The amd-aiter wheel's gfx950 code objects, or None when the wheel is not installed."""
    spec = importlib.util.find_spec("aiter_meta")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "hsa", "gfx950")
    return path if os.path.isdir(path) else None


def our_objects():
    return sorted(glob.glob(os.path.join(_REPO, "build", "gfx950", "*.co")))


def amd_objects(which="run"):
    """AMD's objects: 'run' (the ones the emulator runs) or 'all'."""
    root = amd_dir()
    if root is None:
        return []
    if which == "all":
        return sorted(glob.glob(os.path.join(root, "**", "*.co"), recursive=True))
    return sorted(p for pattern in AMD_RUN for p in glob.glob(os.path.join(root, pattern)))


def _oracle(path, symbols):
    """{addr: (Instruction or the parse error text, branch target address or None)} from objdump."""
    out = {}
    for line in run_objdump(path).splitlines():
        try:
            ins = parse_instruction(line)
        except EmulatorError as e:
            out[int(line.split("//")[1].split(":")[0], 16)] = (str(e), None)
            continue
        if ins is None:
            continue
        target = None
        if is_branch(ins.mnemonic):
            label = ins.raw.split()[0]
            target = symbols[label][0] if label in symbols else branch_target_addr(ins)
        out[ins.addr] = (ins, target)
    return out


def _fields(ins):
    """What must agree; a branch's operand is its target (objdump names it by a label when it can)."""
    if is_branch(ins.mnemonic):
        return ins.size, ins.mnemonic
    return ins.size, ins.mnemonic, ins.text, ins.ops, ins.mods, ins.raw


def check_object(path):
    """(instructions checked, [mismatch descriptions]) for one code object."""
    with open(path, "rb") as f:
        elf = Elf(f.read())
    expected = _oracle(path, elf.symbols)
    mismatches, count = [], 0
    for addr, data in elf.executable_sections():
        try:
            decoded = decode_section(addr, data)
        except EmulatorError as e:
            return count, [f"{path}: {e}"]
        for ins in decoded:
            count += 1
            want, target = expected.pop(ins.addr, (None, None))
            if want is None:
                mismatches.append(f"{path} 0x{ins.addr:x}: decoded '{ins.text}', objdump has none there")
            elif isinstance(want, str):
                mismatches.append(f"{path} 0x{ins.addr:x}: decoded '{ins.text}', objdump's text: {want}")
            elif _fields(ins) != _fields(want):
                mismatches.append(f"{path} 0x{ins.addr:x}: decoded '{ins.text}' ({ins.size} B), "
                                  f"objdump '{want.text}' ({want.size} B)")
            elif target is not None and branch_target_addr(ins) != target:
                mismatches.append(f"{path} 0x{ins.addr:x}: '{ins.text}' jumps to "
                                  f"0x{branch_target_addr(ins):x}, objdump 0x{target:x}")
    mismatches += [f"{path} 0x{a:x}: objdump has '{w if isinstance(w, str) else w.text}', not decoded"
                   for a, (w, _) in expected.items()]
    return count, mismatches


def check_objects(paths, jobs=1):
    """(objects, instructions, [mismatches]) over `paths`."""
    with ProcessPoolExecutor(jobs) if jobs > 1 else _Serial() as pool:
        results = list(pool.map(check_object, paths))
    return len(paths), sum(n for n, _ in results), [m for _, ms in results for m in ms]


class _Serial:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @staticmethod
    def map(fn, items):
        return map(fn, items)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every gfx950 object of the amd-aiter wheel")
    parser.add_argument("--sample", type=int, default=0, help="a seeded sample of that many more")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("paths", nargs="*", help="check these objects instead")
    args = parser.parse_args(argv)
    paths = args.paths or our_objects() + amd_objects("run")
    if args.all:
        paths = sorted(set(paths) | set(amd_objects("all")))
    elif args.sample:
        rest = sorted(set(amd_objects("all")) - set(paths))
        paths += random.Random(args.seed).sample(rest, min(args.sample, len(rest)))
    start = time.time()
    objects, count, mismatches = check_objects(paths, args.jobs)
    for m in mismatches[:50]:
        print(m)
    print(f"{objects} code objects, {count} instructions, {len(mismatches)} mismatches "
          f"({time.time() - start:.0f} s)")
    return 1 if mismatches or not count else 0


if __name__ == "__main__":
    sys.exit(main())
