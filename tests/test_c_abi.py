"""The C ABI from C and C++: the header compiles on its own in both (C11 and C++17, warnings as errors); the
README's C example links against build/libflashprefill.so and runs (here, without a GPU, it gets a status and a
message instead of a crash); a program built against 0.7.1's header, whose structs carry no size, gets a clear
INVALID_ARGUMENT from both libraries, never a crash, even with an unmapped page right after its struct;
flashprefill_query answers from C and refuses structs of another size; and the libraries carry a SONAME of the ABI's
major version and export only flashprefill_*."""
import pathlib
import re
import shutil
import subprocess

import pytest

import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = ROOT / "include" / "flashprefill.h"
BUILD = ROOT / "build"
LIBRARIES = {"cuda": ("flashprefill", "`make`"), "hip": ("flashprefill_gfx950", "`make amd`")}

EXAMPLE = r"""
#include <stdio.h>
#include "flashprefill.h"

int main(void)
{
    /* fake but aligned device pointers: validation never dereferences them */
    void *q = (void *)0x7f0000000000, *k = (void *)0x7f1000000000, *v = (void *)0x7f2000000000;
    void *out = (void *)0x7f3000000000, *stream = NULL;
    flashprefill_params p = flashprefill_params_init();
    p.q = q; p.k = k; p.v = v; p.out = out;
    p.batch = 1; p.seqlen_q = p.seqlen_k = 16384; p.heads_q = 32; p.heads_kv = 8; p.dim_qk = p.dim_v = 128;
    p.q_stride_batch = 16384LL * 32 * 128; p.q_stride_seq = 32 * 128; p.q_stride_head = 128; p.q_stride_dim = 1;
    p.k_stride_batch = 16384LL * 8 * 128; p.k_stride_seq = 8 * 128; p.k_stride_head = 128; p.k_stride_dim = 1;
    p.v_stride_batch = 16384LL * 8 * 128; p.v_stride_seq = 8 * 128; p.v_stride_head = 128; p.v_stride_dim = 1;
    p.out_stride_batch = p.q_stride_batch; p.out_stride_seq = p.q_stride_seq; p.out_stride_head = 128;
    p.out_stride_dim = 1;
    p.in_dtype = FLASHPREFILL_DTYPE_BF16; p.out_dtype = FLASHPREFILL_DTYPE_BF16;
    p.causal = 1; p.softmax_scale = 0.08838834764831845f;
    printf("version %s\n", flashprefill_version());
    printf("supports %d\n", (int)flashprefill_supports(&p));
    flashprefill_status s = flashprefill_forward(&p, stream);
    printf("forward %d %s: %s\n", (int)s, flashprefill_status_string(s), flashprefill_last_error());
    return 0;
}
"""

# A program built against 0.7.1's header: the same calls, structs without struct_bytes (enums as int32_t, their
# size on every target). Each struct ends right where an inaccessible page begins, so a library that reads past
# it crashes the program; the struct's other bytes are 0x41 ('A'), as stack garbage would be.
OLD_LAYOUT = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "flashprefill.h"

typedef struct { int32_t kind, block_tokens; const float *factors; const int8_t *exponents; } descale_0_7;
typedef struct {
    const void *q, *k, *v; void *out; float *lse;
    int64_t q_strides[4], k_strides[4], v_strides[4], out_strides[4];
    int32_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim_qk, dim_v, in_dtype, out_dtype, causal;
    float softmax_scale;
    descale_0_7 q_descale, k_descale, v_descale;
    int32_t probabilities, scores, v_layout;
} params_0_7;
typedef struct {
    const void *x; void *codes; int8_t *exponents; const float *signs, *subtract;
    int64_t x_strides[4], codes_strides[4];
    int32_t batch, seqlen, heads, dim, block_tokens, x_dtype; float code_max; int32_t codes_layout;
} quantize_params_0_7;
typedef struct {
    const void *v; void *prepared; int64_t v_strides[4], prepared_strides[3]; int32_t batch, seqlen, heads, dim;
} prepare_v_params_0_7;

/* A struct's bytes as the last ones before an inaccessible page. */
static void *before_guard_page(size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED || mprotect(pages + page, page, PROT_NONE) != 0) {
        perror("mmap");
        _exit(2);
    }
    memset(pages + page - bytes, 0x41, bytes);
    return pages + page - bytes;
}

static void report(const char *call, flashprefill_status s)
{
    printf("%s %d %s\n", call, (int)s, flashprefill_last_error());
}

int main(void)
{
    printf("sizes %zu %zu %zu\n", sizeof(params_0_7), sizeof(quantize_params_0_7), sizeof(prepare_v_params_0_7));
    params_0_7 *p = before_guard_page(sizeof *p);
    p->q = (void *)0x7f0000001230; p->k = (void *)0x7f1000000000; p->v = (void *)0x7f2000000000;
    p->out = (void *)0x7f3000000000; p->lse = NULL;
    p->batch = 1; p->seqlen_q = p->seqlen_k = 256; p->heads_q = p->heads_kv = 1; p->dim_qk = p->dim_v = 128;
    p->in_dtype = p->out_dtype = FLASHPREFILL_DTYPE_BF16; p->causal = 1; p->softmax_scale = 0.125f;
    report("supports", flashprefill_supports((const flashprefill_params *)p));
    report("forward", flashprefill_forward((const flashprefill_params *)p, NULL));
    p->q = (void *)0x7f0000000000; /* the low half of q is what the library reads as struct_bytes */
    report("supports", flashprefill_supports((const flashprefill_params *)p));

    quantize_params_0_7 *qp = before_guard_page(sizeof *qp);
    qp->x = (void *)0x7f0000000100; qp->codes = (void *)0x7f1000000000; qp->exponents = (int8_t *)0x7f2000000000;
    report("quantize", flashprefill_quantize((const flashprefill_quantize_params *)qp, NULL));

    prepare_v_params_0_7 *vp = before_guard_page(sizeof *vp);
    vp->v = (void *)0x7f0000000200; vp->prepared = (void *)0x7f1000000000;
    report("prepare_v", flashprefill_prepare_v((const flashprefill_prepare_v_params *)vp, NULL));

    /* A header newer than the library: a struct larger than the library's, its first field right. */
    flashprefill_params *larger = before_guard_page(sizeof *larger + 16);
    *larger = flashprefill_params_init();
    larger->struct_bytes = (uint32_t)sizeof *larger + 16;
    report("larger", flashprefill_supports(larger));
    return 0;
}
"""


def _compiler(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip({"cc": markers.NO_CC, "c++": markers.NO_CXX}[name])
    return path


def _library(backend):
    name, build = LIBRARIES[backend]
    path = BUILD / f"lib{name}.so"
    if not path.exists():
        pytest.fail(f"{path} is missing: run {build}")
    return name


def header_version():
    """"MAJOR.MINOR.PATCH" from the FLASHPREFILL_VERSION_* macros of the header."""
    text = HEADER.read_text()
    return ".".join(re.search(rf"^#define FLASHPREFILL_VERSION_{part} (\d+)$", text, re.M).group(1)
                    for part in ("MAJOR", "MINOR", "PATCH"))


def _build_and_run(tmp_path, source, backend, extra_flags=()):
    """Compiles `source` against the header, links it to the backend's library, runs it: (stdout lines, binary)."""
    name = _library(backend)
    (tmp_path / "program.c").write_text(source)
    binary = tmp_path / "program"
    subprocess.run([_compiler("cc"), "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", *extra_flags,
                    "-I", str(HEADER.parent), str(tmp_path / "program.c"), "-L", str(BUILD), f"-l{name}",
                    f"-Wl,-rpath,{BUILD}", "-o", str(binary)], check=True)
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stdout}{run.stderr}"
    return run.stdout.splitlines(), binary


@pytest.mark.parametrize("compiler, flags", [("cc", ["-std=c11"]), ("c++", ["-std=c++17"])])
def test_header_compiles_alone(tmp_path, compiler, flags):
    source = tmp_path / ("h.c" if compiler == "cc" else "h.cpp")
    source.write_text('#include "flashprefill.h"\n'
                      "int main(void)\n{\n    flashprefill_params p = flashprefill_params_init();\n"
                      "    flashprefill_quantize_params q = flashprefill_quantize_params_init();\n"
                      "    flashprefill_prepare_v_params v = flashprefill_prepare_v_params_init();\n"
                      "    flashprefill_merge_state_params m = flashprefill_merge_state_params_init();\n"
                      "    flashprefill_query_params a = flashprefill_query_params_init();\n"
                      "    flashprefill_query_result r = flashprefill_query_result_init();\n"
                      "    flashprefill_quantize_paged_params g = flashprefill_quantize_paged_params_init();\n"
                      "    return flashprefill_supports(&p) + flashprefill_quantize(&q, 0) + "
                      "flashprefill_prepare_v(&v, 0) + flashprefill_merge_state(&m, 0) + flashprefill_query(&a, &r) + "
                      "flashprefill_quantize_paged(&g, 0);\n}\n")
    subprocess.run([_compiler(compiler), *flags, "-Wall", "-Wextra", "-Werror", "-pedantic", "-I",
                    str(ROOT / "include"), "-c", str(source), "-o", str(tmp_path / "h.o")], check=True)


def test_readme_example_runs(tmp_path):
    lines, binary = _build_and_run(tmp_path, EXAMPLE, "cuda")
    assert lines[0] == f"version {header_version()}"
    assert lines[1] == "supports 0"  # FLASHPREFILL_SUCCESS: the bf16 hd128 kernel exists
    # here there is no usable GPU: a clean NO_DEVICE (3) with the runtime's reason; on a Hopper GPU this
    # reports the device check of the fake pointers instead (INVALID_ARGUMENT, 1)
    status = int(lines[2].split()[1])
    assert status in (1, 3) and lines[2].split(": ", 1)[1], lines
    # the program asks for the SONAME, not the development link
    dynamic = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    assert f"[libflashprefill.so.{header_version().split('.')[0]}]" in dynamic, dynamic


@pytest.mark.parametrize("backend", LIBRARIES)
def test_a_program_built_against_0_7_gets_a_clear_status(tmp_path, backend):
    lines, _ = _build_and_run(tmp_path, OLD_LAYOUT, backend)
    assert lines[0] == "sizes 304 136 88"  # 0.7.1's sizes: this program's structs are that layout
    version = header_version()
    expected = [("supports", "flashprefill_params", 0x1230), ("forward", "flashprefill_params", 0x1230),
                ("supports", "flashprefill_params", 0), ("quantize", "flashprefill_quantize_params", 0x100),
                ("prepare_v", "flashprefill_prepare_v_params", 0x200)]
    for line, (call, c_type, low_half_of_first_pointer) in zip(lines[1:], expected):
        assert line.startswith(f"{call} 1 {c_type} struct is {low_half_of_first_pointer} bytes"), line
        assert f"this library (version {version}) takes" in line and "rebuild against its header" in line, line
    assert re.match(r"larger 1 flashprefill_params struct is \d+ bytes", lines[6]), lines[6]


QUERY = r"""
#include <stdio.h>
#include "flashprefill.h"

static void report(const char *call, flashprefill_status s, const flashprefill_query_result *r)
{
    printf("%s %d %s | %s %d %d %g\n", call, (int)s, flashprefill_last_error(), r->kernel ? r->kernel : "-",
           (int)r->block_tokens_multiple, (int)r->preferred_block_tokens, (double)r->q_code_max);
}

int main(void)
{
    flashprefill_query_params p = flashprefill_query_params_init();
    p.in_dtype = FLASHPREFILL_DTYPE_FP8_E4M3; p.dim_qk = 128; p.dim_v = 128;
    p.descale_kind = FLASHPREFILL_DESCALE_PER_BLOCK; p.block_tokens = 384;
    flashprefill_query_result r = flashprefill_query_result_init();
    report("query", flashprefill_query(&p, &r), &r);
    flashprefill_query_result untouched = flashprefill_query_result_init();
    p.struct_bytes -= 4;
    report("small_params", flashprefill_query(&p, &untouched), &untouched);
    p.struct_bytes += 4;
    untouched.struct_bytes += 8;
    report("large_result", flashprefill_query(&p, &untouched), &untouched);
    report("null_result", flashprefill_query(&p, NULL), &r);
    p.block_tokens = 0;
    untouched.struct_bytes -= 8;
    report("block_0", flashprefill_query(&p, &untouched), &untouched);
    p.block_tokens = 384; p.dim_qk = 100;
    report("dim_100", flashprefill_query(&p, &untouched), &untouched);
    return 0;
}
"""


@pytest.mark.parametrize("backend, kernel, block_tokens, q_code_max", [
    ("cuda", "hopper_fwd_fp8_hd128_kv192_f16s", 384, 1.125), ("hip", "gfx950_fwd_fp8_hd128", 64, 448)])
def test_query_from_c(tmp_path, backend, kernel, block_tokens, q_code_max):
    """flashprefill_query from C: the kernel and its policy; a params or result struct of another size, a NULL
    result, a block of 0 tokens: INVALID_ARGUMENT with the result untouched; a dim no kernel takes: NOT_SUPPORTED."""
    lines, _ = _build_and_run(tmp_path, QUERY, backend)
    assert lines[0] == f"query 0  | {kernel} {block_tokens} {block_tokens} {q_code_max:g}", lines[0]
    assert re.match(r"small_params 1 flashprefill_query_params struct is \d+ bytes .* takes \d+: rebuild against "
                    r"its header and make the struct with flashprefill_query_params_init\(\) \| - 0 0 0$", lines[1])
    assert re.match(r"large_result 1 flashprefill_query_result struct is \d+ bytes .* \| - 0 0 0$", lines[2])
    assert lines[3].startswith("null_result 1 result is NULL | "), lines[3]
    assert lines[4] == "block_0 1 q_descale.block_tokens must be > 0, got 0 | - 0 0 0", lines[4]
    assert lines[5].startswith("dim_100 2 no kernel of this build takes dim_qk = 100") and lines[5].endswith(
        "| - 0 0 0"), lines[5]


@pytest.mark.parametrize("backend", LIBRARIES)
def test_soname_and_exports(backend):
    name = _library(backend)
    major = header_version().split(".")[0]
    link = BUILD / f"lib{name}.so"
    assert link.resolve().name == f"lib{name}.so.{major}"
    dynamic = subprocess.run(["readelf", "-d", str(link)], capture_output=True, text=True, check=True).stdout
    assert f"Library soname: [lib{name}.so.{major}]" in dynamic, dynamic
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(link)], capture_output=True, text=True,
                             check=True).stdout.split("\n")
    exported = sorted(line.split()[-1] for line in symbols if line.strip())
    assert exported and all(symbol.startswith("flashprefill_") for symbol in exported), exported
    declared = set(re.findall(r"^\w[\w *]*?\b(flashprefill_\w+)\(", HEADER.read_text(), re.M))
    declared -= set(re.findall(r"^static inline \w+ (flashprefill_\w+)\(", HEADER.read_text(), re.M))  # the _init()s
    assert set(exported) == declared


OLD_LIBRARY = r"""
const char *flashprefill_version(void) { return "0.7.1"; }
const char *flashprefill_status_string(int s) { return s ? "error" : "success"; }
const char *flashprefill_last_error(void) { return ""; }
int flashprefill_supports(const void *p) { return p == 0; }
int flashprefill_forward(const void *p, void *s) { return p == 0 && s == 0; }
int flashprefill_quantize(const void *p, void *s) { return p == 0 && s == 0; }
int flashprefill_prepare_v(const void *p, void *s) { return p == 0 && s == 0; }
"""


def test_python_refuses_a_library_older_than_sized_structs(tmp_path, monkeypatch):
    """A 0.7 library would read the mirror's struct_bytes as the low half of q: Python does not load it."""
    from flashprefill import _lib
    (tmp_path / "old.c").write_text(OLD_LIBRARY)
    old = tmp_path / "libflashprefill.so"
    subprocess.run([_compiler("cc"), "-shared", "-fPIC", str(tmp_path / "old.c"), "-o", str(old)], check=True)
    monkeypatch.setenv("FLASHPREFILL_LIBRARY", str(old))
    _lib.lib.cache_clear()
    try:
        with pytest.raises(_lib.LibraryNotFoundError, match=r"version 0\.7\.1, older than 0\.9\.0"):
            _lib.lib()
    finally:
        _lib.lib.cache_clear()
