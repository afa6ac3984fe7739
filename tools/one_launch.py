"""One flashprefill launch on random inputs, for profilers and checkers (ncu, compute-sanitizer):

    python tools/one_launch.py --dtype fp8 --seq 16384 --heads 32 --heads-kv 8 [--repeat 1] [--block-tokens 128]
                               [--probabilities fp16] [--v-layout prepared]
"""
import argparse

import torch

import flashprefill as fp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=4096)
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
    shape = {"q": (args.batch, args.seq, args.heads, args.dim), "k": (args.batch, args.seq, args.heads_kv, args.dim),
             "v": (args.batch, args.seq, args.heads_kv, args.dim_v or args.dim)}
    x = {name: torch.randn(s, device="cuda") for name, s in shape.items()}
    kwargs = {}
    if args.dtype == "bf16":
        q, k, v = (x[n].to(torch.bfloat16) for n in "qkv")
    else:
        q, k, v = (x[n].to(torch.float8_e4m3fn) for n in "qkv")
        if args.block_tokens:
            def scales(x):
                blocks = -(-x.shape[1] // args.block_tokens)
                exponents = torch.randint(-3, 4, (args.batch, x.shape[2], blocks), device="cuda", dtype=torch.int8)
                return fp.BlockScales(exponents, args.block_tokens)
            kwargs = dict(q_descale=scales(q), k_descale=scales(k), v_descale=scales(v))
        else:
            one = torch.ones((), device="cuda")
            kwargs = dict(q_descale=one, k_descale=one, v_descale=one)
        kwargs["probabilities"] = args.probabilities
        kwargs["scores"] = args.scores
        if args.v_layout == "prepared":
            v = fp.prepare_v(v)
    for _ in range(args.repeat):
        out = fp.attention(q, k, v, causal=args.causal, **kwargs)
    torch.cuda.synchronize()
    print(f"{args.dtype} P {args.probabilities} S {args.scores} v {args.v_layout} {tuple(q.shape)} kv {tuple(k.shape)}: "
          f"out finite: {bool(torch.isfinite(out).all())}")


if __name__ == "__main__":
    main()
