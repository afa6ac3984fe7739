"""Accuracy side by side: relative L2 error against float64 attention of the original (float32) inputs, end to
end (quantization included), for flashprefill and its peers on the same inputs.

    python tools/accuracy.py [--out DIR] [--seq 4096] [--shape mla]   (mla: 16/16 heads, dim_qk 192, dim_v 128)

Input distributions (q, k, v drawn in float32): "normal" N(0, 1); "outlier" four channels of q and k 20x larger
and a shared key offset of 3; "rope" uneven channel scales (lognormal per rotary pair, sd 1 nat), a key offset
along the largest pairs, then rotary position embedding (base 10000), as LLM queries and keys look.
The peers get bf16 roundings or FA3-style fp8 codes with per-(batch, kv-head) descales; flashprefill's own
preparations quantize the float32 inputs: the exact Hadamard rotation of q and k (per-head factors, or the GPU
quantizer's per-block scales, with and without K smoothing; e4m3 or float16 probabilities). The peers' fp8 rows
also give the kernel-only error against float64 attention of the dequantized inputs; "input rounding floor" is
that float64 attention's own error; "ideal e4m3 P" is that attention with its probabilities rounded to nearest e4m3,
the least error any kernel with e4m3 probabilities can reach on those codes.
Writes DIR/accuracy.json (accuracy_mla.json for --shape mla; default bench/latest/), prints a table, and appends each
flashprefill row's error against FlashAttention-3's of the same dtype to the records file (default bench/records.csv;
--records "" appends nothing).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import PEERS, PeerUnavailable  # noqa: E402
import records  # noqa: E402

SHAPES = {"hd128": (8, 2, 128, 128), "mla": (16, 16, 192, 128)}  # heads_q, heads_kv, dim_qk, dim_v
HEADS_Q, HEADS_KV, DIM, DIM_V = SHAPES["hd128"]


def make(dist, seq, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(1, seq, HEADS_Q, DIM, generator=g, device="cuda")
    k = torch.randn(1, seq, HEADS_KV, DIM, generator=g, device="cuda")
    v = torch.randn(1, seq, HEADS_KV, DIM_V, generator=g, device="cuda")
    if dist == "outlier":
        q[..., :4] *= 20
        k[..., :4] *= 20
        k += 3.0
    if dist == "rope":
        pair_scale = torch.exp(torch.randn(DIM // 2, generator=g, device="cuda"))
        scale = pair_scale.repeat_interleave(2)
        q, k = q * scale, k * scale + 2.0 * scale * (scale > scale.median())
        q, k = rope(q), rope(k)
    return q, k, v


def rope(x):
    """Rotary position embedding over (batch, seq, heads, dim): pair (2i, 2i+1) at position t turned by
    t * 10000^(-2i/dim)."""
    seq, dim = x.shape[1], x.shape[-1]
    angle = torch.arange(seq, device="cuda")[:, None] * 10000.0 ** (-torch.arange(0, dim, 2, device="cuda") / dim)
    cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).reshape(x.shape)


def quantize(x):
    """FA3-style: codes and descale per (batch, kv head); q's heads of a group share one factor."""
    b, s, h, d = x.shape
    groups = x.reshape(b, s, HEADS_KV, -1)
    descale = (groups.abs().amax(dim=(1, 3)) / 448.0).clamp_min(1e-12)
    scale = descale.repeat_interleave(h // HEADS_KV, 1)[:, None, :, None]
    codes = (x / scale).to(torch.float8_e4m3fn)
    return codes, descale.float().contiguous(), codes.double() * scale.double()


def reference(q, k, v, e4m3_p=False):
    """Causal float64 attention, (batch, seq, heads, dim), one head at a time. e4m3_p: the probabilities rounded
    to nearest e4m3 (p 2^8 against the row max, as the fp8 kernels scale them) and divided by the sum of the
    rounded ones: what an fp8 kernel computing every exponential exactly would give, the least error any kernel
    with e4m3 probabilities can have on these inputs."""
    out = torch.empty(q.shape[:3] + v.shape[3:], dtype=torch.float64, device="cuda")
    rep = q.shape[2] // k.shape[2]
    mask = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool, device="cuda").triu(1)
    for h in range(q.shape[2]):
        s = (q[0, :, h].double() @ k[0, :, h // rep].double().T) / math.sqrt(q.shape[-1])
        s.masked_fill_(mask, float("-inf"))
        if e4m3_p:
            p = torch.exp(s - s.amax(-1, keepdim=True)) * 256.0
            p = p.to(torch.float8_e4m3fn).double()  # to nearest (even) e4m3, through float32
            out[0, :, h] = (p @ v[0, :, h // rep].double()) / p.sum(-1, keepdim=True)
        else:
            out[0, :, h] = torch.softmax(s, -1) @ v[0, :, h // rep].double()
    return out


def rel_l2(out, ref):
    out = out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((out - ref).norm() / ref.norm()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=records.LATEST)
    ap.add_argument("--records", default=records.RECORDS, help="the records file to append to; empty: none")
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--shape", choices=SHAPES, default="hd128")
    args = ap.parse_args()
    global HEADS_Q, HEADS_KV, DIM, DIM_V
    HEADS_Q, HEADS_KV, DIM, DIM_V = SHAPES[args.shape]
    rows = []
    for dist in ("normal", "outlier", "rope"):
        q, k, v = make(dist, args.seq, seed=7)
        exact = reference(q, k, v)
        (q8, qd, qx), (k8, kd, kx), (v8, vd, vx) = quantize(q), quantize(k), quantize(v)
        dequantized = reference(qx, kx, vx)
        x = {"q": q.to(torch.bfloat16), "k": k.to(torch.bfloat16), "v": v.to(torch.bfloat16),
             "q8": q8, "k8": k8, "v8": v8, "qd": qd, "kd": kd, "vd": vd}
        for peer, (dtype, setup) in PEERS.items():
            if peer.startswith("cuDNN fp8"):
                rows.append({"dist": dist, "peer": peer, "unavailable": "takes per-tensor scales only; these "
                             "inputs are quantized per (batch, kv head) as FA3 recommends"})
                continue
            try:
                result = setup(x)()
            except PeerUnavailable as e:
                rows.append({"dist": dist, "peer": peer, "unavailable": str(e)})
                continue
            out = result[0] if isinstance(result, tuple) else result
            if peer.startswith("FA2") or peer.startswith("cuDNN bf16"):
                out = out.transpose(1, 2)
            row = {"dist": dist, "peer": peer, "dtype": dtype, "end_to_end": rel_l2(out, exact)}
            if peer in ("flashprefill fp8", "flashprefill fp8, fp16 P", "flashprefill fp8, fp16 scores", "FA3 fp8"):
                row["kernel_only"] = rel_l2(out, dequantized)  # the others quantize their own way
            rows.append(row)
        rows.append({"dist": dist, "peer": "input rounding floor (fp8, float64 attention)", "dtype": "fp8",
                     "end_to_end": rel_l2(dequantized, exact)})
        ideal = reference(qx, kx, vx, e4m3_p=True)
        rows.append({"dist": dist, "peer": "ideal e4m3 P (float64 attention, P rounded to nearest e4m3)",
                     "dtype": "fp8", "end_to_end": rel_l2(ideal, exact), "kernel_only": rel_l2(ideal, dequantized)})
        # flashprefill's preparations of the float32 inputs (fp.quantize_qkv; float32 scores unless said)
        import flashprefill as fp
        for name, options, p in (("quantize_qkv's defaults (rotation, per-block 384; on Hopper float16 scores, "
                                  "v prepared)", None, "default"),
                                 ("rotation, per-head factors", dict(per_block=None), "default"),
                                 ("rotation, per-block (GPU quantizer)", dict(per_block=128), "default"),
                                 ("rotation, per-block 384 (192-key tiles)", dict(per_block=384), "default"),
                                 ("rotation + K smoothing, per-block", dict(per_block=128, smooth_k=True), "default"),
                                 ("per-block, no rotation", dict(per_block=128, rotate=False), "default"),
                                 ("rotation, per-block, fp16 P", dict(per_block=128), "fp16"),
                                 ("rotation, per-head factors, fp16 scores", dict(per_block=None, scores="fp16"),
                                  "default")):
            options = {} if options is None else {"scores": "fp32", **options}
            out = fp.attention(**fp.quantize_qkv(q, k, v, probabilities=p, **options), causal=True)
            rows.append({"dist": dist, "peer": f"flashprefill fp8: {name}", "dtype": "fp8",
                         "end_to_end": rel_l2(out, exact)})
    os.makedirs(args.out, exist_ok=True)
    run = (records.today(), args.commit or records.git_commit(), torch.cuda.get_device_name(), "accuracy")
    record = {"date": run[0], "commit": run[1], "device": run[2], "seq": args.seq, "heads": [HEADS_Q, HEADS_KV],
              "dims": [DIM, DIM_V], "rows": rows}
    with open(os.path.join(args.out, f"accuracy{'' if args.shape == 'hd128' else '_' + args.shape}.json"), "w") as f:
        json.dump(record, f, indent=1)
    if args.records:
        records.append(records.accuracy_rows(record, records.accuracy_shape(record), run), args.records)
    print(f"relative L2 vs float64, causal, S={args.seq}, {HEADS_Q}/{HEADS_KV} heads, dim_qk {DIM}, dim_v {DIM_V}")
    for r in rows:
        if "unavailable" in r:
            print(f"  {r['dist']:8s} {r['peer']:52s} unavailable: {r['unavailable'][:60]}")
        else:
            extra = f"  kernel-only {r['kernel_only']:.3e}" if "kernel_only" in r else ""
            print(f"  {r['dist']:8s} {r['peer']:52s} {r['end_to_end']:.3e}{extra}")


if __name__ == "__main__":
    main()
