"""The processes of a torch.distributed ring for the context-parallel tests: spawn(world, rank_main, ...) runs
rank_main(rank, world, store, *args) in `world` processes that meet through a file store, and each rank's results
come back as the .npz files it writes. Imported by the test files and, in the spawned processes, by name."""
import os
import pathlib
import tempfile

import numpy as np

from flashprefill import context_parallel as cp


def spawn(world, rank_main, *args):
    """[{name: array}] of every rank, in rank order, from rank_main(rank, world, store, out_dir, *args)."""
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        mp.spawn(rank_main, args=(world, store, tmp) + args, nprocs=world, join=True)
        return [dict(np.load(pathlib.Path(tmp, f"rank{r}.npz"))) for r in range(world)]


def inputs(seqlen, heads, dims, seed):
    """float64 q, k, v of one prompt (the same in every process: from the seed)."""
    rng = np.random.default_rng(seed)
    (heads_q, heads_kv), (dim_qk, dim_v) = heads, dims
    return (rng.standard_normal((seqlen, heads_q, dim_qk)), rng.standard_normal((seqlen, heads_kv, dim_qk)),
            rng.standard_normal((seqlen, heads_kv, dim_v)))


def host_rank(rank, world, store, out_dir, seqlen, heads, dims, seed, dtype):
    """One rank on the host: gloo, its shards as torch tensors of `dtype` (float64 or bfloat16), the float64
    reference attention and merge; writes its forward part and the gathered prompt."""
    import torch
    import torch.distributed as dist
    from flashprefill import context_parallel_torch as cpt
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        torch_dtype = getattr(torch, dtype)
        q, k, v = (torch.from_numpy(x).to(torch_dtype) for x in inputs(seqlen, heads, dims, seed))
        out, lse = cpt.forward(cpt.shard(q), cpt.shard(k), cpt.shard(v), seqlen, attention=cpt.reference_attention,
                               merge=cpt.reference_merge)
        full_out, full_lse = cpt.gather(out, lse, seqlen)
        np.savez(pathlib.Path(out_dir, f"rank{rank}.npz"), out=out.numpy(), lse=lse.numpy(),
                 full_out=full_out.numpy(), full_lse=full_lse.numpy())
    finally:
        dist.destroy_process_group()


def quantized(x, kind):
    """The values a rank computes with, float64: x rounded to bf16 ("bf16"), or to e4m3 codes times one factor per
    tensor, max |x| / 448 ("fp8"); with the codes' factor (None for bf16)."""
    import ml_dtypes
    if kind == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(np.float64), None
    factor = np.abs(x).max() / 448
    return (x / factor).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * factor, factor


def gpu_rank(rank, world, store, out_dir, seqlen, heads, dims, seed, kind):
    """One rank on GPU `rank`: NCCL, its shards as bf16 (kind "bf16") or e4m3 codes with one factor per tensor
    ("fp8"), flashprefill's attention_varlen and merge_state; writes the gathered prompt and, on rank 0, the same
    pieces computed one rank after the other on its own GPU (context_parallel.rank_forward, no ring)."""
    import torch
    import torch.distributed as dist
    from flashprefill import context_parallel_torch as cpt
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        device = torch.device("cuda", rank)
        prompt, options = [], {}
        for name, x in zip("qkv", inputs(seqlen, heads, dims, seed)):
            _, factor = quantized(x, kind)
            if kind == "bf16":
                prompt.append(torch.from_numpy(x).to(device).to(torch.bfloat16))
            else:
                prompt.append((torch.from_numpy(x).to(device) / factor).to(torch.float8_e4m3fn))
                options[f"{name}_descale"] = torch.tensor([factor], dtype=torch.float32, device=device)
        attention, merge = cpt.library_attention(**options), cpt.library_merge

        def shards_of(r):
            return [cpt.shard_of(x, world, r) for x in prompt]
        out, lse = cpt.forward(*shards_of(rank), seqlen, attention=attention, merge=merge)
        full_out, full_lse = cpt.gather(out, lse, seqlen)
        results = {"full_out": full_out.cpu().numpy(), "full_lse": full_lse.cpu().numpy()}
        if rank == 0:  # the same pieces and merges, every rank's in turn on this GPU
            one_out, one_lse = torch.full_like(full_out, float("nan")), torch.full_like(full_lse, float("nan"))
            for r in range(world):
                ring = [tuple(shards_of(cp.source_rank(r, step, world))[1:]) for step in range(world)]
                index = torch.from_numpy(cp.shard_rows(seqlen, world, r)).to(device)
                one_out[index], one_lse[:, index] = cpt.joined(
                    cp.rank_forward(seqlen, world, r, shards_of(r)[0], ring, attention, merge), world, r)
            results.update(one_out=one_out.cpu().numpy(), one_lse=one_lse.cpu().numpy())
        np.savez(pathlib.Path(out_dir, f"rank{rank}.npz"), **results)
    finally:
        dist.destroy_process_group()
