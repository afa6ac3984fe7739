"""Context parallelism over torch.distributed on the host (flashprefill.context_parallel_torch): `world` processes
joined by gloo, each holding its zig-zag shard as torch tensors, pass the K/V shards round the ring
(batch_isend_irecv of the shards' bytes) and fold their parts with the float64 reference attention and merge; gather
joins the parts on every rank. Each rank's part and the gathered prompt equal run_context_parallel's (one process,
no ring) bit for bit; float64 shards, and bfloat16 ones whose bits must survive the byte transfer. Needs torch (skips
without it, where test_context_parallel.py runs the same ring on threads)."""
import numpy as np
import pytest

import markers
import ring_ranks
from flashprefill import context_parallel as cp

HEADS, DIMS = (4, 2), (32, 16)
CASES = [(2, 2 * 2 * 24, "float64"), (3, 2 * 3 * 17 + 5, "bfloat16"), (4, 2 * 4 * 9 + 7, "float64")]


@pytest.mark.parametrize("world, seqlen, dtype", CASES, ids=[f"w{w}-{n}-{d}" for w, n, d in CASES])
def test_ring_over_gloo_matches_one_process(rng, world, seqlen, dtype):
    markers.torch_or_skip(markers.NO_TORCH_DISTRIBUTED)
    seed = int(rng.integers(1 << 31))
    ranks = ring_ranks.spawn(world, ring_ranks.host_rank, seqlen, HEADS, DIMS, seed, dtype)
    q, k, v = ring_ranks.inputs(seqlen, HEADS, DIMS, seed)
    if dtype == "bfloat16":
        q, k, v = (ring_ranks.quantized(x, "bf16")[0] for x in (q, k, v))
    out, lse = cp.run_context_parallel(q, k, v, world, attention=cp.reference_attention, merge=cp.reference_merge)
    for rank, got in enumerate(ranks):
        rows = cp.shard_rows(seqlen, world, rank)
        assert np.array_equal(got["out"], out[rows]) and np.array_equal(got["lse"], lse[:, rows]), \
            f"seed {seed}: rank {rank}'s part differs from one process's"
        assert np.array_equal(got["full_out"], out) and np.array_equal(got["full_lse"], lse), \
            f"seed {seed}: rank {rank}'s gathered prompt differs"
