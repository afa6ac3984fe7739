"""The gfx950 check of a varlen call's device arrays (asm/gfx950/varlen_check.s) in the functional emulator, with the
workspace laid out and the kernel arguments packed as hip/varlen_check_launch.c does (tests/test_gfx950_varlen_launch.py
holds the library to the same layout): what the emulated forward tests run before the forward kernel, as the library
does, and what tests/test_gfx950_varlen_check_emulated.py checks."""
import pathlib

import numpy as np

import kernargs

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER_BYTES = 16
WORKSPACE_POISON = 0x55  # every workspace byte before the check; the check writes what it uses


def copies_layout(workspace, batch, paged):
    """Addresses of the copies of cu_seqlens_q, cu_seqlens_k (0 with pages) and the key counts in the workspace."""
    offsets = 4 * (batch + 1)
    return workspace + HEADER_BYTES, 0 if paged else workspace + HEADER_BYTES + offsets, \
        workspace + HEADER_BYTES + 2 * offsets


def run(memory, seed, *, cu_q, cu_k, seqused_k, block_table, out, lse, out_stride_seq, out_stride_head, batch,
        total_q, total_k, max_q, max_k, block_table_stride=0, page_size_log2=0, num_pages=0, heads_q, root=ROOT):
    """Allocates a poisoned workspace in `memory` and runs the check on the arrays at the given addresses (0: none).
    Returns (header address, (copy_q, copy_k, copy_used) addresses). root: the tree whose build/gfx950 holds the
    code object (tools/gfx950_mutate.py points the calling test module's ROOT at a mutant's)."""
    from gfx950_emu import load_code_object, run_kernel
    assert kernargs.offsets(kernargs.VarlenCheckKernarg) == kernargs.assembly_offsets(kernargs.VARLEN_CHECK_CONTRACT)
    paged = block_table != 0
    workspace = memory.alloc_array(np.full(HEADER_BYTES + 4 * (3 * batch + 2), WORKSPACE_POISON, np.uint8))
    copies = copies_layout(workspace, batch, paged)
    a = kernargs.VarlenCheckKernarg(
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, seqused_k=seqused_k, block_table=block_table, header=workspace,
        copy_q=copies[0], copy_k=copies[1], copy_used=copies[2], out=out, lse=lse, out_stride_seq=out_stride_seq,
        out_stride_head=out_stride_head, batch=batch, total_q=total_q, total_k=total_k, max_seqlen_q=max_q,
        max_seqlen_k=max_k, block_table_stride=block_table_stride, page_size_log2=page_size_log2,
        num_pages=num_pages, heads_q=heads_q)
    co = load_code_object(str(pathlib.Path(root) / "build" / "gfx950" / "varlen_check.co"))
    run_kernel(co, "varlen_check", grid=(1, 1, 1), workgroup_size=64, kernarg=bytes(a), memory=memory, seed=seed)
    return workspace, copies


def header(memory, address):
    """The verdict {error, sequence, value, tiles} the check wrote."""
    return tuple(int(x) for x in memory.read(address, np.int32, (4,)))
