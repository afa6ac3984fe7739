"""The gfx950 host library (build/libflashprefill_gfx950.so, `make amd`) on a machine without ROCm: the same C
ABI and validation as the CUDA library, a clean NO_DEVICE when libamdhip64.so is missing, the load-time
check of the embedded code object's kernel descriptor against a gfx950 CU, and (with tests/hip_stub.c standing in
for libamdhip64.so) the modules loaded once per device. The library exports only flashprefill_*, so the descriptor
check (hip/code_object_check.c) is compiled here on its own into a probe library."""
import ctypes
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import kernargs
import hip_stub
import markers
import shapes
from flashprefill._params import DType, Params, PrepareVParams, Status, VLayout

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "build" / "libflashprefill_gfx950.so"
CODE_OBJECT = ROOT / "build" / "gfx950" / "fwd_bf16_hd128.co"


class Resources(ctypes.Structure):
    # fp_kernel_resources, hip/code_objects.h
    _fields_ = [("lds_bytes", ctypes.c_uint32), ("scratch_bytes", ctypes.c_uint32),
                ("kernarg_bytes", ctypes.c_uint32), ("vgprs", ctypes.c_uint32)]


@pytest.fixture(scope="module")
def lib():
    if not LIBRARY.exists():
        pytest.fail(f"{LIBRARY} is missing: run `make amd`")
    lib = ctypes.CDLL(str(LIBRARY))
    lib.flashprefill_supports.restype = ctypes.c_int
    lib.flashprefill_forward.restype = ctypes.c_int
    lib.flashprefill_quantize.restype = ctypes.c_int
    lib.flashprefill_quantize_paged.restype = ctypes.c_int
    lib.flashprefill_last_error.restype = ctypes.c_char_p
    return lib


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    """hip/code_object_check.c alone in a shared library: fp_code_object_resources, fp_check_resources."""
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip(markers.NO_CC)
    directory = tmp_path_factory.mktemp("code_object_check")
    probe = directory / "check.so"
    subprocess.run([compiler, "-std=gnu11", "-O1", "-fPIC", "-shared", "-Wall", "-Werror", f"-I{ROOT / 'include'}",
                    f"-I{ROOT / 'src'}", f"-I{ROOT / 'hip'}", str(ROOT / "hip" / "code_object_check.c"),
                    str(ROOT / "src" / "error.c"), "-o", str(probe)], check=True)  # fp_fail, the one call it makes
    lib = ctypes.CDLL(str(probe))
    lib.fp_last_error.restype = ctypes.c_char_p
    lib.fp_code_object_resources.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p,
                                             ctypes.POINTER(Resources)]
    lib.fp_check_resources.argtypes = [ctypes.c_char_p, ctypes.POINTER(Resources)]
    return lib


def params(dtype=DType.BF16, seq=200, heads_q=8, heads_kv=2, dim=128, dim_v=None):
    dim_v = dim if dim_v is None else dim_v
    p = Params(q=0x7F0000000000, k=0x7F1000000000, v=0x7F2000000000, out=0x7F3000000000, batch=2, seqlen_q=seq,
               seqlen_k=seq, heads_q=heads_q, heads_kv=heads_kv, dim_qk=dim, dim_v=dim_v, in_dtype=dtype,
               out_dtype=DType.BF16, causal=1, softmax_scale=dim ** -0.5)
    for name, heads, d in (("q", heads_q, dim), ("k", heads_kv, dim), ("v", heads_kv, dim_v), ("out", heads_q, dim_v)):
        for axis, stride in (("batch", seq * heads * d), ("seq", heads * d), ("head", d), ("dim", 1)):
            setattr(p, f"{name}_stride_{axis}", stride)
    return p


def test_supports_hd128_bf16_and_fp8(lib):
    assert lib.flashprefill_supports(ctypes.byref(params())) == Status.SUCCESS
    assert lib.flashprefill_supports(ctypes.byref(params(DType.FP8_E4M3))) == Status.SUCCESS
    fp8_blocks = params(DType.FP8_E4M3)
    fp8_blocks.k_descale.kind, fp8_blocks.k_descale.block_tokens, fp8_blocks.k_descale.exponents = 3, 128, 0x7F4000000000
    assert lib.flashprefill_supports(ctypes.byref(fp8_blocks)) == Status.SUCCESS
    fp8_blocks.k_descale.block_tokens = 96  # not whole 64-key tiles
    assert lib.flashprefill_supports(ctypes.byref(fp8_blocks)) == Status.ERROR_NOT_SUPPORTED
    assert lib.flashprefill_supports(ctypes.byref(params(dim=64))) == Status.ERROR_NOT_SUPPORTED
    # DeepSeek-V2's 192/128 (fwd_bf16_qk192, fwd_fp8_qk192); 192/192 has no kernel
    assert lib.flashprefill_supports(ctypes.byref(params(dim=192, dim_v=128))) == Status.SUCCESS
    assert lib.flashprefill_supports(ctypes.byref(params(DType.FP8_E4M3, dim=192, dim_v=128))) == Status.SUCCESS
    assert lib.flashprefill_supports(ctypes.byref(params(dim=192))) == Status.ERROR_NOT_SUPPORTED
    fp16_p = params(DType.FP8_E4M3)
    fp16_p.probabilities = 1  # FLASHPREFILL_PROBABILITIES_FP16: a Hopper kernel only
    assert lib.flashprefill_supports(ctypes.byref(fp16_p)) == Status.ERROR_NOT_SUPPORTED
    assert b"probabilities FP16" in lib.flashprefill_last_error()


def _bf16_q(dim=128, paged=False, varlen=True):
    """A bf16 q against fp8 k and v (q_dtype BF16, the rotation's signs given) with stand-in addresses."""
    p = params(DType.FP8_E4M3, dim=dim, dim_v=128)
    p.q_dtype, p.q_rotation_signs = DType.BF16, 0x7F6000000000
    if varlen:
        p.cu_seqlens_q, p.total_q = 0x7F4000000000, 400
        p.workspace, p.workspace_bytes = 0x7F5000000000, 1 << 20
        if paged:
            p.block_table, p.block_table_stride, p.page_size, p.num_pages = 0x7F7000000000, 13, 16, 40
            p.seqused_k, p.k_stride_batch, p.v_stride_batch = 0x7F4100000000, 16 * 2 * dim, 16 * 2 * 128
        else:
            p.cu_seqlens_k, p.total_k = 0x7F4200000000, 400
    return p


def test_bf16_q_against_fp8_k_v(lib):
    """fwd_fp8_hd128 rounds a bf16 q itself in varlen and paged calls at dim_qk 128, as the Hopper kernels do; dim_qk
    192 has no such kernel, and an equal-length call is not the header's form."""
    assert lib.flashprefill_supports(ctypes.byref(_bf16_q())) == Status.SUCCESS
    assert lib.flashprefill_supports(ctypes.byref(_bf16_q(paged=True))) == Status.SUCCESS
    assert lib.flashprefill_supports(ctypes.byref(_bf16_q(dim=192))) == Status.ERROR_NOT_SUPPORTED
    assert b"bf16 q" in lib.flashprefill_last_error()
    assert lib.flashprefill_supports(ctypes.byref(_bf16_q(varlen=False))) == Status.ERROR_NOT_SUPPORTED
    assert b"is a varlen form" in lib.flashprefill_last_error()


def test_prepared_v_is_a_hopper_layout(lib):
    """v_layout PREPARED passes the shared validation but no gfx950 kernel reads it, and prepare_v refuses."""
    prepared = params(DType.FP8_E4M3)
    prepared.v_layout, prepared.v_stride_seq, prepared.v_stride_dim = VLayout.PREPARED, 1, 208
    prepared.v_stride_head, prepared.v_stride_batch = 128 * 208, 2 * 128 * 208
    assert lib.flashprefill_supports(ctypes.byref(prepared)) == Status.ERROR_NOT_SUPPORTED
    assert b"v_layout PREPARED" in lib.flashprefill_last_error()
    lib.flashprefill_prepare_v.restype = ctypes.c_int
    call = PrepareVParams(v=0x7F2000000000, prepared=0x7F3000000000, batch=1, seqlen=200, heads=2, dim=128,
                          v_stride_batch=200 * 2 * 128, v_stride_seq=2 * 128, v_stride_head=128, v_stride_dim=1,
                          prepared_stride_batch=2 * 128 * 208, prepared_stride_head=128 * 208, prepared_stride_dim=208)
    assert lib.flashprefill_prepare_v(ctypes.byref(call), None) == Status.ERROR_NOT_SUPPORTED
    assert b"the gfx950 kernels read v in the DEFAULT layout only" in lib.flashprefill_last_error()


def test_kernel_limits_answered_by_supports(lib):
    """Limits of the kernels themselves (32-bit strides, 16-bit grid y and z) come from supports too."""
    p = params()
    p.q_stride_seq = 2**31 + 8  # elements: 4 GiB and more in bytes
    p.q_stride_batch = p.q_stride_seq * 200
    p.out = 0x100000000000  # below q, whose span is now 1.7 TB
    assert lib.flashprefill_supports(ctypes.byref(p)) == Status.ERROR_NOT_SUPPORTED
    assert b"strides below 4 GiB" in lib.flashprefill_last_error()
    p = params(heads_q=70000, heads_kv=2)
    assert lib.flashprefill_supports(ctypes.byref(p)) == Status.ERROR_NOT_SUPPORTED
    assert b"grid limit of 65535" in lib.flashprefill_last_error()


def test_same_validation_as_cuda(lib):
    p = params()
    p.heads_kv = 3
    assert lib.flashprefill_supports(ctypes.byref(p)) == Status.ERROR_INVALID_ARGUMENT
    assert b"heads_q = 8 is not a multiple of heads_kv = 3" in lib.flashprefill_last_error()


@markers.without_hip_runtime
def test_forward_without_rocm_is_a_clean_status(lib):
    status = lib.flashprefill_forward(ctypes.byref(params()), None)
    assert status == Status.ERROR_NO_DEVICE
    assert b"libamdhip64.so could not be loaded" in lib.flashprefill_last_error()
    assert lib.flashprefill_forward(ctypes.byref(params()), None) == Status.ERROR_NO_DEVICE  # same answer again


def quantize_params(dim=128, x_dtype=DType.FP32):
    from flashprefill._params import QuantizeParams
    p = QuantizeParams(x=0x7F0000000000, codes=0x7F1000000000, exponents=0x7F2000000000, batch=2, seqlen=300,
                       heads=4, dim=dim, block_tokens=128, x_dtype=x_dtype)
    for prefix in ("x", "codes"):
        for axis, stride in (("batch", 300 * 4 * dim), ("seq", 4 * dim), ("head", dim), ("dim", 1)):
            setattr(p, f"{prefix}_stride_{axis}", stride)
    return p


@pytest.mark.parametrize("dim", [144, 288])
def test_quantize_refusals(lib, dim):
    """The shared validation's (every multiple of 32 up to 256 has a gfx950 kernel)."""
    assert lib.flashprefill_quantize(ctypes.byref(quantize_params(dim)), None) == Status.ERROR_NOT_SUPPORTED
    assert f"multiple of 32 up to 256, got {dim}".encode() in lib.flashprefill_last_error()


def test_quantize_prepared_layout_is_hoppers(lib):
    """Codes in v's prepared layout (valid params): the gfx950 attention takes v in its own layout, so NOT_SUPPORTED,
    before any device work."""
    from flashprefill._params import VLayout
    p = quantize_params()
    p.codes_layout = VLayout.PREPARED
    p.codes_stride_batch, p.codes_stride_seq, p.codes_stride_head, p.codes_stride_dim = 4 * 128 * 304, 1, 128 * 304, 304
    assert lib.flashprefill_quantize(ctypes.byref(p), None) == Status.ERROR_NOT_SUPPORTED
    assert b"codes_layout PREPARED is Hopper's" in lib.flashprefill_last_error()


@markers.without_hip_runtime
def test_quantize_varlen_and_paged_without_rocm_are_a_clean_status(lib):
    """The packed (varlen) quantizer and the paged cache writer (valid params) have gfx950 kernels: without ROCm they
    stop at loading them."""
    from flashprefill._params import QuantizePagedParams
    p = quantize_params()
    p.cu_seqlens, p.seqlen, p.total, p.max_seqlen = 0x7F3000000000, 0, 600, 300
    p.x_stride_batch = p.codes_stride_batch = 0
    assert lib.flashprefill_quantize(ctypes.byref(p), None) == Status.ERROR_NO_DEVICE
    assert b"libamdhip64.so could not be loaded" in lib.flashprefill_last_error()
    paged = QuantizePagedParams(x=0x7F0000000000, slot_mapping=0x7F1000000000, codes=0x7F2000000000,
                                exponents=0x7F3000000000, tokens=5, heads_kv=2, dim=128, num_pages=8, page_size=16,
                                x_dtype=DType.BF16, x_stride_token=256, x_stride_head=128, x_stride_dim=1,
                                codes_stride_page=16 * 256, codes_stride_row=256, codes_stride_head=128,
                                codes_stride_dim=1)
    assert lib.flashprefill_quantize_paged(ctypes.byref(paged), None) == Status.ERROR_NO_DEVICE
    assert b"libamdhip64.so could not be loaded" in lib.flashprefill_last_error()


def test_quantize_paged_token_limit(lib):
    """2^30 tokens (valid params): past the kernel's 32-bit offsets into slot_mapping, NOT_SUPPORTED with the reason,
    before any device work."""
    from flashprefill._params import QuantizePagedParams
    paged = QuantizePagedParams(x=0x200000000000, slot_mapping=0x7F1000000000, codes=0x7F2000000000,
                                exponents=0x7F3000000000, tokens=1 << 30, heads_kv=2, dim=128, num_pages=8,
                                page_size=16, x_dtype=DType.BF16, x_stride_token=256, x_stride_head=128,
                                x_stride_dim=1, codes_stride_page=16 * 256, codes_stride_row=256,
                                codes_stride_head=128, codes_stride_dim=1)
    assert lib.flashprefill_quantize_paged(ctypes.byref(paged), None) == Status.ERROR_NOT_SUPPORTED
    assert b"exceeds the gfx950 paged quantizer's limit of 1073741823" in lib.flashprefill_last_error()


@markers.without_hip_runtime
@shapes.over_quantize_dims
def test_quantize_without_rocm_is_a_clean_status(lib, dim):
    """The dims with a quantizer kernel: without ROCm they stop at loading it."""
    assert lib.flashprefill_quantize(ctypes.byref(quantize_params(dim)), None) == Status.ERROR_NO_DEVICE
    assert b"libamdhip64.so could not be loaded" in lib.flashprefill_last_error()


@pytest.mark.parametrize("kernel", ["fwd_bf16_hd128", "fwd_bf16_qk192", "fwd_fp8_hd128", "fwd_fp8_qk192",
                                    *(f"quantize_d{d}" for d in shapes.QUANTIZE_DIMS),
                                    *(f"quantize_paged_d{d}" for d in shapes.QUANTIZE_DIMS)])
def test_descriptor_resources_match_metadata(check, kernel):
    path = ROOT / "build" / "gfx950" / f"{kernel}.co"
    image = path.read_bytes()
    r = Resources()
    assert check.fp_code_object_resources(image, len(image), kernel.encode(), ctypes.byref(r)) == Status.SUCCESS
    if shutil.which("llvm-readelf-22"):
        notes = subprocess.run(["llvm-readelf-22", "--notes", str(path)], capture_output=True, text=True,
                               check=True).stdout
        declared = int(re.search(r"\.vgpr_count:\s+(\d+)", notes).group(1))
        assert declared <= r.vgprs < declared + 8, f"metadata {declared} VGPRs, descriptor {r.vgprs} (granules of 8)"
    # fwd: the LDS the kernel declares (`fwd_*_kernel name, vgprs, lds`), which the assembler holds to its LDS map
    # (fwd_frame.inc; tests/test_gfx950_static.py derives it from the tiles)
    declared_lds = re.search(rf"^fwd_\w+_kernel {kernel}, \d+, (\d+)", (ROOT / "asm" / "gfx950" / f"{kernel}.s")
                             .read_text(), re.M) if not kernel.startswith("quantize") else None
    quantize_kernarg = kernargs.QuantizePagedKernarg if kernel.startswith("quantize_paged") else \
        kernargs.QuantizeKernarg
    expected = (0, 0, ctypes.sizeof(quantize_kernarg)) if kernel.startswith("quantize") else \
        (int(declared_lds.group(1)), 0, ctypes.sizeof(kernargs.FwdKernarg))
    assert (r.lds_bytes, r.scratch_bytes, r.kernarg_bytes) == expected
    assert check.fp_check_resources(kernel.encode(), ctypes.byref(r)) == Status.SUCCESS


@pytest.mark.parametrize("field, value, message", [("lds_bytes", 200 * 1024, b"bytes of LDS"),
                                                   ("vgprs", 520, b"VGPRs per lane"),
                                                   ("scratch_bytes", 16, b"scratch")])
def test_oversized_kernels_are_refused(check, field, value, message):
    r = Resources(lds_bytes=0, scratch_bytes=0, kernarg_bytes=ctypes.sizeof(kernargs.FwdKernarg), vgprs=240)
    setattr(r, field, value)
    assert check.fp_check_resources(b"k", ctypes.byref(r)) == Status.ERROR_NOT_SUPPORTED
    assert message in check.fp_last_error()


def test_malformed_code_object_is_refused(check):
    r = Resources()
    image = CODE_OBJECT.read_bytes()
    for bad in (b"not an elf", image[:200], image.replace(b"fwd_bf16_hd128.kd", b"xxx_xxxx_xxxxx.kd")):
        assert check.fp_code_object_resources(bad, len(bad), b"fwd_bf16_hd128", ctypes.byref(r)) == \
            Status.ERROR_NOT_SUPPORTED


# Runs in its own process with the stub as libamdhip64.so: the library loads the runtime once per process.
_PER_DEVICE_SCRIPT = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[2])
from test_gfx950_library import params
hip = ctypes.CDLL("libamdhip64.so")
lib = ctypes.CDLL(sys.argv[1])
lib.flashprefill_last_error.restype = ctypes.c_char_p
steps = []
for device in (0, 1, 0, 1, 40):
    assert hip.hipSetDevice(device) == 0
    status = lib.flashprefill_forward(ctypes.byref(params()), None)
    steps.append([device, status, lib.flashprefill_last_error().decode(),
                  [hip.stub_load_device(i) for i in range(hip.stub_load_count())],
                  [[hip.stub_launch_device(i), hip.stub_launch_module_device(i)]
                   for i in range(hip.stub_launch_count())]])
print(json.dumps(steps))
"""


@markers.needs_cc
def test_modules_are_loaded_per_device(lib, tmp_path):
    """Each device ordinal gets the code objects loaded while it is current, once; a launch uses the current
    device's modules; an ordinal past the loader's table is refused, not given another device's modules."""
    hip_stub.build(tmp_path)
    out = hip_stub.run(tmp_path, [sys.executable, "-c", _PER_DEVICE_SCRIPT, LIBRARY, ROOT / "tests"],
                       PYTHONPATH=str(ROOT / "python"))
    steps = json.loads(out)
    kernels = len(list((ROOT / "asm" / "gfx950").glob("*.s")))  # code objects embedded (hip/loader.c), one a .s
    (d0, s0, _, loads0, launches0), (d1, s1, _, loads1, launches1), (_, s2, _, loads2, launches2), \
        (_, s3, _, loads3, launches3), (d4, s4, message4, loads4, launches4) = steps
    assert (s0, s1, s2, s3) == (Status.SUCCESS,) * 4
    assert loads0 == [0] * kernels and launches0 == [[0, 0]]
    assert loads1 == [0] * kernels + [1] * kernels and launches1[-1] == [1, 1]
    assert loads2 == loads1 and launches2[-1] == [0, 0]          # back on device 0: its own modules, no reload
    assert loads3 == loads1 and launches3[-1] == [1, 1]
    assert s4 == Status.ERROR_NOT_SUPPORTED and "device 40" in message4
    assert loads4 == loads1 and launches4 == launches3


# In its own process with the stub as libamdhip64.so, whose hipMemcpy copies host memory: the header in a host buffer.
_WORKSPACE_ERROR_SCRIPT = r"""
import ctypes, json, sys
hip = ctypes.CDLL("libamdhip64.so")
lib = ctypes.CDLL(sys.argv[1])
lib.flashprefill_last_error.restype = ctypes.c_char_p
results = []
for header in ([0, 0, 0, 0], [6, 3, 99, 0], [3, 1, -5, 0]):
    workspace = (ctypes.c_int32 * 4)(*header)
    error, message = ctypes.c_int32(-7), ctypes.create_string_buffer(256)
    status = lib.flashprefill_workspace_error(workspace, ctypes.byref(error), message, 256)
    results.append([status, error.value, message.value.decode()])
print(json.dumps(results))
"""


@markers.needs_cc
def test_workspace_error_reads_the_check_verdict(tmp_path):
    """flashprefill_workspace_error on gfx950 reads the header the check kernel wrote (hipMemcpy) and words it as the
    Hopper library does."""
    hip_stub.build(tmp_path)
    out = hip_stub.run(tmp_path, [sys.executable, "-c", _WORKSPACE_ERROR_SCRIPT, LIBRARY])
    (s0, e0, m0), (s1, e1, m1), (s2, e2, m2) = json.loads(out)
    assert (s0, e0, m0) == (Status.SUCCESS, 0, "valid")
    assert (s1, e1) == (Status.SUCCESS, 6) and m1 == ("block_table holds a page id outside [0, num_pages): sequence 3, "
                                                      "value 99 (out and lse were set to NaN)")
    assert (s2, e2) == (Status.SUCCESS, 3) and m2.startswith("cu_seqlens_k is negative, decreasing or past total_k: "
                                                             "sequence 1, value -5")
