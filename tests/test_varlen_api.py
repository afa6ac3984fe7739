"""attention_varlen, supports_varlen and varlen_workspace_bytes on paths that need no GPU: DeviceArray stand-ins
(validation never reads the data), the params Python builds, the checks only Python can make, and the library's
answers where it has the varlen validation (flashprefill_workspace_bytes)."""
import types

import numpy as np
import pytest

import flashprefill as fp
from flashprefill import _lib, varlen
from flashprefill._arrays import DeviceArray
from flashprefill._params import DescaleKind

BASE = 0x7F0000000000
BATCH, TOTAL_Q, TOTAL_K, HEADS_Q, HEADS_KV = 3, 300, 500, 8, 2
NUM_PAGES, PAGE_SIZE, MAX_PAGES = 40, 64, 6


def fake(shape, dtype, slot, strides=None):
    """A device array stand-in at its own 4 GiB slot of addresses."""
    return DeviceArray(BASE + (slot << 32), shape, dtype, strides=strides)


def call(dtype="bfloat16", paged=False, dim_qk=128, dim_v=128, **changes):
    """The arguments of a valid call (positional ones by name), with `changes` applied."""
    kv_rows = (NUM_PAGES, PAGE_SIZE) if paged else (TOTAL_K,)
    args = dict(q=fake((TOTAL_Q, HEADS_Q, dim_qk), dtype, 0), k=fake((*kv_rows, HEADS_KV, dim_qk), dtype, 1),
                v=fake((*kv_rows, HEADS_KV, dim_v), dtype, 2), cu_seqlens_q=fake((BATCH + 1,), "int32", 3),
                cu_seqlens_k=None if paged else fake((BATCH + 1,), "int32", 4), max_seqlen_q=200, max_seqlen_k=300)
    if paged:
        args.update(seqused_k=fake((BATCH,), "int32", 5), block_table=fake((BATCH, MAX_PAGES), "int32", 6))
    args.update(changes)
    return args


def params_of(args):
    """The flashprefill_params attention_varlen would pass (but for out, lse and the workspace)."""
    keep = []
    names = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")
    batch = varlen._adapt_batch(*(args[n] for n in names), args.get("seqused_k"), args.get("block_table"), None,
                                keep)
    options = varlen._Options(args.get("causal", True), None, args.get("q_descale"), args.get("k_descale"),
                              args.get("v_descale"), "default", "default")
    return varlen._params_of(batch, (1 << 12, (HEADS_Q * 128, 128, 1)), None, options, None, keep)


def test_varlen_params():
    p = params_of(call(seqused_k=fake((BATCH,), "int32", 5)))
    assert (p.batch, p.seqlen_q, p.seqlen_k, p.total_q, p.total_k) == (BATCH, 200, 300, TOTAL_Q, TOTAL_K)
    assert (p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_k) == (BASE + (3 << 32), BASE + (4 << 32), BASE + (5 << 32))
    assert (p.block_table, p.block_table_stride, p.page_size, p.num_pages) == (None, 0, 0, 0)
    assert (p.q_stride_batch, p.q_stride_seq, p.q_stride_head, p.q_stride_dim) == (0, HEADS_Q * 128, 128, 1)
    assert (p.k_stride_batch, p.k_stride_seq, p.v_stride_batch, p.out_stride_batch) == (0, HEADS_KV * 128, 0, 0)
    assert (p.workspace, p.workspace_bytes) == (None, 0)


def test_paged_params():
    p = params_of(call(paged=True, dim_qk=192))
    assert (p.batch, p.total_q, p.total_k, p.cu_seqlens_k) == (BATCH, TOTAL_Q, 0, None)
    assert (p.block_table, p.block_table_stride, p.page_size, p.num_pages) == (BASE + (6 << 32), MAX_PAGES,
                                                                               PAGE_SIZE, NUM_PAGES)
    assert (p.k_stride_batch, p.k_stride_seq, p.k_stride_head) == (PAGE_SIZE * HEADS_KV * 192, HEADS_KV * 192, 192)
    assert (p.v_stride_batch, p.dim_qk, p.dim_v) == (PAGE_SIZE * HEADS_KV * 128, 192, 128)


def test_descales_index_sequences_and_pages():
    blocks_q, blocks_k = -(-200 // 128), -(-300 // 128)
    p = params_of(call("float8_e4m3fn", q_descale=fp.BlockScales(fake((BATCH, HEADS_Q, blocks_q), "int8", 7), 128),
                       k_descale=fp.BlockScales(fake((BATCH, HEADS_KV, blocks_k), "int8", 8), 128),
                       v_descale=fake((BATCH, HEADS_KV), "float32", 9)))
    assert (p.q_descale.kind, p.k_descale.kind, p.v_descale.kind) == (DescaleKind.PER_BLOCK, DescaleKind.PER_BLOCK,
                                                                     DescaleKind.PER_HEAD)
    p = params_of(call("float8_e4m3fn", paged=True, q_descale=fake((), "float32", 7),
                       k_descale=fp.BlockScales(fake((NUM_PAGES, HEADS_KV), "int8", 8), PAGE_SIZE),
                       v_descale=fake((BATCH, HEADS_KV), "float32", 9)))
    assert (p.q_descale.kind, p.k_descale.kind, p.k_descale.block_tokens, p.v_descale.kind) == (
        DescaleKind.PER_TENSOR, DescaleKind.PER_BLOCK, PAGE_SIZE, DescaleKind.PER_HEAD)


class Int64Array:
    """A device array of int64 (which DeviceArray cannot name), known by its __cuda_array_interface__."""

    def __init__(self, shape):
        self.dtype = np.dtype(np.int64)
        self.device = types.SimpleNamespace(id=0)
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": "<i8", "data": (BASE, False)}


PAGED = dict(paged=True)
BAD_CALLS = [
    (dict(q=fake((1, TOTAL_Q, HEADS_Q, 128), "bfloat16", 0)), ValueError, r"q must be 3-d \(total_q, heads_q, dim_qk\)"),
    (dict(k=fake((1, TOTAL_K, HEADS_KV, 128), "bfloat16", 1)), ValueError,
     r"k must be 3-d \(total_k, heads_kv, dim\) without block_table"),
    (dict(PAGED, v=fake((TOTAL_K, HEADS_KV, 128), "bfloat16", 2)), ValueError,
     r"v must be 4-d \(num_pages, page_size, heads_kv, dim\) with block_table"),
    (dict(k=fake((TOTAL_K + 1, HEADS_KV, 128), "bfloat16", 1)), ValueError, "shapes do not match"),
    (dict(k=fake((TOTAL_K, HEADS_KV, 64), "bfloat16", 1)), ValueError, "shapes do not match"),
    (dict(PAGED, k=fake((NUM_PAGES, 32, HEADS_KV, 128), "bfloat16", 1)), ValueError, "shapes do not match"),
    (dict(v=fake((TOTAL_K, HEADS_KV, 128), "float8_e4m3fn", 2)), TypeError, "all bfloat16 or all float8_e4m3fn"),
    (dict(v=fp.PreparedV(fake((1, HEADS_KV, 128, 512), "float8_e4m3fn", 2), 500)), TypeError,
     "attention_varlen takes v as an array"),
    (dict(cu_seqlens_q=np.zeros(BATCH + 1, np.int32)), TypeError, "cu_seqlens_q is a host array"),
    (dict(cu_seqlens_q=Int64Array((BATCH + 1,))), TypeError, "cu_seqlens_q must be an int32 device array"),
    (dict(cu_seqlens_k=fake((BATCH + 1,), "float32", 4)), TypeError, "cu_seqlens_k must be int32, got float32"),
    (dict(cu_seqlens_q=fake((BATCH + 1, 1), "int32", 3)), ValueError, r"cu_seqlens_q must be 1-d \(batch \+ 1,\)"),
    (dict(cu_seqlens_q=fake((1,), "int32", 3)), ValueError, "with batch >= 1"),
    (dict(cu_seqlens_q=fake((BATCH + 1,), "int32", 3, strides=(2,))), ValueError, "cu_seqlens_q must be contiguous"),
    (dict(cu_seqlens_k=fake((BATCH + 2,), "int32", 4)), ValueError,
     r"cu_seqlens_k must have shape \(batch \+ 1,\), as cu_seqlens_q = \(4,\), got \(5,\)"),
    (dict(cu_seqlens_k=None), ValueError, "cu_seqlens_k is required without block_table"),
    (dict(seqused_k=fake((BATCH + 1,), "int32", 5)), ValueError, r"seqused_k must have shape \(batch,\) = \(3,\)"),
    (dict(PAGED, cu_seqlens_k=fake((BATCH + 1,), "int32", 4)), ValueError,
     "cu_seqlens_k must be None with block_table"),
    (dict(PAGED, seqused_k=None), ValueError, "seqused_k is required with block_table"),
    (dict(PAGED, block_table=fake((BATCH + 1, MAX_PAGES), "int32", 6)), ValueError,
     r"block_table must have shape \(batch, max_pages\) = \(3, >= 1\), got \(4, 6\)"),
    (dict(PAGED, block_table=fake((BATCH * MAX_PAGES,), "int32", 6)), ValueError, "block_table must have shape"),
    (dict(PAGED, block_table=fake((BATCH, MAX_PAGES), "int32", 6, strides=(8, 1))), ValueError,
     "block_table must be contiguous"),
    (dict(PAGED, seqused_k=fake((BATCH,), "int8", 5)), TypeError, "seqused_k must be int32, got int8"),
    (dict(max_seqlen_q=200.0), TypeError, "max_seqlen_q must be an int, got 200.0"),
    (dict(max_seqlen_k=True), TypeError, "max_seqlen_k must be an int, got True"),
    (dict(max_seqlen_k=-1), ValueError, r"max_seqlen_k must be in \[0, 2\^31 - 1\], got -1"),
    (dict(max_seqlen_q=2**31), ValueError, r"max_seqlen_q must be in \[0, 2\^31 - 1\]"),
    (dict(causal="yes"), ValueError, "causal must be True or False"),
    (dict(probabilities="e4m3"), ValueError, "probabilities must be one of"),
    (dict(out=fake((TOTAL_Q, HEADS_Q, 64), "bfloat16", 7)), ValueError,
     r"out must be bfloat16 of shape \(total_q, heads_q, dim_v\) = \(300, 8, 128\), got bfloat16 \(300, 8, 64\)"),
    (dict(out=fake((1, TOTAL_Q, HEADS_Q, 128), "bfloat16", 7)), ValueError, r"out must be bfloat16 of shape"),
]


def bad_call(changes):
    changes = dict(changes)
    return call(paged=changes.pop("paged", False), **changes)


@pytest.mark.parametrize("changes, error, message", BAD_CALLS, ids=[m for _, _, m in BAD_CALLS])
def test_bad_calls(changes, error, message):
    """The same error from supports_varlen as from attention_varlen, which checks before any work of the library."""
    with pytest.raises(error, match=message):
        fp.supports_varlen(**bad_call(changes))


FP8_BAD_DESCALES = [
    (dict(q_descale=fp.BlockScales(fake((BATCH, HEADS_Q, 1), "int8", 7), 128)), ValueError,
     r"q_descale.exponents must be int8 of shape \(batch, heads, ceil\(seqlen / block_tokens\)\) = \(3, 8, 2\)"),
    (dict(k_descale=fake((BATCH + 1, HEADS_KV), "float32", 7)), ValueError,
     r"k_descale must have shape \(\) or \(1,\) \(per tensor\) or \(batch, heads_kv\) = \(3, 2\)"),
    (dict(PAGED, k_descale=fp.BlockScales(fake((NUM_PAGES, HEADS_KV), "int8", 7), 128)), ValueError,
     "k_descale of a paged cache takes one exponent per page: block_tokens must be page_size = 64, got 128"),
    (dict(PAGED, v_descale=fp.BlockScales(fake((BATCH, HEADS_KV, 5), "int8", 7), PAGE_SIZE)), ValueError,
     r"v_descale.exponents must be int8 of shape \(num_pages, heads_kv\) = \(40, 2\), got int8 \(3, 2, 5\)"),
]


@pytest.mark.parametrize("changes, error, message", FP8_BAD_DESCALES, ids=[m[:40] for _, _, m in FP8_BAD_DESCALES])
def test_bad_descales(changes, error, message):
    with pytest.raises(error, match=message):
        fp.supports_varlen(**bad_call(dict(changes, dtype="float8_e4m3fn")))


@pytest.mark.parametrize("check", [2, "yes", None])
def test_check_must_be_a_bool(check):
    """Refused before any library or device work."""
    with pytest.raises(ValueError, match="check must be True or False"):
        fp.attention_varlen(**call(), check=check)


# ---------------------------------------------------------------------------------------------------------
# Through the library's varlen validation

def library_with_varlen():
    return _lib.lib()


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("paged", [False, True], ids=["varlen", "paged"])
def test_valid_calls(dtype, paged):
    library_with_varlen()
    args = call(dtype, paged)
    assert fp.supports_varlen(**args) in (True, False)
    assert fp.varlen_workspace_bytes(**args) > 0


def test_workspace_must_hold_the_bytes():
    library_with_varlen()
    args = call()
    needed = fp.varlen_workspace_bytes(**args)
    assert fp.supports_varlen(**args, workspace=fake((needed,), "uint8", 8)) in (True, False)
    for workspace in (fake((needed - 1,), "uint8", 8), fake((needed,), "int8", 8), fake((1, needed), "uint8", 8)):
        with pytest.raises(ValueError, match=f"workspace must be a contiguous 1-d uint8 device array of at least "
                                             fr"varlen_workspace_bytes\(\) = {needed} bytes"):
            fp.supports_varlen(**args, workspace=workspace)


@pytest.mark.parametrize("changes, message", [
    (dict(PAGED, k=fake((NUM_PAGES, 24, HEADS_KV, 128), "bfloat16", 1),
          v=fake((NUM_PAGES, 24, HEADS_KV, 128), "bfloat16", 2)), "page_size"),
    (dict(PAGED, block_table=fake((BATCH, 2), "int32", 6)), "block_table"),
    (dict(softmax_scale=float("nan")), "softmax_scale must be finite and > 0"),
    (dict(q_descale=fake((), "float32", 7)), "q_descale: bf16 inputs take no descale"),
], ids=["page_size_not_16", "block_table_short", "softmax_scale", "bf16_descale"])
def test_library_refuses(changes, message):
    """Calls only the library can refuse (a page size of 24 tokens; 2 pages of 64 cannot hold max_seqlen_k = 300):
    supports_varlen and varlen_workspace_bytes raise its INVALID_ARGUMENT."""
    library_with_varlen()
    for ask in (fp.supports_varlen, fp.varlen_workspace_bytes):
        with pytest.raises(fp.Error, match=message) as info:
            ask(**bad_call(changes))
        assert info.value.status == fp.Status.ERROR_INVALID_ARGUMENT


def test_a_library_without_varlen_supports_none_of_it(monkeypatch):
    """supports_varlen: False (after Python's own checks); the other two: Error NOT_SUPPORTED, naming what is missing."""
    monkeypatch.setattr(_lib, "lib", lambda backend="cuda": types.SimpleNamespace(
        flashprefill_version=lambda: b"0.9.0", flashprefill_supports=None))
    assert fp.supports_varlen(**call()) is False
    with pytest.raises(ValueError, match="cu_seqlens_k is required"):
        fp.supports_varlen(**call(cu_seqlens_k=None))
    with pytest.raises(fp.Error, match=r"version 0.9.0\) has no flashprefill_workspace_bytes") as info:
        fp.varlen_workspace_bytes(**call())
    assert info.value.status == fp.Status.ERROR_NOT_SUPPORTED


def test_workspace_error_reaches_the_library():
    """check=True's read-back (flashprefill_workspace_error through ctypes): the library's own status and message."""
    library_with_varlen()
    with pytest.raises(fp.Error, match="workspace is NULL") as info:
        varlen._raise_flagged(_lib.lib(), None)
    assert info.value.status == fp.Status.ERROR_INVALID_ARGUMENT


@pytest.mark.parametrize("paged", [False, True], ids=["varlen", "paged"])
def test_bf16_q_against_fp8_k_v(paged):
    """A bfloat16 q with float8 k and v: q_dtype BF16, the rotation's signs passed on; the library takes it at dim_qk
    128 (Hopper), not at 192/128, and not with a q_descale."""
    args = call("float8_e4m3fn", paged, q=fake((TOTAL_Q, HEADS_Q, 128), "bfloat16", 0))
    keep = []
    names = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")
    signs = fake((128,), "float32", 7)
    batch = varlen._adapt_batch(*(args[n] for n in names), args.get("seqused_k"), args.get("block_table"), None,
                                keep, signs)
    assert batch.fields["q_dtype"] == fp.DType.BF16 and batch.fields["q_rotation_signs"] == signs.ptr
    assert fp.supports_varlen(**args, q_rotation_signs=signs)
    args192 = call("float8_e4m3fn", paged, dim_qk=192, q=fake((TOTAL_Q, HEADS_Q, 192), "bfloat16", 0))
    assert not fp.supports_varlen(**args192)
    with pytest.raises(fp.Error, match="q_descale must be NONE with a bf16 q"):
        fp.supports_varlen(**args, q_descale=fake((1,), "float32", 8))
    with pytest.raises(ValueError, match="q_rotation_signs is for a bfloat16 q"):
        fp.supports_varlen(**call("float8_e4m3fn", paged), q_rotation_signs=signs)
