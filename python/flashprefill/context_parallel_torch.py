"""Context parallelism over torch.distributed: the ranks of a process group each hold their zig-zag shard of one
prompt's q, k and v (context_parallel.shard) and pass the K/V shards round a ring with torch.distributed's
batch_isend_irecv (NCCL between GPUs, gloo on the host), each pass running while the shard held is computed on; every
rank folds its partial results with merge_state in the ring's order (context_parallel.ring_forward). Nothing but
torch.distributed moves data between ranks.

    out, lse = forward(shard(q), shard(k), shard(v), seqlen)          # this rank's rows, shard order
    out, lse = gather(out, lse, seqlen)                                # the whole prompt's, on every rank

The shards are contiguous torch tensors of one device: q (rows, heads_q, dim_qk), k (rows, heads_kv, dim_qk),
v (rows, heads_kv, dim_v), rows = len(context_parallel.shard_rows(seqlen, world, rank)).
"""
import torch
import torch.distributed as dist

from . import context_parallel


class TorchRing:
    """The ring's pass (ring_shards' transport) over torch.distributed for a prompt of `seqlen` tokens: start sends
    the held K/V shard to the next rank of `group` and receives the previous rank's into new tensors of that shard's
    rows (shards differ by up to two rows), as bytes (NCCL and gloo move any dtype so); finish waits for the four
    transfers. The held shard is only read while it travels."""

    def __init__(self, seqlen, group=None):
        self.seqlen, self.group = seqlen, group
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        global_rank = (lambda r: r) if group is None else (lambda r: dist.get_global_rank(group, r))
        self.next, self.previous = global_rank((self.rank + 1) % self.world), global_rank((self.rank - 1) % self.world)
        self.step = 0  # the step of the shard held; start moves it to the shard it receives

    def start(self, k, v):
        self.step += 1
        source = context_parallel.source_rank(self.rank, self.step, self.world)
        rows = len(context_parallel.shard_rows(self.seqlen, self.world, source))
        received = tuple(torch.empty((rows,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device) for x in (k, v))
        ops = [dist.P2POp(dist.isend, _bytes(x), self.next, self.group) for x in (k, v)]
        ops += [dist.P2POp(dist.irecv, _bytes(x), self.previous, self.group) for x in received]
        return dist.batch_isend_irecv(ops), received

    def finish(self, pending):
        requests, received = pending
        for request in requests:
            request.wait()
        return received


def _bytes(x):
    """x's storage as uint8, the shape's last dim in bytes (a contiguous tensor's bits)."""
    if not x.is_contiguous():
        raise ValueError(f"the ring passes contiguous shards only, got strides {x.stride()}")
    return x.view(torch.uint8)


def shard(x, group=None):
    """This rank's zig-zag shard of a whole prompt's x (seqlen, ...), a contiguous tensor of any dtype."""
    return shard_of(x, dist.get_world_size(group), dist.get_rank(group))


def shard_of(x, world, rank):
    """Rank `rank`'s shard of x: the rows context_parallel.shard_rows names, in that order, taken as bytes (fp8
    tensors have no row gather of their own)."""
    rows = context_parallel.shard_rows(x.shape[0], world, rank)
    return _bytes(x)[torch.from_numpy(rows).to(x.device)].view(x.dtype)


def joined(partial, world, rank):
    """A rank's {query chunk: (out, lse)} (context_parallel.rank_forward's) as (out, lse) of its shard's rows."""
    parts = [partial[c] for c in context_parallel.rank_chunks(rank, world) if c in partial]
    return torch.cat([out for out, _ in parts]), torch.cat([lse for _, lse in parts], dim=1)


def library_attention(**options):
    """attention for ring_forward on torch tensors of one device: one fp.attention_varlen call of one sequence (its
    query rows against its key prefix, causal aligned bottom-right), out as float32 for merge_state's folding.
    options: attention_varlen's keyword arguments (q_descale, k_descale, v_descale, scores, ...)."""
    import flashprefill as fp
    offsets = {}  # the device's [0, n], made once per length

    def cu_seqlens(n, device):
        key = (n, device)
        if key not in offsets:
            offsets[key] = torch.tensor([0, n], dtype=torch.int32, device=device)
        return offsets[key]

    def attention(q, k, v, causal):
        n_q, n_k = q.shape[0], k.shape[0]
        out, lse = fp.attention_varlen(q, k, v, cu_seqlens(n_q, q.device), cu_seqlens(n_k, q.device), n_q, n_k,
                                       causal=causal, return_lse=True, **options)
        return out.float(), lse
    return attention


def reference_attention(q, k, v, causal):
    """attention for ring_forward on host tensors: context_parallel.reference_attention (float64, numpy)."""
    out, lse = context_parallel.reference_attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), causal)
    return torch.from_numpy(out), torch.from_numpy(lse)


def reference_merge(*parts):
    """merge for ring_forward on host tensors: context_parallel.reference_merge (float64, numpy)."""
    out, lse = context_parallel.reference_merge(*(x.numpy() for x in parts))
    return torch.from_numpy(out), torch.from_numpy(lse)


def library_merge(out_a, lse_a, out_b, lse_b):
    """merge for ring_forward: fp.merge_state of two float32 parts as batch 1."""
    import flashprefill as fp
    out, lse = fp.merge_state(out_a[None], lse_a[None], out_b[None], lse_b[None])
    return out[0], lse[0]


def forward(q_shard, k_shard, v_shard, seqlen, *, attention=None, merge=None, group=None):
    """This rank's part of the causal attention of a prompt of `seqlen` tokens sharded over `group`: (out (rows,
    heads_q, dim_v), lse (heads_q, rows)) of its shard's rows in shard order. attention and merge as
    context_parallel.rank_forward takes them; by default library_attention() (no descales: bf16 q, k, v) and
    library_merge."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    rows = len(context_parallel.shard_rows(seqlen, world, rank))
    for name, x in (("q_shard", q_shard), ("k_shard", k_shard), ("v_shard", v_shard)):
        if x.shape[0] != rows:
            raise ValueError(f"{name} has {x.shape[0]} rows; rank {rank} of {world} holds {rows} of {seqlen} tokens")
    partial = context_parallel.ring_forward(seqlen, world, rank, q_shard, k_shard, v_shard, TorchRing(seqlen, group),
                                            attention or library_attention(), merge or library_merge)
    return joined(partial, world, rank)


def gather(out, lse, seqlen, group=None):
    """Every rank's (out, lse) from forward, joined in the prompt's order on every rank (all_gather; the shards,
    which differ by at most two rows, padded to the longest)."""
    world = dist.get_world_size(group)
    rows = [context_parallel.shard_rows(seqlen, world, r) for r in range(world)]
    longest = max(len(r) for r in rows)
    padded_out = torch.zeros((longest,) + tuple(out.shape[1:]), dtype=out.dtype, device=out.device)
    padded_lse = torch.zeros((lse.shape[0], longest), dtype=lse.dtype, device=lse.device)
    padded_out[:out.shape[0]], padded_lse[:, :lse.shape[1]] = out, lse
    outs = [torch.empty_like(padded_out) for _ in range(world)]
    lses = [torch.empty_like(padded_lse) for _ in range(world)]
    dist.all_gather(outs, padded_out, group=group)
    dist.all_gather(lses, padded_lse, group=group)
    full_out = torch.empty((seqlen,) + tuple(out.shape[1:]), dtype=out.dtype, device=out.device)
    full_lse = torch.empty((lse.shape[0], seqlen), dtype=lse.dtype, device=lse.device)
    for r in range(world):
        index = torch.as_tensor(rows[r], device=out.device)
        full_out[index] = outs[r][:len(rows[r])]
        full_lse[:, index] = lses[r][:, :len(rows[r])]
    return full_out, full_lse
