"""One flashprefill launch on random inputs, for profilers and checkers (ncu, compute-sanitizer):

    python tools/one_launch.py --dtype fp8 --seq 16384 --heads 32 --heads-kv 8 [--repeat 1] [--block-tokens 128]
                               [--probabilities fp16] [--v-layout prepared]
    python tools/one_launch.py --dtype fp8 --lengths 500,17,1,300 [--page-size 128 --block-tokens 128]

--lengths makes it one attention_varlen call on a packed batch of those sequences (the varlen kernels and the plan
kernel before them); --page-size puts k and v in a paged cache, pages permuted (the paged loads; with --block-tokens
equal to it, one exponent per page and kv head).
"""
import argparse
import itertools

import torch

import bench_varlen_cases as cases
import flashprefill as fp


def _codes_and_descales(args, x, blocks_of):
    """fp8 codes of x's q, k, v and their descales: factors of 1, or BlockScales of random exponents in -3..3 with
    the (batch, heads) of blocks_of(name)."""
    codes = {name: t.to(torch.float8_e4m3fn) for name, t in x.items()}
    if not args.block_tokens:
        one = torch.ones((), device="cuda")
        return codes, dict(q_descale=one, k_descale=one, v_descale=one)
    scales = {}
    for name in "qkv":
        exponents = torch.randint(-3, 4, blocks_of(name), device="cuda", dtype=torch.int8)
        scales[f"{name}_descale"] = fp.BlockScales(exponents, args.block_tokens)
    return codes, scales


def _paged(packed, lengths, page_size, seed):
    """The packed rows (total, heads, dim) of sequences of these lengths as a cache (num_pages, page_size, heads,
    dim), its pages in a random order, and its block table (int32, on packed's device): the benchmark's layout
    (bench_varlen_cases.page_table, paged_rows)."""
    table, num_pages = cases.page_table(lengths, page_size, seed)
    rows = torch.from_numpy(cases.paged_rows(lengths, page_size, table)).to(packed.device)
    cache = torch.zeros((num_pages * page_size,) + tuple(packed.shape[1:]), dtype=packed.dtype, device=packed.device)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[packed.element_size()]  # no index_put for every dtype
    cache.view(bits)[rows] = packed.view(bits)
    return cache.view((num_pages, page_size) + tuple(packed.shape[1:])), torch.from_numpy(table).to(packed.device)


def _varlen_call(args):
    """attention_varlen's arguments and keywords for --lengths (and --page-size)."""
    heads_kv, dim_v = args.heads_kv, args.dim_v or args.dim
    lengths = [int(n) for n in args.lengths.split(",")]
    total, longest, batch = sum(lengths), max(lengths), len(lengths)
    if args.page_size and args.block_tokens not in (None, args.page_size):
        raise SystemExit("--block-tokens must equal --page-size for a paged cache (one exponent per page)")
    if args.v_layout == "prepared":
        raise SystemExit("--v-layout prepared: the varlen kernels take v as every tensor")
    seed = int(torch.randint(1 << 31, ()))
    num_pages = sum(-(-n // args.page_size) for n in lengths) if args.page_size else 0
    x = {name: torch.randn((total, heads, dim), device="cuda")
         for name, heads, dim in (("q", args.heads, args.dim), ("k", heads_kv, args.dim), ("v", heads_kv, dim_v))}

    def blocks_of(name):
        if name != "q" and args.page_size:
            return (num_pages, heads_kv)
        return (batch, args.heads if name == "q" else heads_kv, -(-longest // args.block_tokens))
    if args.dtype == "bf16":
        t, kwargs = {name: value.to(torch.bfloat16) for name, value in x.items()}, {}
    else:
        t, kwargs = _codes_and_descales(args, x, blocks_of)
        kwargs.update(probabilities=args.probabilities, scores=args.scores)
    cu = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device="cuda")
    k, v, cu_k = t["k"], t["v"], cu
    if args.page_size:
        (k, table), (v, _) = (_paged(t[name], lengths, args.page_size, seed) for name in "kv")
        cu_k = None
        kwargs.update(block_table=table, seqused_k=torch.tensor(lengths, dtype=torch.int32, device="cuda"))
    return (t["q"], k, v, cu, cu_k, longest, longest), kwargs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--lengths", default=None,
                    help="comma-separated sequence lengths: one attention_varlen call (--batch and --seq unused)")
    ap.add_argument("--page-size", type=int, default=None, help="with --lengths: k and v in a paged cache")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128, help="dim_qk")
    ap.add_argument("--dim-v", type=int, default=None, help="dim_v (default: --dim)")
    ap.add_argument("--no-causal", dest="causal", action="store_false")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--block-tokens", type=int, default=None,
                    help="fp8: per-block power-of-two descales (random exponents in -3..3) instead of factors of 1")
    ap.add_argument("--probabilities", choices=("default", "fp16"), default="default", help="fp8: P's precision")
    ap.add_argument("--scores", choices=("fp32", "fp16"), default="fp32",
                    help="fp8: S's precision (fp16: the kernel divides q's N(0,1) codes into float16 scores' bound)")
    ap.add_argument("--v-layout", choices=("default", "prepared"), default="default",
                    help="fp8: v as every tensor, or prepared (prepare_v, before the launches)")
    args = ap.parse_args()
    if args.lengths:
        call_args, kwargs = _varlen_call(args)
        for _ in range(args.repeat):
            out = fp.attention_varlen(*call_args, causal=args.causal, check=True, **kwargs)
        q, k = call_args[:2]
    else:
        rows, dim_v = (args.batch, args.seq), args.dim_v or args.dim
        shape = {"q": rows + (args.heads, args.dim), "k": rows + (args.heads_kv, args.dim),
                 "v": rows + (args.heads_kv, dim_v)}
        x = {name: torch.randn(s, device="cuda") for name, s in shape.items()}
        kwargs = {}
        if args.dtype == "bf16":
            q, k, v = (x[n].to(torch.bfloat16) for n in "qkv")
        else:
            blocks = lambda name: (args.batch, shape[name][2], -(-args.seq // args.block_tokens))
            codes, kwargs = _codes_and_descales(args, x, blocks)
            q, k, v = (codes[n] for n in "qkv")
            kwargs.update(probabilities=args.probabilities, scores=args.scores)
            if args.v_layout == "prepared":
                v = fp.prepare_v(v)
        for _ in range(args.repeat):
            out = fp.attention(q, k, v, causal=args.causal, **kwargs)
    torch.cuda.synchronize()
    print(f"{args.dtype} P {args.probabilities} S {args.scores} v {args.v_layout} {tuple(q.shape)} kv {tuple(k.shape)}: "
          f"out finite: {bool(torch.isfinite(out).all())}")


if __name__ == "__main__":
    main()
