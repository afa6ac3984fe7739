"""Context-parallel prefill of one long causal prompt over `world` ranks: zig-zag shards, a ring pass of K/V shards,
and partial (out, lse) results combined with merge_state in a fixed order.

Sharding (zig-zag): the prompt's n tokens are cut into 2·world chunks as even as whole tokens allow (chunk c is rows
chunk_bounds[c] .. chunk_bounds[c + 1] - 1); rank r holds chunks r and 2·world − 1 − r, one from each end, so that
every rank's causal work (pairs (i, j) with j ≤ i) is the same up to the rounding of the bounds (work_per_rank).
A rank's shard of q, k and v is its two chunks' rows, one after the other.

Ring: at step s = 0 .. world − 1 rank r holds the K/V shard of rank (r − s) mod world (each step every rank passes
what it holds to rank r + 1). Its query chunks meet the held key chunks in blocks that are causal-diagonal (the same
chunk), fully visible (a key chunk before the query chunk) or fully masked (after it: skipped). The visible key
chunks of one query chunk are always a prefix of the held shard, so each query chunk makes at most one attention call
(a Piece) per step, with keys a prefix of the held rows: causal with the mask aligned bottom-right (query i of n_q
sees key j iff j ≤ i + n_k − n_q, flashprefill's rule) where the prefix ends with the query's own chunk, which is then
exactly the prompt's causal mask, since every key before that chunk precedes every query of it; not causal where
every key precedes every query.

Merge: a query chunk's partial results are folded in step order, acc = merge(acc, partial), the order in which the
ring delivers them, so that no partial waits and every run combines the same operands in the same order.

run_context_parallel runs every rank in one process with an injected attention and merge: reference_attention and
reference_merge (float64, numpy) here; on a GPU fp.attention_varlen on each piece (one sequence: its query rows
against its key prefix) and fp.merge_state (tests/test_context_parallel_gpu.py). rank_forward is one rank's part;
ring_forward drives it with the K/V shards an injected transport passes round the ring, each pass running while the
shard held is computed on (context_parallel_torch.TorchRing: torch.distributed).
"""
import dataclasses
import enum

import numpy as np

from . import fp8, reference

_STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class Visibility(enum.Enum):
    """How the keys of one key chunk stand to the queries of one query chunk."""
    DIAGONAL = "diagonal"  # the same chunk: key j seen by query i iff j <= i
    VISIBLE = "visible"  # every key precedes every query
    MASKED = "masked"  # every key follows every query: nothing to compute


@dataclasses.dataclass(frozen=True)
class Block:
    """One query chunk against one key chunk of the held shard."""
    query_chunk: int
    key_chunk: int
    visibility: Visibility


@dataclasses.dataclass(frozen=True)
class Piece:
    """One attention call of a rank at a step: its query rows (a slice of the rank's q shard, the rows of
    query_chunk) against the first key_rows rows of the held K/V shard (key_chunks, in order). causal: the mask
    aligned bottom-right (key_chunks end with query_chunk); else every key is seen."""
    rank: int
    step: int
    query_chunk: int
    key_chunks: tuple
    query_rows: slice
    key_rows: int
    causal: bool


def _check_world(seqlen, world):
    for name, value in (("seqlen", seqlen), ("world", world)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def chunk_bounds(seqlen, world):
    """The 2·world + 1 bounds of the chunks: chunk c is rows bounds[c] .. bounds[c + 1] - 1 (floor(c·n / 2·world):
    sizes differ by at most one token; chunks are empty where seqlen < 2·world)."""
    _check_world(seqlen, world)
    return [c * seqlen // (2 * world) for c in range(2 * world + 1)]


def rank_chunks(rank, world):
    """The two chunks rank `rank` holds, in the order of its shard's rows: (rank, 2·world − 1 − rank)."""
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    return rank, 2 * world - 1 - rank


def source_rank(rank, step, world):
    """The rank whose K/V shard rank `rank` holds at `step` of the ring: after `step` passes to the next rank."""
    return (rank - step) % world


def causal_pairs(first_row, stop_row):
    """Pairs (i, j) with j <= i of query rows first_row .. stop_row - 1 of the prompt (its keys from 0)."""
    return (stop_row * (stop_row + 1) - first_row * (first_row + 1)) // 2


def work_per_rank(seqlen, world):
    """Causal pairs (i, j), j <= i, each rank computes: its query rows against every key up to them. Equal where
    2·world divides seqlen; else any two ranks' differ by at most seqlen (one query row of the prompt), what the
    rounding of the bounds to whole tokens moves (tests/test_context_parallel.py checks it)."""
    bounds = chunk_bounds(seqlen, world)
    return [sum(causal_pairs(bounds[c], bounds[c + 1]) for c in rank_chunks(r, world)) for r in range(world)]


def blocks(rank, step, world):
    """The four Blocks of rank `rank` at `step`: each of its query chunks against each chunk of the held shard."""
    held = rank_chunks(source_rank(rank, step, world), world)
    return [Block(q, k, Visibility.DIAGONAL if k == q else Visibility.VISIBLE if k < q else Visibility.MASKED)
            for q in rank_chunks(rank, world) for k in held]


def rank_plan(seqlen, world, rank):
    """The Pieces of rank `rank`, one list per step: per query chunk, the visible and diagonal key chunks of the held
    shard (a prefix of it, diagonal last where there is one) as one call; none where they hold no rows or the chunk
    no query."""
    bounds = chunk_bounds(seqlen, world)
    rows = {c: bounds[c + 1] - bounds[c] for c in range(2 * world)}
    local_first = dict(zip(rank_chunks(rank, world), (0, rows[rank])))
    plan = []
    for step in range(world):
        held = rank_chunks(source_rank(rank, step, world), world)
        pieces = []
        for query_chunk in rank_chunks(rank, world):
            seen = [b for b in blocks(rank, step, world) if b.query_chunk == query_chunk
                    and b.visibility is not Visibility.MASKED]
            keys = tuple(b.key_chunk for b in seen)
            assert keys == held[:len(keys)], "the visible key chunks are a prefix of the held shard"
            key_rows = sum(rows[k] for k in keys)
            if rows[query_chunk] and key_rows:
                first = local_first[query_chunk]
                pieces.append(Piece(rank, step, query_chunk, keys, slice(first, first + rows[query_chunk]),
                                    key_rows, any(b.visibility is Visibility.DIAGONAL for b in seen)))
        plan.append(pieces)
    return plan


def ring_plan(seqlen, world):
    """plan[rank][step]: the Pieces every rank computes at every step (rank_plan of each)."""
    return [rank_plan(seqlen, world, rank) for rank in range(world)]


def merge_order(seqlen, world, rank):
    """[(query chunk, steps)] of rank `rank`: the steps whose partial results make each of its query chunks, in the
    order they are folded (the first is the accumulator; each later one is merged into it)."""
    order = {}
    for pieces in rank_plan(seqlen, world, rank):
        for piece in pieces:
            order.setdefault(piece.query_chunk, []).append(piece.step)
    return [(chunk, order[chunk]) for chunk in rank_chunks(rank, world) if chunk in order]


def concatenate(parts, axis=0):
    """numpy or CuPy arrays of one dtype joined along `axis`, through their bits (CuPy has no copy kernel for the
    ml_dtypes dtypes bfloat16 and float8_e4m3fn)."""
    xp = fp8.array_module(parts[0])
    storage = _STORAGE[parts[0].dtype.itemsize]
    return xp.concatenate([p.view(storage) for p in parts], axis=axis).view(parts[0].dtype)


def shard(x, world, rank):
    """Rank `rank`'s shard of x (seqlen, ...): the rows of its two chunks, one after the other."""
    bounds = chunk_bounds(x.shape[0], world)
    return concatenate([x[bounds[c]:bounds[c + 1]] for c in rank_chunks(rank, world)])


def rank_forward(seqlen, world, rank, q_shard, held_kv, attention, merge):
    """Rank `rank`'s part: {query chunk: (out, lse)} of its chunks that hold rows, out (rows, heads_q, dim_v) and lse
    (heads_q, rows) over every key of the prompt that the chunk's queries see.

    q_shard: its rows of q (seqlen's shard, (rows, heads_q, dim_qk)); held_kv: the (k, v) shards the ring delivers,
    one per step in step order (k (rows, heads_kv, dim_qk), v (rows, heads_kv, dim_v)).
    attention(q, k, v, causal) -> (out, lse): q (n_q, heads_q, dim_qk) against k and v (n_k, ...), causal aligned
    bottom-right; out (n_q, heads_q, dim_v), lse (heads_q, n_q). merge(out_a, lse_a, out_b, lse_b) -> (out, lse):
    merge_state of two such results over disjoint keys.
    """
    partial = {}
    steps = 0
    for pieces, (k_held, v_held) in zip(rank_plan(seqlen, world, rank), held_kv):
        steps += 1
        for piece in pieces:
            keys = slice(0, piece.key_rows)
            result = attention(q_shard[piece.query_rows], k_held[keys], v_held[keys], piece.causal)
            previous = partial.get(piece.query_chunk)
            partial[piece.query_chunk] = result if previous is None else merge(*previous, *result)
    if steps != world:
        raise ValueError(f"held_kv delivered {steps} K/V shards, the ring has {world} steps")
    return partial


def ring_shards(k_shard, v_shard, world, transport):
    """The (k, v) shards a rank holds at steps 0 .. world − 1 of the ring: its own, then each the transport delivers
    from the previous rank. Each pass starts before the shard held is handed out, so that it runs while that shard is
    computed on; the last step starts none.

    transport.start(k, v) -> pending: sends the held shard to the next rank and receives the previous rank's;
    transport.finish(pending) -> (k, v): waits for both and returns the received shard.
    """
    held = (k_shard, v_shard)
    for step in range(world):
        pending = transport.start(*held) if step + 1 < world else None
        yield held
        if pending is not None:
            held = transport.finish(pending)


def ring_forward(seqlen, world, rank, q_shard, k_shard, v_shard, transport, attention, merge):
    """rank_forward of rank `rank` with the K/V shards passed round the ring by `transport` (ring_shards): every rank
    of the ring calls it with its own shards, and each returns its {query chunk: (out, lse)}."""
    return rank_forward(seqlen, world, rank, q_shard, ring_shards(k_shard, v_shard, world, transport), attention,
                        merge)


def shard_rows(seqlen, world, rank):
    """The prompt's rows rank `rank`'s shard holds, in the shard's order (its two chunks)."""
    bounds = chunk_bounds(seqlen, world)
    return np.concatenate([np.arange(bounds[c], bounds[c + 1]) for c in rank_chunks(rank, world)]).astype(np.int64)


def run_context_parallel(q, k, v, world, *, attention, merge):
    """Causal attention of one prompt computed as `world` ranks of context parallelism would, one rank after the
    other in this process: (out (seqlen, heads_q, dim_v), lse (heads_q, seqlen)) in the prompt's order.

    q (seqlen, heads_q, dim_qk), k (seqlen, heads_kv, dim_qk), v (seqlen, heads_kv, dim_v): numpy or CuPy arrays;
    attention and merge as rank_forward takes them.
    """
    seqlen = q.shape[0]
    if k.shape[0] != seqlen or v.shape[0] != seqlen:
        raise ValueError(f"q, k and v must have one seqlen, got {q.shape[0]}, {k.shape[0]}, {v.shape[0]}")
    kv_shards = [(shard(k, world, r), shard(v, world, r)) for r in range(world)]
    chunks = {}
    for rank in range(world):
        ring = (kv_shards[source_rank(rank, step, world)] for step in range(world))
        chunks.update(rank_forward(seqlen, world, rank, shard(q, world, rank), ring, attention, merge))
    ordered = [chunks[c] for c in range(2 * world) if c in chunks]
    return concatenate([out for out, _ in ordered]), concatenate([lse for _, lse in ordered], axis=1)


def reference_attention(q, k, v, causal, softmax_scale=None):
    """attention for rank_forward in float64: reference.attention_reference of one sequence."""
    out, lse = reference.attention_reference(q[None], k[None], v[None], causal=causal, softmax_scale=softmax_scale,
                                             return_lse=True)
    return out[0], lse[0]


def reference_merge(out_a, lse_a, out_b, lse_b):
    """merge for rank_forward in float64: reference.merge_state_reference, merge_state's numpy model."""
    out, lse = reference.merge_state_reference(out_a[None], lse_a[None], out_b[None], lse_b[None])
    return out[0], lse[0]
