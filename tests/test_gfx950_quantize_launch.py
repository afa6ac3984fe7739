"""The gfx950 library's quantizer launches on a machine without ROCm (tests/hip_stub.c standing in for
libamdhip64.so): the kernel arguments hip/quantize_launch.c packs from a packed (varlen) flashprefill_quantize and from
a flashprefill_quantize_paged call (addresses, strides in bytes, the packed form's bounds and longest sequence, the
code_max split), read back from the stub with the grid and the number of launches. The calls are made in C
(tests/quantize_launch_probe.c) so that the params are the header's own."""
import ctypes
import pathlib

import numpy as np
import pytest

import hip_stub
import kernargs
import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "build" / "libflashprefill_gfx950.so"
pytestmark = markers.needs_cc
# tests/quantize_launch_probe.c's problems
BATCH, HEADS, DIM, TOTAL, MAX_SEQLEN, BLOCK_TOKENS = 3, 4, 96, 700, 300, 64
TOKENS, NUM_PAGES, PAGE_SIZE = 37, 50, 16


_address = hip_stub.stand_in_address


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    if not LIBRARY.exists():
        pytest.fail(f"{LIBRARY} is missing: run `make amd`")
    directory = hip_stub.build(tmp_path_factory.mktemp("quantize_launch"))
    hip_stub.build_probe(directory, "quantize_launch_probe.c", LIBRARY)

    def run(mode):
        status, error, grid, kernarg = hip_stub.run(directory, [directory / "probe", mode]).split("\n")[:4]
        *grid, launches = map(int, grid.split())
        return int(status), error, tuple(grid), launches, bytes.fromhex(kernarg)
    return run


def test_packed_kernel_arguments(probe):
    status, error, grid, launches, kernarg = probe("packed")
    assert status == 0, error
    blocks = -(-MAX_SEQLEN // BLOCK_TOKENS)
    assert grid == (blocks, HEADS, BATCH) and launches == 2
    assert len(kernarg) == ctypes.sizeof(kernargs.QuantizeKernarg)
    a = kernargs.QuantizeKernarg.from_buffer_copy(kernarg)
    assert (a.x, a.codes, a.exponents, a.signs, a.subtract, a.cu_seqlens) == tuple(_address(i) for i in range(6))
    assert (a.x_stride_batch, a.codes_stride_batch) == (0, 0)
    assert (a.x_stride_seq, a.x_stride_head, a.codes_stride_seq, a.codes_stride_head) == (
        2 * HEADS * DIM * 2, DIM * 2, HEADS * DIM, DIM)
    assert (a.seqlen, a.total, a.heads, a.block_tokens, a.blocks) == (MAX_SEQLEN, TOTAL, HEADS, BLOCK_TOKENS, blocks)
    fraction, exponent = np.frexp(np.float32(1.125))
    assert (a.x_fp32, a.phase, a.code_max_exponent) == (0, 1, exponent)  # the last launch: phase 1
    assert a.code_max_mantissa == np.float32(fraction).view(np.uint32) & 0x7FFFFF


def test_paged_kernel_arguments(probe):
    status, error, grid, launches, kernarg = probe("paged")
    assert status == 0, error
    assert grid == (TOKENS, HEADS, 1) and launches == 1
    assert len(kernarg) == ctypes.sizeof(kernargs.QuantizePagedKernarg)
    a = kernargs.QuantizePagedKernarg.from_buffer_copy(kernarg)
    assert (a.x, a.slot_mapping, a.codes, a.exponents, a.signs) == tuple(_address(i) for i in range(5))
    assert (a.x_stride_token, a.x_stride_head) == (3 * HEADS * DIM * 4, DIM * 4)
    assert (a.codes_stride_page, a.codes_stride_row, a.codes_stride_head) == (PAGE_SIZE * HEADS * DIM, HEADS * DIM,
                                                                              DIM)
    assert (a.tokens, a.heads_kv, a.page_size, a.num_pages, a.x_fp32) == (TOKENS, HEADS, PAGE_SIZE, NUM_PAGES, 1)
