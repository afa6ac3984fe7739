"""The built kernels' machine code (CPU only): the instructions the design relies on are there, nothing went to
local memory, and ptxas reported neither spills nor serialized wgmma.

Reads build/fwd_launch.cu.o with cuobjdump (PyPI nvidia-cuda-cuobjdump with nvidia-cuda-nvdisasm beside it,
or one on PATH) and the ptxas report the Makefile keeps in build/fwd_launch.ptxas.txt.
"""
import pathlib
import re
import shutil
import subprocess

import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
OBJECT = ROOT / "build" / "fwd_launch.cu.o"
PTXAS_REPORT = ROOT / "build" / "fwd_launch.ptxas.txt"
# The mangled FwdConfig<dtype, dim_qk, dim_v, probabilities, KV tile keys, scores, prepared v> in each kernel's name;
# "fp8-p16": fp8 with float16 probabilities; "fp8-kv192": fp8 with KV tiles of 192 keys; "fp8-f16s": the same with
# float16 scores only (q's codes scaled into their bound where they pass it); "fp8-f16s-kv128": float16 scores at 128
# keys a tile (per-block descales of 128-token blocks, a paged cache's per-page exponents); "prepared-v": the e4m3-code
# kernels again, for v in FLASHPREFILL_V_LAYOUT_PREPARED.
KERNELS = {f"{kind} {shape}{' prepared-v' if prepared else ''}":
           f"flashprefill_dtype{dtype}ELi{dim_qk}ELi128EL26flashprefill_probabilities{p}ELi{keys}E"
           f"L19flashprefill_scores{scores}ELb{prepared}ELb0ELb0E"
           for kind, dtype, p, keys, scores in (("bf16", 1, 0, 128, 2), ("fp8", 2, 0, 128, 2),
                                                ("fp8-p16", 2, 1, 128, 2), ("fp8-kv192", 2, 0, 192, 2),
                                                ("fp8-f16s", 2, 0, 192, 1), ("fp8-f16s-kv128", 2, 0, 128, 1))
           for shape, dim_qk in (("hd128", 128), ("qk192_v128", 192))
           for prepared in ((0, 1) if kind in ("fp8", "fp8-kv192", "fp8-f16s", "fp8-f16s-kv128") else (0,))}
# The wgmma each kernel must use: S = Q K^T, then P.V; e4m3 codes' row sums by P times ones, at 128 keys a wgmma
# of their own (m64n8), at 192 keys within P.V (m64n136: V^T and 8 rows of ones), and not both.
MMA = {"bf16": ["HGMMA.64x128x16.F32.BF16"],
       "fp8": ["QGMMA.64x128x32.F32.E4M3.E4M3", "QGMMA.64x8x32.F32.E4M3.E4M3"],
       "fp8-p16": ["QGMMA.64x128x32.F32.E4M3.E4M3", "HGMMA.64x128x16.F32 "],
       "fp8-kv192": ["QGMMA.64x192x32.F32.E4M3.E4M3", "QGMMA.64x136x32.F32.E4M3.E4M3"],
       "fp8-f16s": ["QGMMA.64x192x32.F16.E4M3.E4M3", "QGMMA.64x136x32.F32.E4M3.E4M3"],
       "fp8-f16s-kv128": ["QGMMA.64x128x32.F16.E4M3.E4M3", "QGMMA.64x128x32.F32.E4M3.E4M3",
                          "QGMMA.64x8x32.F32.E4M3.E4M3"]}
NOT_MMA = {"bf16": [], "fp8": ["QGMMA.64x136x32"], "fp8-p16": ["QGMMA.64x8x32"],
           "fp8-kv192": ["QGMMA.64x8x32", ".F16.E4M3"], "fp8-f16s": ["QGMMA.64x8x32", "QGMMA.64x192x32.F32"],
           "fp8-f16s-kv128": ["QGMMA.64x136x32", "QGMMA.64x192x32"]}

# Each kernel's instruction mix: how many instructions of each opcode class, then all of them. A change to the machine
# code shows here; where it is meant, measure the kernels it touches on the H200 (tools/bench.py), then update them.
MIX_CLASSES = ("QGMMA", "HGMMA", "WARPGROUP", "FFMA", "FMUL", "FADD", "FMNMX", "VIMNMX3", "HFMA2", "HADD2", "HMUL2",
               "VHMNMX", "MUFU", "F2FP", "PRMT", "SHFL", "VOTE", "LDSM", "STSM", "LDS", "STS", "STG", "UTMALDG", "SYNCS",
               "BAR", "total")
MIX = {
    "bf16 hd128": (0, 32, 8, 176, 146, 222, 154, 28, 0, 0, 0, 0, 146,
                  96, 0, 48, 3, 8, 0, 0, 0, 10, 6, 46, 1, 2792),
    "bf16 qk192_v128": (0, 40, 8, 178, 208, 156, 160, 56, 0, 0, 0, 0, 146,
                       96, 0, 52, 4, 12, 0, 0, 0, 10, 8, 40, 1, 2784),
    "fp8 hd128": (24, 0, 8, 178, 238, 16, 160, 56, 0, 0, 0, 0, 22,
                 96, 64, 49, 4, 12, 8, 5, 11, 10, 3, 52, 7, 3112),
    "fp8 hd128 prepared-v": (24, 0, 8, 178, 238, 16, 160, 56, 0, 0, 0, 0, 19,
                            96, 32, 49, 4, 4, 0, 4, 10, 10, 3, 46, 7, 2888),
    "fp8 qk192_v128": (28, 0, 8, 178, 238, 16, 160, 56, 0, 0, 0, 0, 22,
                      96, 64, 49, 4, 14, 8, 5, 11, 10, 7, 52, 7, 3168),
    "fp8 qk192_v128 prepared-v": (28, 0, 8, 178, 238, 16, 160, 56, 0, 0, 0, 0, 19,
                                 96, 32, 49, 4, 6, 0, 4, 10, 10, 7, 46, 7, 2952),
    "fp8-p16 hd128": (8, 16, 8, 178, 234, 162, 160, 56, 0, 0, 0, 0, 152,
                      160, 0, 52, 4, 4, 0, 13, 19, 10, 3, 52, 7, 3352),
    "fp8-p16 qk192_v128": (12, 16, 8, 178, 234, 162, 160, 56, 0, 0, 0, 0, 152,
                          160, 0, 52, 4, 6, 0, 13, 19, 10, 7, 46, 7, 3376),
    "fp8-kv192 hd128": (20, 0, 8, 242, 242, 16, 224, 88, 0, 0, 0, 0, 22,
                       128, 128, 49, 4, 20, 16, 5, 11, 10, 3, 48, 7, 3616),
    "fp8-kv192 hd128 prepared-v": (20, 0, 8, 242, 242, 16, 224, 88, 0, 0, 0, 0, 19,
                                   128, 64, 49, 4, 4, 0, 4, 10, 10, 4, 46, 7, 3344),
    "fp8-kv192 qk192_v128": (24, 0, 8, 242, 242, 16, 224, 88, 0, 0, 0, 0, 22,
                             128, 128, 49, 4, 16, 16, 5, 11, 10, 7, 48, 7, 3720),
    "fp8-kv192 qk192_v128 prepared-v": (24, 0, 8, 242, 242, 16, 224, 88, 0, 0, 0, 0, 19,
                                        128, 64, 49, 4, 0, 0, 4, 10, 10, 8, 46, 7, 3368),
    "fp8-f16s hd128": (20, 0, 8, 54, 274, 28, 12, 1, 192, 292, 128, 52, 22,
                       115, 148, 41, 4, 20, 16, 9, 11, 10, 3, 48, 11, 4392),
    "fp8-f16s hd128 prepared-v": (20, 0, 8, 54, 274, 28, 12, 1, 192, 292, 128, 52, 19,
                                  115, 84, 41, 4, 4, 0, 8, 10, 10, 4, 46, 11, 4032),
    "fp8-f16s qk192_v128": (24, 0, 8, 54, 274, 28, 12, 1, 192, 292, 144, 52, 22,
                            147, 156, 41, 4, 22, 16, 11, 11, 10, 7, 48, 11, 4600),
    "fp8-f16s qk192_v128 prepared-v": (24, 0, 8, 54, 274, 28, 12, 1, 192, 292, 144, 52, 19,
                                       147, 92, 41, 4, 6, 0, 10, 10, 10, 8, 46, 11, 4256),
    "fp8-f16s-kv128 hd128": (24, 0, 8, 54, 270, 28, 12, 1, 128, 196, 96, 36, 22,
                             115, 84, 41, 4, 12, 8, 9, 11, 10, 3, 52, 11, 3728),
    "fp8-f16s-kv128 hd128 prepared-v": (24, 0, 8, 54, 270, 28, 12, 1, 128, 196, 96, 36, 19,
                                        115, 52, 41, 4, 4, 0, 8, 10, 10, 3, 46, 11, 3456),
    "fp8-f16s-kv128 qk192_v128": (28, 0, 8, 54, 270, 28, 12, 1, 128, 196, 112, 36, 22,
                                  147, 92, 41, 4, 14, 8, 11, 11, 10, 7, 52, 11, 3944),
    "fp8-f16s-kv128 qk192_v128 prepared-v": (28, 0, 8, 54, 270, 28, 12, 1, 128, 196, 112, 36, 19,
                                             147, 60, 41, 4, 6, 0, 10, 10, 10, 7, 46, 11, 3672),
}


def _cuobjdump():
    try:
        import nvidia
        for base in nvidia.__path__:
            candidate = pathlib.Path(base) / "cu13" / "bin" / "cuobjdump"
            if candidate.exists():
                return str(candidate)
    except ImportError:
        pass
    return shutil.which("cuobjdump")


@pytest.fixture(scope="module")
def sass():
    if not OBJECT.exists():
        pytest.fail(f"{OBJECT} is missing: run `make` first")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip(markers.NO_CUOBJDUMP)
    text = subprocess.run([tool, "--dump-sass", str(OBJECT)], capture_output=True, text=True, check=True).stdout
    functions = {}
    for chunk in text.split("Function : ")[1:]:
        name, _, body = chunk.partition("\n")
        functions[name.strip()] = body
    return functions


def _kernel(sass, kernel):
    matches = [body for name, body in sass.items() if "fwd_kernel" in name and KERNELS[kernel] in name]
    assert len(matches) == 1, f"expected one {kernel} fwd_kernel, found {len(matches)} in {list(sass)}"
    return matches[0]


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_tensor_core_instructions(sass, dtype):
    body = _kernel(sass, dtype)
    for mma in MMA[dtype.split()[0]]:
        assert mma in body, f"{dtype} kernel lacks {mma}"
    for mma in NOT_MMA[dtype.split()[0]]:
        assert mma not in body, f"{dtype} kernel has {mma}"
    assert "HMMA" not in body.replace("HGMMA", ""), f"{dtype} kernel fell back to HMMA"
    assert "UTMALDG" in body, f"{dtype} kernel loads no tile through TMA"


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_s_reads_q_from_registers_where_it_fits(sass, dtype):
    """S = Q K^T takes Q from registers (FwdConfig::kQInRegisters: S and Q within 112 registers), so that S loads
    only K from shared memory (at dim_qk 192 3% faster in bf16, 2-3% with float16 scores); only e4m3 codes at 192
    keys with float32 scores and dim_qk 192 (S 96 + Q 24) read Q from shared memory."""
    s_mma = MMA[dtype.split()[0]][0]
    operands = set()
    for line in _kernel(sass, dtype).splitlines():
        match = re.search(re.escape(s_mma) + r"\s+R\d+,\s+(\S+?),", line)
        if match:
            operands.add("registers" if match.group(1).startswith("R") else "shared memory")
    expected = {"shared memory"} if dtype.startswith("fp8-kv192 qk192") else {"registers"}
    assert operands == expected, f"{dtype}: {s_mma} reads A from {operands}, expected {expected}"


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_shared_memory_through_shared_instructions(sass, dtype):
    """Shared memory read as LDS/STS: a pointer that lost its address space compiles to generic LD/ST (this
    once made the fp8 V transpose several times slower)."""
    body = _kernel(sass, dtype)
    generic = re.findall(r"\b(LD|ST)\.E\b", body)
    assert not generic, f"{dtype} kernel has {len(generic)} generic LD/ST"


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_no_local_memory(sass, dtype):
    body = _kernel(sass, dtype)
    local = re.findall(r"\b(LDL|STL)\b", body)
    assert not local, f"{dtype} kernel uses local memory ({len(local)} LDL/STL)"


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_o_stored_16_bytes_a_store(sass, dtype):
    """O leaves in 16-byte stores, 8 a thread (2 rows x 128 columns of bf16, after the quad transposes of
    cuda/fwd/o_store.cuh); the only 4-byte global stores are the two of the log-sum-exp. A uint4 store whose registers ptxas
    does not allocate as an aligned quad it splits into four, which would undo the gain."""
    body = _kernel(sass, dtype)
    wide, narrow = re.findall(r"\bSTG\.E\.128\b", body), re.findall(r"\bSTG\.E\b(?!\.)", body)
    assert (len(wide), len(narrow)) == (8, 2), f"{dtype}: {len(wide)} STG.E.128 and {len(narrow)} STG.E"


# The kernels that round a bf16 q against fp8 k and v themselves (varlen, e4m3 P, dim_qk 128): 128-key tiles with
# float32 or float16 scores, 192-key tiles with float16 scores.
BF16_Q_KERNELS = {f"{keys} keys, {name} scores":
                  f"flashprefill_probabilities0ELi{keys}EL19flashprefill_scores{scores}ELb0ELb1ELb1E"
                  for keys, scores, name in ((128, 2, "float32"), (128, 1, "float16"), (192, 1, "float16"))}


@pytest.mark.parametrize("kernel", list(BF16_Q_KERNELS))
def test_bf16_q_rotated_on_the_tensor_cores(sass, kernel):
    """A bf16 q's rotation is two m64n64k16 bf16 wgmma a K step of each half of the dims (cuda/fwd/q_from_bf16.cuh),
    whose accumulators become Q's e4m3 fragments in registers: eight HGMMA.64x64x16, nothing in local memory."""
    matches = [body for name, body in sass.items() if "fwd_kernel" in name and "ELi128ELi128E" in name
               and BF16_Q_KERNELS[kernel] in name]
    assert len(matches) == 1, f"expected one bf16-q fwd_kernel with {kernel}, found {len(matches)}"
    body = matches[0]
    assert body.count("HGMMA.64x64x16.F32.BF16") == 8, f"{kernel}: {body.count('HGMMA.64x64x16.F32.BF16')} HGMMA"
    assert not re.findall(r"\b(LDL|STL)\b", body), f"{kernel}: local memory"


def test_ptxas_report_clean():
    report = PTXAS_REPORT.read_text()
    assert "Compiling entry function" in report, "the ptxas report is empty: was -Xptxas -v dropped?"
    assert "serializ" not in report, report
    assert not re.search(r"[1-9]\d* bytes (spill|stack frame)", report), report


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_no_write_to_the_a_registers_of_a_running_wgmma(sass, dtype):
    """A wgmma with A in registers reads them until the wait that retires it; nothing may write them in between.
    Checked within straight-line code: from each such wgmma to the next full wait (wait_group 0) or branch.
    (An attempt to wait for P.V one iteration later let ptxas put softmax temporaries in P's registers while
    the P.V still read them: NaN on the GPU, caught here too.)"""
    lines = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s+", "", line.split(";")[0]) for line in _kernel(sass, dtype).splitlines()
             if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)]
    races = []
    for i, line in enumerate(lines):
        match = re.match(r"(?:@!?P\d\s+)?[QH]GMMA\.\S+\s+R\d+,\s+R(\d+),", line)
        if not match:
            continue
        a_registers = {f"R{int(match.group(1)) + k}" for k in range(4)}
        for later in lines[i + 1:]:
            if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in later or re.search(r"\bBRA\b", later):
                break
            written = re.match(r"(?:@!?U?P\w+\s+)?(?![QH]GMMA)[A-Z0-9_.]+\s+(R\d+)\b", later)
            if written and written.group(1) in a_registers:
                races.append(f"{line} ... {later}")
    assert not races, f"{dtype}: {len(races)} writes to in-flight A registers, e.g. {races[:2]}"


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_matrix_loads_and_stores_fenced_before_the_arrive(sass, dtype):
    """ldmatrix reads TMA-written tiles (Q's fragments, V for the transposer) and stmatrix writes V^T for the tensor
    cores, both through the generic proxy; the arrive that hands the slot to TMA or to a wgmma (the async proxy)
    must come after a proxy fence (fence.proxy.async: FENCE.VIEW.ASYNC.S). Without it the q_empty arrive overtook
    the Q reads of bf16 at dim_qk 192 and some warps read the next item's Q (bench/NOTES.md, "Q's early release raced").
    Checked in the order of the machine code: between each LDSM or STSM and the next SYNCS.ARRIVE."""
    pending, unfenced = None, []
    for line in _kernel(sass, dtype).splitlines():
        if not re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
            continue
        line = line.split(";")[0].strip()
        if "LDSM" in line or "STSM" in line:
            pending = line
        elif "FENCE.VIEW.ASYNC.S" in line:
            pending = None
        elif "SYNCS.ARRIVE" in line and pending is not None:
            unfenced.append(f"{pending} ... {line}")
            pending = None
    assert not unfenced, f"{dtype}: {len(unfenced)} arrives after ldmatrix / stmatrix without a proxy fence, e.g. {unfenced[:2]}"


def _windows(sass, dtype, markers):
    """For each wait_group 1 ... wait_group 0 window of the kernel (the softmax of S(n) beside P(n-1) V(n-1)), how
    many of its instructions contain each marker."""
    windows, inside = [], None
    for line in _kernel(sass, dtype).splitlines():
        if not re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
            continue
        line = line.split(";")[0]
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in line:
            inside = [0] * len(markers)
        elif "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line and inside is not None:
            windows.append(inside)
            inside = None
        elif inside is not None:
            for i, marker in enumerate(markers):
                inside[i] += marker in line
    return windows


# The softmax's signature instructions and how many of them one 64-row tile needs per thread (a window must show
# one of its kernel's): fp8 converts 64 code words in pairs (F2FP ... RELU), bf16 and float16 P exponentiate 64
# scores (MUFU.EX2); fp8 at 192 keys prepares 96 code values (FFMA; their conversion waits for P's registers), with
# float16 scores 48 pairs (HFMA2.RELU; 32 at 128 keys). bf16 at dim_qk 128 (FwdConfig::kLazyMax) takes its
# exponentials after the wait; between the waits it measures 64 scores from the row's reference (FFMA) and takes
# their max (FMNMX, at least one per score).
SOFTMAX = {"fp8": [("F2FP.RELU.F16.F32.PACK_AB", 32)], "bf16": [("MUFU.EX2", 64)], "fp8-p16": [("MUFU.EX2", 64)],
           "fp8-kv192": [("FFMA ", 96)], "fp8-f16s": [("HFMA2.RELU", 48)], "fp8-f16s-kv128": [("HFMA2.RELU", 32)],
           "bf16 hd128": [("FFMA ", 64), ("FMNMX ", 64)]}


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_softmax_overlaps_the_running_pv(sass, dtype):
    """In the loop, the softmax of S(n) runs between the wait for S(n) (wait_group 1: P(n-1) V(n-1) still in
    flight) and the wait for P(n-1) V(n-1) (wait_group 0), in every such window of the kernel. ptxas has moved
    that wait above the softmax before (bench/NOTES.md v11) and the softmax below it (a loop unrolled by two):
    either way the two no longer overlap, with correct results, so only the machine code shows it."""
    markers = SOFTMAX.get(dtype, SOFTMAX[dtype.split()[0]])
    windows = _windows(sass, dtype, [marker for marker, _ in markers])
    assert windows, f"{dtype}: no wait_group 1 ... wait_group 0 window"
    all_of = dtype in SOFTMAX  # a kernel's own list needs all of its markers, a kind's any one
    short = [w for w in windows if not (all if all_of else any)(n >= per_tile for n, (_, per_tile) in zip(w, markers))]
    assert not short, f"{dtype}: softmax instructions {markers} between the waits: {windows}"


# Scores per thread and tile of the kernels whose row max over float32 scores is OnlineMax::update's (all but bf16
# at dim_qk 128, whose lazy max measures x against a reference, mostly below 0, and the float16-score kernels, whose
# max is packed float16 maxima).
ROW_MAX_SCORES = {k: 96 if k.split()[0] == "fp8-kv192" else 64 for k in KERNELS
                  if k != "bf16 hd128" and not k.startswith("fp8-f16s")}


@pytest.mark.parametrize("dtype", list(ROW_MAX_SCORES))
def test_row_max_takes_two_scores_an_instruction(sass, dtype):
    """The row max over float32 scores runs on their bits as integers, which ptxas merges into three-input VIMNMX3
    (cuda/fwd/softmax.cuh, thread_max_of_bits): two scores an instruction, where FMNMX takes one. It measured 3% of fp8's
    time (bench/NOTES.md). Each softmax window needs half its scores' worth, less the eight chains' ends."""
    scores = ROW_MAX_SCORES[dtype]
    windows = [n for n, in _windows(sass, dtype, ["VIMNMX3 "])]
    assert max(windows, default=0) >= scores // 2 - 8, f"{dtype}: VIMNMX3 per window {windows}, {scores} scores"


@pytest.mark.parametrize("dtype", [k for k in KERNELS if k.split()[0] == "fp8-f16s"])
def test_float16_row_max_takes_four_scores_an_instruction(sass, dtype):
    """With float16 scores the row max is packed: ptxas merges the max.f16x2 chains into three-input VHMNMX (two
    pairs an instruction), about 24 for a tile's 96 scores where FMNMX would take 96 (bench/NOTES.md, session 8)."""
    windows = [n for n, in _windows(sass, dtype, ["VHMNMX"])]
    assert windows and min(windows) >= 96 // 4, f"{dtype}: VHMNMX per window {windows}"


@pytest.mark.parametrize("dtype", [k for k in KERNELS
                                   if k.split()[0] in ("fp8-kv192", "fp8-f16s") and not k.endswith("prepared-v")])
def test_transposer_loads_ahead(sass, dtype):
    """At 192 keys the V transposer issues its matrix loads (LDSM.16.MT88.4) two at a time, before the permutes and
    stores of either (cuda/fwd/transpose_v.cuh, kLoadsAhead): one at a time, each permute waited out its own load, and the
    consumers waited for V^T (bench/NOTES.md v14). Of the 16 loads per tile, at least 8 are followed by another
    load before any permute or store."""
    ops = [op for line in _kernel(sass, dtype).splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)
           for op in ("LDSM.16.MT88.4", "PRMT", "STSM") if op in line.split(";")[0]]
    loads = ops.count("LDSM.16.MT88.4")
    ahead = sum(1 for a, b in zip(ops, ops[1:]) if a == b == "LDSM.16.MT88.4")
    assert loads >= 16 and ahead >= loads // 2, f"{dtype}: {ahead} of {loads} matrix loads issued ahead"


@pytest.mark.parametrize("dtype", [k for k in KERNELS if k.endswith("prepared-v")])
def test_prepared_v_is_not_transposed(sass, dtype):
    """With a prepared v, TMA loads V^T itself (cuda/fwd/producer.cuh): no warp transposes (no matrix load or
    store), and the kernel without it does."""
    body = _kernel(sass, dtype)
    for op in ("LDSM.16.MT88.4", "STSM"):
        assert op not in body, f"{dtype} still transposes V ({op})"
    assert "LDSM.16.MT88.4" in _kernel(sass, dtype.removesuffix(" prepared-v")), "the transposing kernel lost its LDSM"


def _opcodes(body):
    """The opcode of each instruction (predicate and modifiers stripped)."""
    return [m.group(1) for line in body.splitlines()
            if (m := re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line))]


def test_instruction_mix_covers_every_kernel():
    assert set(MIX) == set(KERNELS) and all(len(v) == len(MIX_CLASSES) for v in MIX.values())


@pytest.mark.parametrize("dtype", list(KERNELS))
def test_instruction_mix_is_pinned(sass, dtype):
    """The kernel's instruction counts per opcode class (tensor core, FMA, MUFU, conversions, matrix and shared
    loads and stores, barriers) and in all are the pinned ones: a refactoring that keeps the machine code passes, any
    change to it fails here, with the classes that moved."""
    ops = _opcodes(_kernel(sass, dtype))
    counts = {c: ops.count(c) for c in MIX_CLASSES[:-1]} | {"total": len(ops)}
    moved = {c: (want, counts[c]) for c, want in zip(MIX_CLASSES, MIX[dtype]) if counts[c] != want}
    assert not moved, f"{dtype}: instruction mix changed, class: (pinned, built) {moved}"
