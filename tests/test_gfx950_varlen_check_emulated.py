"""The gfx950 check of a varlen or paged call's device arrays (asm/gfx950/varlen_check.s) in the functional emulator:
the verdict it writes to the workspace header against the rule the Hopper plan kernel follows (cuda/varlen_plan.cu:
per sequence cu_seqlens_q, the query length, cu_seqlens_k, seqused_k, the key length, first failure first; then the
page ids of the sequences before the first at fault; the lowest (sequence, error) wins), the checked copies the
forward kernel reads (the arrays as given, or all zero after a fault), and on a fault every element of out and lse
NaN while the padding beside them keeps its poison. Batches of more than one wave's 64 sequences and sequences of
more than 64 pages cross the kernel's steps. Each run takes its input seed as the emulator's schedule seed."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import gfx950_varlen_check as varlen_check
import markers
from test_gfx950_kernel_emulated import BF16_NAN, ROOT
from test_gfx950_varlen_emulated import HEADS_KV, RNG, _layout, _run

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
from varlen_verdict import BLOCK_TABLE, CU_K, CU_Q, OK, SEQLEN_K, SEQLEN_Q, SEQUSED_K, model_verdict  # noqa: E402

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
HEADS_Q, DIM_V, OUT_PAD = 2, 128, 8   # out rows (total_q + 2, heads_q, 128 + OUT_PAD): the padding must stay
SENTINEL_BITS = 0x3F80                # bf16 1.0: out's poison, so that NaN proves an element written


def _varlen(batch, rng):
    """A valid varlen batch of `batch` sequences (some empty), with seqused_k."""
    lengths_q, lengths_k = rng.integers(0, 9, batch), rng.integers(0, 12, batch)
    used = (lengths_k * rng.uniform(0, 1, batch)).astype(np.int32)
    cu_q, cu_k = (np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lengths_q, lengths_k))
    return {"cu_q": cu_q, "cu_k": cu_k, "used": used, "table": None, "total_q": int(cu_q[-1]) + 2,
            "total_k": int(cu_k[-1]) + 3, "max_q": int(lengths_q.max()), "max_k": int(lengths_k.max()), "bts": 0,
            "page_log2": 0, "num_pages": 0}


def _paged(batch, rng, page_log2=4, pages_per_sequence=3):
    """A valid paged batch: seqused_k within each sequence's table row, page ids permuted over the cache."""
    a = _varlen(batch, rng)
    bts, num_pages = pages_per_sequence, batch * pages_per_sequence + 5
    a.update(cu_k=None, total_k=0, bts=bts, page_log2=page_log2, num_pages=num_pages,
             used=rng.integers(0, bts << page_log2, batch).astype(np.int32),
             table=rng.permutation(num_pages)[:batch * bts].reshape(batch, bts).astype(np.int32))
    a["max_k"] = int(a["used"].max())
    return a


def _check(a, seed):
    """The check on a's arrays: (header, copies of cu_q, cu_k, used, out bits, lse) read back."""
    from gfx950_emu import GlobalMemory
    mem = GlobalMemory()
    batch, total_q = len(a["cu_q"]) - 1, a["total_q"]
    out_shape, lse_shape = (total_q + 2, HEADS_Q, DIM_V + OUT_PAD), (HEADS_Q * total_q + 3,)
    out = mem.alloc_array(np.full(out_shape, SENTINEL_BITS, np.uint16))
    lse = mem.alloc_array(np.full(lse_shape, 1.0, np.float32))
    at = {n: 0 if a[n] is None else mem.alloc_array(np.ascontiguousarray(a[n], np.int32))
          for n in ("cu_q", "cu_k", "used", "table")}
    workspace, copies = varlen_check.run(
        mem, seed, cu_q=at["cu_q"], cu_k=at["cu_k"], seqused_k=at["used"], block_table=at["table"], out=out, lse=lse,
        out_stride_seq=HEADS_Q * (DIM_V + OUT_PAD) * 2, out_stride_head=(DIM_V + OUT_PAD) * 2, batch=batch,
        total_q=total_q, total_k=a["total_k"], max_q=a["max_q"], max_k=a["max_k"], block_table_stride=a["bts"],
        page_size_log2=a["page_log2"], num_pages=a["num_pages"], heads_q=HEADS_Q, root=ROOT)
    read = lambda address, n: None if address == 0 else mem.read(address, np.int32, (n,))  # noqa: E731
    return (varlen_check.header(mem, workspace), read(copies[0], batch + 1), read(copies[1], batch + 1),
            read(copies[2], batch), mem.read(out, np.uint16, out_shape), mem.read(lse, np.float32, lse_shape))


def _expect(a, seed):
    verdict = model_verdict(a)
    header, copy_q, copy_k, copy_used, out, lse = _check(a, seed)
    assert header == verdict, f"seed {seed}"
    pad_kept = (out[..., DIM_V:] == SENTINEL_BITS).all() and (out[-2:] == SENTINEL_BITS).all() and \
        (lse[HEADS_Q * a["total_q"]:] == 1.0).all()
    assert pad_kept, f"seed {seed}: the check wrote past out's or lse's elements"
    if verdict[0] == OK:
        np.testing.assert_array_equal(copy_q, a["cu_q"])
        if a["cu_k"] is not None:
            np.testing.assert_array_equal(copy_k, a["cu_k"])
        np.testing.assert_array_equal(copy_used, a["used"] if a["used"] is not None else np.diff(a["cu_k"]))
        assert (out[:-2, :, :DIM_V] == SENTINEL_BITS).all() and (lse[:-3] == 1.0).all(), f"seed {seed}"
    else:
        assert not copy_q.any() and not copy_used.any() and (copy_k is None or not copy_k.any()), f"seed {seed}"
        assert (out[:-2, :, :DIM_V] == BF16_NAN).all(), f"seed {seed}: out not all NaN"
        assert np.isnan(lse[:-3]).all(), f"seed {seed}: lse not all NaN"
    return verdict


# name: (builder of the arrays, mutation, the error expected)
def _set(name, index, value):
    def mutate(a):
        a[name] = a[name].copy()
        a[name][index] = value
    return mutate


VARLEN_FAULTS = {
    "valid": (lambda a: None, OK),
    "cu_seqlens_q negative": (_set("cu_q", 0, -1), CU_Q),
    "cu_seqlens_q decreasing": (_set("cu_q", 2, 0), CU_Q),
    "cu_seqlens_q past total_q": (lambda a: a.update(total_q=int(a["cu_q"][-1]) - 1), CU_Q),
    "a query length above seqlen_q": (lambda a: a.update(max_q=0), SEQLEN_Q),
    "cu_seqlens_k decreasing": (_set("cu_k", 3, -5), CU_K),
    "cu_seqlens_k past total_k": (lambda a: a.update(total_k=1), CU_K),
    "seqused_k negative": (_set("used", 1, -1), SEQUSED_K),
    "seqused_k past its rows": (_set("used", 2, 10_000), SEQUSED_K),
    "a key length above seqlen_k": (lambda a: a.update(max_k=0), SEQLEN_K),
    "without seqused_k: a key length above seqlen_k": (lambda a: a.update(used=None, max_k=0), SEQLEN_K),
}


def _verdict_case(build, fault):
    """The arrays of build(5 sequences) with every sequence non-empty in q (and k), then mutated: the verdict must be
    the model's and the fault the case names."""
    seed = int(RNG.integers(1 << 31))
    mutate, error = fault
    a = build(5, np.random.default_rng(seed))
    for cu, total, longest in (("cu_q", "total_q", "max_q"), ("cu_k", "total_k", "max_k")):
        if a[cu] is not None:  # the faults above land where they are put
            a[cu][1:] += 1
            a[total] += 1
            a[longest] = max(a[longest], int(np.diff(a[cu]).max()))
    mutate(a)
    assert _expect(a, seed)[0] == error, f"seed {seed}: the case does not make the fault it names"


@pytest.mark.parametrize("fault", VARLEN_FAULTS.values(), ids=VARLEN_FAULTS.keys())
def test_varlen_verdicts(fault):
    _verdict_case(_varlen, fault)


def _bad_page(b, j, value):
    def mutate(a):
        a["used"] = a["used"].copy()
        a["used"][b] = max(int(a["used"][b]), (j + 1) << a["page_log2"])  # page j is one the sequence reads
        a["max_k"] = int(a["used"].max())
        a["table"] = a["table"].copy()
        a["table"][b, j] = value
    return mutate


PAGED_FAULTS = {
    "valid": (lambda a: None, OK),
    "a page id past num_pages": (_bad_page(2, 1, 10_000), BLOCK_TABLE),
    "a negative page id": (_bad_page(0, 2, -3), BLOCK_TABLE),
    "a bad page past the sequence's keys is not read": (lambda a: (_set("used", 1, 0)(a),
                                                                     _set("table", (1, 2), -1)(a)), OK),
    "a page fault before a sequence fault wins": (lambda a: (_bad_page(1, 0, -1)(a), _set("cu_q", 3, 0)(a)),
                                                  BLOCK_TABLE),
    "a sequence fault before a page fault wins": (lambda a: (_bad_page(3, 0, -1)(a), _set("used", 1, -1)(a)),
                                                  SEQUSED_K),
}


@pytest.mark.parametrize("fault", PAGED_FAULTS.values(), ids=PAGED_FAULTS.keys())
def test_paged_verdicts(fault):
    _verdict_case(_paged, fault)


def test_steps_of_the_wave():
    """70 sequences (two steps of 64) with the fault in the second; sequences of up to 70 pages of 16 keys (rounds of
    kPagesAtOnce loads) with the bad one late in a sequence, alone or beside an earlier one of a later sequence."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    a = _varlen(70, rng)
    a["used"] = a["used"].copy()
    a["used"][66] = 10_000
    assert _expect(a, seed)[:2] == (SEQUSED_K, 66)
    a = _paged(3, rng, page_log2=4, pages_per_sequence=70)
    _bad_page(1, 65, a["num_pages"])(a)
    assert _expect(a, seed) == (BLOCK_TABLE, 1, a["num_pages"], 0)
    a["table"][1, 65] = 0
    assert _expect(a, seed)[0] == OK
    # a lane's bad page found in a later round of loads than a higher lane's still wins
    _bad_page(1, 66, -7)(a)
    _bad_page(2, 1, a["num_pages"] + 1)(a)
    assert _expect(a, seed) == (BLOCK_TABLE, 1, -7, 0)


def test_forward_reads_nothing_after_a_fault():
    """The library's path in the emulator: the check finds cu_seqlens_k decreasing, so the forward kernel, reading the
    zeroed copies, writes nothing: out and lse stay the check's NaN."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    cu_q, cu_k, _ = _layout(False)
    bad_k = cu_k.copy()
    bad_k[2] = bad_k[1] - 1
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    q, k, v = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
               for shape in ((total_q, HEADS_Q, DIM_V), (total_k, HEADS_KV, DIM_V), (total_k, HEADS_KV, DIM_V)))
    out_bits, lse = _run("fwd_bf16_hd128", q, k, v, cu_q, bad_k, None, True, seed,
                         verdict=(CU_K, 1, int(bad_k[1]), 0))  # sequence 1's keys end before they start
    assert (out_bits == BF16_NAN).all() and np.isnan(lse).all()
