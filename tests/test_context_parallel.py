"""Context parallelism on the host (flashprefill.context_parallel): the sharded, ring-passed and merged attention of
one prompt against the unsharded float64 reference, over world sizes 2, 3, 4 and 8, lengths that divide into the
2·world chunks and lengths that do not (fewer tokens than chunks, one token), GQA heads; the zig-zag balance of
causal work; the ring plan covering every pair (i, j) with j <= i exactly once and no other; the fold order of the
merges; the merge of a part that saw no key being exact; ring_forward with the shards passed between threads."""
import itertools
import queue
import threading

import ml_dtypes
import numpy as np
import pytest

from flashprefill import context_parallel as cp
from flashprefill.reference import attention_reference, error_report, relative_l2

WORLDS = [2, 3, 4, 8]
HEADS = [(4, 2), (3, 3)]  # (heads_q, heads_kv): GQA, and one query head per kv head
DIMS = (32, 16)  # (dim_qk, dim_v): unequal, so that k and v cannot be swapped unseen
TOLERANCE = 1e-12  # float64 merges of float64 parts: rounding only


def _lengths(world):
    """Lengths that divide into the chunks, that leave a remainder, fewer tokens than chunks, one token."""
    chunks = 2 * world
    return {"even": chunks * 40, "remainder": chunks * 23 + chunks - 1, "fewer than chunks": world + 1, "one": 1}


CASES = [(world, name, seqlen) for world in WORLDS for name, seqlen in _lengths(world).items()]


def _inputs(rng, seqlen, heads):
    heads_q, heads_kv = heads
    dim_qk, dim_v = DIMS
    return (rng.standard_normal((seqlen, heads_q, dim_qk)), rng.standard_normal((seqlen, heads_kv, dim_qk)),
            rng.standard_normal((seqlen, heads_kv, dim_v)))


@pytest.mark.parametrize("heads", HEADS, ids=lambda h: "h{}_{}".format(*h))
@pytest.mark.parametrize("world, name, seqlen", CASES, ids=[f"w{w}-{n}" for w, n, _ in CASES])
def test_matches_the_unsharded_reference(rng, world, name, seqlen, heads):
    q, k, v = _inputs(rng, seqlen, heads)
    out, lse = cp.run_context_parallel(q, k, v, world, attention=cp.reference_attention, merge=cp.reference_merge)
    ref, ref_lse = attention_reference(q[None], k[None], v[None], causal=True, return_lse=True)
    assert out.shape == ref.shape[1:] and lse.shape == ref_lse.shape[1:], f"shapes {out.shape}, {lse.shape}"
    assert relative_l2(out, ref[0]) <= TOLERANCE, error_report(out, ref[0])
    assert relative_l2(lse, ref_lse[0]) <= TOLERANCE, error_report(lse, ref_lse[0])


def _pairs(causal, rows_q, rows_k):
    """Pairs (query rows, key rows) a call computes: bottom-right causal (j <= i + n_k - n_q, local) or all."""
    local_i, local_j = np.meshgrid(np.arange(len(rows_q)), np.arange(len(rows_k)), indexing="ij")
    seen = local_j <= local_i + len(rows_k) - len(rows_q) if causal else np.ones(local_i.shape, bool)
    return rows_q[local_i[seen]], rows_k[local_j[seen]]


COVERAGE = [(world, seqlen) for world in range(1, 10) for seqlen in (1, 2, world, 2 * world + 1, 6 * world,
                                                                     6 * world + 5, 101)]


@pytest.mark.parametrize("world, seqlen", COVERAGE)
def test_ring_plan_covers_each_causal_pair_once(world, seqlen):
    """The rows the runner slices (shards of the token indices): every (i, j) with j <= i computed exactly once over
    all ranks and steps, nothing with j > i; each piece's keys are its key chunks' rows, a prefix of the held shard,
    and causal exactly where its key chunks end with its query chunk."""
    tokens = np.arange(seqlen)
    bounds = cp.chunk_bounds(seqlen, world)
    rows = lambda chunk: tokens[bounds[chunk]:bounds[chunk + 1]]
    count = np.zeros((seqlen, seqlen), np.int64)
    for rank in range(world):
        q_rows = cp.shard(tokens, world, rank)
        for step, pieces in enumerate(cp.rank_plan(seqlen, world, rank)):
            k_rows = cp.shard(tokens, world, cp.source_rank(rank, step, world))
            for piece in pieces:
                assert (piece.rank, piece.step) == (rank, step)
                assert np.array_equal(q_rows[piece.query_rows], rows(piece.query_chunk))
                assert np.array_equal(k_rows[:piece.key_rows], np.concatenate([rows(c) for c in piece.key_chunks]))
                assert piece.causal == (piece.key_chunks[-1] == piece.query_chunk)
                np.add.at(count, _pairs(piece.causal, q_rows[piece.query_rows], k_rows[:piece.key_rows]), 1)
    expected = np.tril(np.ones((seqlen, seqlen), np.int64))
    wrong = np.argwhere(count != expected)
    assert not len(wrong), f"pairs (i, j) computed the wrong number of times, first {wrong[:5].tolist()}: " \
                           f"{count[tuple(wrong[0])]} times"


@pytest.mark.parametrize("world", range(1, 10))
def test_blocks_classified_by_their_pairs(world):
    """Chunks of at least 2 rows: a block is DIAGONAL where some but not all of its pairs have j <= i, VISIBLE where
    all do, MASKED where none does; every rank meets every key chunk once over the ring."""
    seqlen = 6 * world + 3
    bounds = cp.chunk_bounds(seqlen, world)
    for rank, step in itertools.product(range(world), range(world)):
        for block in cp.blocks(rank, step, world):
            i = np.arange(bounds[block.query_chunk], bounds[block.query_chunk + 1])[:, None]
            j = np.arange(bounds[block.key_chunk], bounds[block.key_chunk + 1])[None, :]
            seen = (j <= i).mean()
            expected = cp.Visibility.VISIBLE if seen == 1 else cp.Visibility.MASKED if seen == 0 else \
                cp.Visibility.DIAGONAL
            assert block.visibility is expected, f"rank {rank} step {step}: {block}, {seen:.2f} of its pairs seen"
    for rank in range(world):
        met = sorted(b.key_chunk for step in range(world) for b in cp.blocks(rank, step, world)[:2])
        assert met == list(range(2 * world)), f"rank {rank} met key chunks {met}"


@pytest.mark.parametrize("world", range(1, 10))
def test_source_rank_is_the_ring_pass(world):
    """Passing each held shard to rank r + 1 once a step leaves rank r holding source_rank(r, step)'s."""
    held = list(range(world))
    for step in range(world):
        assert held == [cp.source_rank(r, step, world) for r in range(world)], f"step {step}"
        held = [held[(r - 1) % world] for r in range(world)]


def _piece_pairs(piece):
    n_q, n_k = piece.query_rows.stop - piece.query_rows.start, piece.key_rows
    return n_q * (n_k - n_q) + n_q * (n_q + 1) // 2 if piece.causal else n_q * n_k


@pytest.mark.parametrize("world", range(1, 17))
def test_zig_zag_balances_causal_work(world):
    """Every rank's causal pairs within seqlen (one query row) of every other's, equal where the chunks are; the plan
    computes exactly them; with equal chunks every step's work is the same on every rank."""
    for seqlen in itertools.chain(range(1, 300), range(2 * world * 50, 2 * world * 51 + 1)):
        work = cp.work_per_rank(seqlen, world)
        assert sum(work) == seqlen * (seqlen + 1) // 2, f"seqlen {seqlen}: {work}"
        assert max(work) - min(work) <= seqlen, f"seqlen {seqlen}: {work}"
        if seqlen % (2 * world) == 0:
            assert len(set(work)) == 1, f"seqlen {seqlen}: {work}"
    for seqlen in (2 * world * 50, 2 * world * 50 + 7):
        planned = np.array([[sum(_piece_pairs(p) for p in pieces) for pieces in cp.rank_plan(seqlen, world, rank)]
                            for rank in range(world)])
        assert planned.sum(axis=1).tolist() == cp.work_per_rank(seqlen, world), f"seqlen {seqlen}"
        if seqlen % (2 * world) == 0:
            assert (planned == planned[0]).all(), f"seqlen {seqlen}: per rank and step {planned.tolist()}"


@pytest.mark.parametrize("world, seqlen", [(1, 5), (2, 8), (3, 31), (4, 64), (8, 100), (8, 7)])
def test_merges_fold_in_the_ring_order(world, seqlen):
    """rank_forward with symbolic parts ((query chunk, step)) and merges (("merge", a, b)): each chunk's result is the
    left fold of its parts in merge_order's order, which is the order of the steps."""
    tokens = np.arange(seqlen)
    bounds = cp.chunk_bounds(seqlen, world)
    chunk_of = lambda row: int(np.searchsorted(bounds, row, side="right")) - 1
    for rank in range(world):
        ring = [cp.source_rank(rank, step, world) for step in range(world)]
        held = ((np.full(seqlen, src), np.full(seqlen, src)) for src in ring)
        attention = lambda q, k, v, causal: ((chunk_of(q[0]), ring.index(int(k[0]))), "lse")
        merge = lambda a, lse_a, b, lse_b: (("merge", a, b), "lse")
        parts = cp.rank_forward(seqlen, world, rank, cp.shard(tokens, world, rank), held, attention, merge)
        order = cp.merge_order(seqlen, world, rank)
        assert sorted(parts) == sorted(chunk for chunk, _ in order)
        for chunk, steps in order:
            assert steps == sorted(steps), f"rank {rank} chunk {chunk}: steps {steps} out of order"
            expected = (chunk, steps[0])
            for step in steps[1:]:
                expected = ("merge", expected, (chunk, step))
            assert parts[chunk] == (expected, "lse"), f"rank {rank} chunk {chunk}"


def test_merge_of_a_part_that_saw_no_key_is_exact(rng):
    """merge_state's model with a part of lse -inf (out 0), in either place and in some rows only: the other part,
    bit for bit."""
    heads, rows, dim = 3, 50, 16
    out, lse = rng.standard_normal((rows, heads, dim)), rng.normal(5.0, 4.0, (heads, rows))
    empty_out, empty_lse = np.zeros((rows, heads, dim)), np.full((heads, rows), -np.inf)
    for merged in (cp.reference_merge(out, lse, empty_out, empty_lse), cp.reference_merge(empty_out, empty_lse, out,
                                                                                        lse)):
        assert np.array_equal(merged[0], out) and np.array_equal(merged[1], lse)
    blind = rng.random(rows) < 0.5  # rows where the second part saw no key (a chunk with more queries than keys)
    other_out, other_lse = rng.standard_normal((rows, heads, dim)), rng.normal(5.0, 4.0, (heads, rows))
    other_out[blind], other_lse[:, blind] = 0.0, -np.inf
    merged_out, merged_lse = cp.reference_merge(out, lse, other_out, other_lse)
    assert np.array_equal(merged_out[blind], out[blind]) and np.array_equal(merged_lse[:, blind], lse[:, blind])
    assert np.isfinite(merged_lse).all() and not np.array_equal(merged_out[~blind], out[~blind])


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.float32])
def test_shard_keeps_bits(rng, dtype):
    """A shard of bfloat16, e4m3 or float32 rows: its chunks' rows, bit for bit (CuPy's path, through the bits)."""
    x = rng.standard_normal((37, 2, 8)).astype(np.float32).astype(dtype)
    bounds = cp.chunk_bounds(37, 3)
    for rank in range(3):
        rows = np.concatenate([np.arange(bounds[c], bounds[c + 1]) for c in cp.rank_chunks(rank, 3)])
        part = cp.shard(x, 3, rank)
        assert part.dtype == x.dtype and np.array_equal(part.view(np.uint8), x[rows].view(np.uint8))


def test_refuses_what_it_cannot_run():
    q = np.zeros((8, 1, 4))
    with pytest.raises(ValueError, match="one seqlen"):
        cp.run_context_parallel(q, q[:7], q, 2, attention=cp.reference_attention, merge=cp.reference_merge)
    with pytest.raises(ValueError, match="world"):
        cp.chunk_bounds(8, 0)
    with pytest.raises(ValueError, match="ring has 2 steps"):
        cp.rank_forward(8, 2, 0, q, iter([(q, q)]), cp.reference_attention, cp.reference_merge)


class _ThreadRing:
    """A ring of queues between threads, the transport a rank's ring_forward takes: start puts the held shard in the
    next rank's inbox, finish takes the previous rank's from its own. Logs each rank's starts and finishes, and a
    rank's attention calls log through `log` too, so that the test sees a pass start before the shard is computed on."""

    def __init__(self, world):
        self.inbox = [queue.Queue() for _ in range(world)]
        self.log = [[] for _ in range(world)]

    def transport(self, rank):
        ring, world = self, len(self.inbox)

        class Transport:
            def start(self, k, v):
                ring.log[rank].append("start")
                ring.inbox[(rank + 1) % world].put((k, v))
                return rank

            def finish(self, pending):
                ring.log[rank].append("finish")
                return ring.inbox[pending].get(timeout=30)
        return Transport()


@pytest.mark.parametrize("world, name, seqlen", CASES, ids=[f"w{w}-{n}" for w, n, _ in CASES])
def test_ring_forward_on_threads_matches_one_process(rng, world, name, seqlen):
    """Every rank's ring_forward on a thread of its own, the shards passed by queues: the parts equal
    run_context_parallel's bit for bit (the same pieces, merged in the same order), each pass starts before the shard
    held is computed on and ends after, and the last step starts none."""
    q, k, v = _inputs(rng, seqlen, HEADS[0])
    ring, results = _ThreadRing(world), [None] * world

    def attention_logged(rank):
        def attention(*args):
            ring.log[rank].append("attention")
            return cp.reference_attention(*args)
        return attention

    def rank_main(rank):
        results[rank] = cp.ring_forward(seqlen, world, rank, cp.shard(q, world, rank), cp.shard(k, world, rank),
                                        cp.shard(v, world, rank), ring.transport(rank), attention_logged(rank),
                                        cp.reference_merge)
    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r is not None for r in results), "a rank did not finish"
    out, lse = cp.run_context_parallel(q, k, v, world, attention=cp.reference_attention, merge=cp.reference_merge)
    got, got_lse = np.full_like(out, np.nan), np.full_like(lse, np.nan)
    for rank, parts in enumerate(results):
        chunks = [parts[c] for c in cp.rank_chunks(rank, world) if c in parts]
        if chunks:  # a rank of fewer tokens than chunks may hold none
            rows = cp.shard_rows(seqlen, world, rank)
            got[rows] = np.concatenate([o for o, _ in chunks])
            got_lse[:, rows] = np.concatenate([x for _, x in chunks], axis=1)
    assert np.array_equal(got, out) and np.array_equal(got_lse, lse)
    for rank, log in enumerate(ring.log):
        # per step but the last: the pass starts, the held shard's pieces are computed, the pass is waited for
        passes = [x for x in log if x != "attention"]
        assert passes == ["start", "finish"] * (world - 1), f"rank {rank}: {log}"
        assert world == 1 or log[0] == "start", f"rank {rank} computed before its first pass began: {log}"


def test_shard_rows_are_the_shards_rows():
    for world, seqlen in itertools.product(WORLDS, (1, 7, 100)):
        x = np.arange(seqlen)
        for rank in range(world):
            assert np.array_equal(cp.shard_rows(seqlen, world, rank), cp.shard(x, world, rank))
        assert sorted(np.concatenate([cp.shard_rows(seqlen, world, r) for r in range(world)])) == list(range(seqlen))
