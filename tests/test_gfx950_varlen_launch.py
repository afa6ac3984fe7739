"""The gfx950 library's varlen launch on a machine without ROCm (tests/hip_stub.c standing in for libamdhip64.so):
the kernel arguments hip/fwd_launch.c packs from a varlen call (the device arrays' addresses, lse's rows = total_q,
batch strides 0, the grid over the longest sequence; a paged cache's table, page size and page strides), read back
from the stub; pages of other than a power of two tokens refused as NOT_SUPPORTED. The call is made in C
(tests/varlen_launch_probe.c) so that the params are the header's own."""
import ctypes
import pathlib

import pytest

import kernargs
import hip_stub
import markers

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "build" / "libflashprefill_gfx950.so"
pytestmark = markers.needs_cc
# tests/varlen_launch_probe.c's problem and stand-in addresses
HEADS_Q, HEADS_KV, DIM, TOTAL_Q, TOTAL_K, MAX_Q, MAX_K = 4, 2, 128, 300, 400, 260, 300


_address = hip_stub.stand_in_address


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    if not LIBRARY.exists():
        pytest.fail(f"{LIBRARY} is missing: run `make amd`")
    directory = hip_stub.build(tmp_path_factory.mktemp("varlen_launch"))
    hip_stub.build_probe(directory, "varlen_launch_probe.c", LIBRARY)

    def run(*mode):
        status, error, grid, kernarg, check = hip_stub.run(directory, [directory / "probe", *mode]).split("\n")[:5]
        return int(status), error, tuple(map(int, grid.split())), bytes.fromhex(kernarg), bytes.fromhex(check)
    return run


def _copies(paged, batch=1):
    """Where hip/varlen_check_launch.c puts the checked copies in the workspace (the probe's address 8): after the
    16-byte header, cu_seqlens_q's (batch + 1), cu_seqlens_k's (batch + 1; none with pages), the key counts."""
    workspace, offsets = _address(8), 4 * (batch + 1)
    return workspace + 16, 0 if paged else workspace + 16 + offsets, workspace + 16 + 2 * offsets


def _check_arguments(check, paged):
    """The check kernel's arguments: the call's arrays, the workspace's header and copies, out and lse."""
    assert len(check) == ctypes.sizeof(kernargs.VarlenCheckKernarg)
    c = kernargs.VarlenCheckKernarg.from_buffer_copy(check)
    assert (c.cu_seqlens_q, c.cu_seqlens_k, c.seqused_k) == (_address(5), 0 if paged else _address(6), _address(7))
    assert (c.header, (c.copy_q, c.copy_k, c.copy_used)) == (_address(8), _copies(paged))
    assert (c.out, c.lse, c.out_stride_seq, c.out_stride_head) == (_address(3), _address(4), HEADS_Q * DIM * 2, DIM * 2)
    assert (c.batch, c.total_q, c.max_seqlen_q, c.max_seqlen_k, c.heads_q) == (1, TOTAL_Q, MAX_Q, MAX_K, HEADS_Q)
    return c


def test_varlen_kernel_arguments(probe):
    """The check of the arrays first, then the forward kernel on the checked copies."""
    status, error, grid, kernarg, check = probe("varlen")
    assert status == 0, error
    assert grid == (-(-MAX_Q // 256), HEADS_Q, 1)
    assert len(kernarg) == ctypes.sizeof(kernargs.FwdKernarg)
    a = kernargs.FwdKernarg.from_buffer_copy(kernarg)
    assert (a.cu_seqlens_q, a.cu_seqlens_k, a.seqused_k) == _copies(paged=False)
    c = _check_arguments(check, paged=False)
    assert (c.total_k, c.block_table, c.block_table_stride) == (TOTAL_K, 0, 0)
    assert (a.q, a.k, a.v, a.out, a.lse) == tuple(_address(i) for i in range(5))
    assert a.lse_rows == TOTAL_Q and (a.seqlen_q, a.seqlen_k) == (MAX_Q, MAX_K)
    assert (a.q_stride_batch, a.k_stride_batch, a.v_stride_batch, a.out_stride_batch) == (0, 0, 0, 0)
    assert (a.q_stride_seq, a.k_stride_seq, a.out_stride_seq) == (HEADS_Q * DIM * 2, HEADS_KV * DIM * 2,
                                                                   HEADS_Q * DIM * 2)
    assert a.heads_per_kv == HEADS_Q // HEADS_KV and a.causal == 1
    assert a.block_table == 0
    assert (a.q_bf16, a.q_rotation_signs) == (0, 0)


def test_bf16_q_kernel_arguments(probe):
    """A bf16 q against fp8 k and v: q's strides in bytes of bf16, k's and v's of fp8, the flag and the signs."""
    status, error, _, kernarg, _ = probe("bf16q")
    assert status == 0, error
    a = kernargs.FwdKernarg.from_buffer_copy(kernarg)
    assert (a.q_bf16, a.q_rotation_signs, a.q_descale) == (1, _address(11), 0)
    assert (a.q_stride_seq, a.q_stride_head) == (HEADS_Q * DIM * 2, DIM * 2)
    assert (a.k_stride_seq, a.v_stride_seq, a.k_stride_head) == (HEADS_KV * DIM, HEADS_KV * DIM, DIM)


@pytest.mark.parametrize("page_size", [16, 64, 256])
def test_paged_kernel_arguments(probe, page_size):
    status, error, grid, kernarg, check = probe("paged", str(page_size))
    assert status == 0, error
    assert grid == (-(-MAX_Q // 256), HEADS_Q, 1)
    a = kernargs.FwdKernarg.from_buffer_copy(kernarg)
    assert (a.cu_seqlens_q, a.cu_seqlens_k, a.seqused_k) == _copies(paged=True) and a.block_table == _address(9)
    c = _check_arguments(check, paged=True)
    assert (c.block_table, c.block_table_stride, 1 << c.page_size_log2, c.num_pages) == (
        _address(9), MAX_K // page_size + 1, page_size, 64)
    assert (a.block_table_stride, 1 << a.page_size_log2) == (MAX_K // page_size + 1, page_size)
    assert (a.k_page_stride, a.v_page_stride) == (page_size * HEADS_KV * DIM * 2, 2 * page_size * HEADS_KV * DIM * 2)
    assert (a.k_stride_batch, a.v_stride_batch, a.lse_rows) == (0, 0, TOTAL_Q)


def test_paged_block_descales_one_per_page(probe):
    """fp8 per-block descales of a paged k and v: exponents (num_pages, heads_kv), the page the row of one block; q's
    per sequence as without pages. Blocks other than the page are refused."""
    status, error, _, kernarg, _ = probe("paged", "64", "64")
    assert status == 0, error
    a = kernargs.FwdKernarg.from_buffer_copy(kernarg)
    assert (a.k_exponents, a.v_exponents, a.k_block_tokens, a.v_block_tokens) == (_address(10),) * 2 + (64, 64)
    assert (a.k_blocks_per_head, a.v_blocks_per_head, a.q_blocks_per_head) == (1, 1, -(-MAX_Q // 64))
    status, error, *_ = probe("paged", "64", "128")
    assert status == 1 and "one exponent per page and kv head" in error, error  # INVALID_ARGUMENT: the header's rule


def test_pages_of_other_sizes_are_refused(probe):
    status, error, *_ = probe("paged", "48")
    assert status == 1, error  # FLASHPREFILL_ERROR_INVALID_ARGUMENT: the header asks for a power of two
    assert "power of two" in error
