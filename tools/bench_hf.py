"""A whole model's prefill through Hugging Face transformers, its attention by SDPA, FlashAttention-3 and flashprefill
(flashprefill.hf), one process, one GPU.

The model: Llama-3.1-8B's architecture (CONFIG: 32 layers, hidden 4096, 32 query and 8 kv heads of dim 128, llama3
RoPE, vocab 128256), its weights initialised from the config on the GPU in bf16 (seeded; nothing is downloaded).
Per length (4k, 8k, 16k tokens; batch 1; seeded random token ids), for each backend:
  accuracy  one prefill keeping every position's logits: their relative L2 against SDPA's, and the fraction of
            positions whose top-1 token is SDPA's;
  speed     the prefill an engine runs (no KV cache kept, the last position's logits only), timed as tools/timing.py
            does: a warm-up, then `rounds` interleaved rounds of `launches` calls between CUDA events; the median
            and the spread of the round medians.
Backends: transformers' "sdpa"; FlashAttention-3 bf16 (fa3_fwd's fa3_fwd_interface, registered through
flashprefill.hf.register_causal: transformers' own "flash_attention_3" imports a flash_attn_interface module, which
fa3_fwd does not provide); flashprefill bf16 and fp8 (flashprefill.hf.register; fp8 quantizes q, k, v in every
call with quantize_qkv's defaults, the rotation on). Random weights make the logits' margins small, so FlashAttention-3
bf16's own agreement with SDPA is the yardstick of the top-1 figures.

    python tools/bench_hf.py [--out DIR] [--records CSV] [--commit SHA] [--layers N] [--lengths 4096,8192,16384]
        [--rounds R] [--launches L]
writes DIR/bench_hf.json and DIR/bench_hf.md (default bench/latest/) and appends each flashprefill backend's speed
ratios and logits' error to the records file (tools/records.py, hf_rows; --records "" appends nothing); prints the
table last. Torch and transformers are imported by main(), so the report functions run on the CPU tests.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402
import timing  # noqa: E402

MODEL = "Llama-3.1-8B"
# meta-llama/Llama-3.1-8B's config.json (architecture only)
CONFIG = {"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
          "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
          "bos_token_id": 128000, "eos_token_id": 128001,
          "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
LENGTHS = (4096, 8192, 16384)
SDPA, FA3, OURS_BF16, OURS_FP8 = "SDPA", "FA3 bf16", "flashprefill bf16", "flashprefill fp8"
BACKENDS = (SDPA, FA3, OURS_BF16, OURS_FP8)
COMPARE_POSITIONS = 1024  # logits compared this many positions at a time (float32 copies of 0.5 GB)


def register_backends():
    """({backend: its attn_implementation name}, {backend: why it is unavailable})."""
    from flashprefill import hf
    names, unavailable = {SDPA: "sdpa"}, {}
    try:
        from fa3_fwd_interface import flash_attn_func
    except ImportError as e:
        unavailable[FA3] = f"fa3_fwd not installed ({e})"
    else:
        names[FA3] = hf.register_causal(
            "fa3_bf16", lambda q, k, v, scale: flash_attn_func(q, k, v, softmax_scale=scale, causal=True))
    names[OURS_BF16] = hf.register("fprefill")
    names[OURS_FP8] = hf.register("fprefill_fp8", dtype="float8_e4m3fn")
    return names, unavailable


def model_config(layers):
    return {**CONFIG, "num_hidden_layers": layers}


def build_model(layers, seed):
    """The model of model_config(layers), bf16 on the GPU, its weights drawn there from `seed`."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(LlamaConfig(**model_config(layers)), dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
    return model.eval()


def prefill_flops(config, tokens):
    """The prefill's floating-point operations: the layers' projections and MLP for every token, causal attention
    (2·S²·dim per query head and layer), and the last position's logits."""
    hidden, layers, inter = config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]
    q_width = config["num_attention_heads"] * config["head_dim"]
    kv_width = config["num_key_value_heads"] * config["head_dim"]
    per_token = 2 * layers * hidden * (2 * q_width + 2 * kv_width + 3 * inter)
    attention = 2 * layers * config["num_attention_heads"] * tokens**2 * config["head_dim"]
    return per_token * tokens + attention + 2 * hidden * config["vocab_size"]


def prefill(model, name, ids, logits_to_keep):
    model.set_attn_implementation(name)
    return model(input_ids=ids, use_cache=False, logits_to_keep=logits_to_keep).logits


def compare(logits, reference):
    """{logits_rel_l2, top1_agreement} of logits (1, S, vocab) against the reference's."""
    import torch
    squared_error = squared_norm = torch.zeros((), dtype=torch.float64, device=logits.device)
    agree = torch.zeros((), dtype=torch.int64, device=logits.device)
    positions = logits.shape[1]
    for start in range(0, positions, COMPARE_POSITIONS):
        a, b = (x[0, start:start + COMPARE_POSITIONS].float() for x in (logits, reference))
        squared_error = squared_error + (a - b).double().square().sum()
        squared_norm = squared_norm + b.double().square().sum()
        agree = agree + (a.argmax(dim=-1) == b.argmax(dim=-1)).sum()
    return {"logits_rel_l2": (squared_error / squared_norm).sqrt().item(), "top1_agreement": agree.item() / positions}


def measure_accuracy(model, names, ids):
    """{backend: compare() of its logits against SDPA's} (SDPA's own: {"reference": True})."""
    reference = prefill(model, names[SDPA], ids, 0)
    accuracy = {SDPA: {"reference": True}}
    for backend, name in names.items():
        if backend != SDPA:
            accuracy[backend] = compare(prefill(model, name, ids, 0), reference)
    return accuracy


def bench_length(model, names, unavailable, tokens, generator, layers, rounds, launches):
    import torch
    ids = torch.randint(0, CONFIG["vocab_size"], (1, tokens), device="cuda", generator=generator)
    accuracy = measure_accuracy(model, names, ids)
    setups = {backend: (lambda x, name=name: lambda: prefill(model, name, x, 1)) for backend, name in names.items()}
    runs, refused = timing.prepare(setups, [ids], torch.cuda)
    flops = prefill_flops(model_config(layers), tokens)
    timings = timing.time_rounds(runs, rounds, launches, dict.fromkeys(runs, flops), torch.cuda)
    results = {}
    for backend in BACKENDS:
        reason = unavailable.get(backend) or refused.get(backend)
        if reason is not None:
            results[backend] = {"unavailable": reason}
            continue
        t = timings[backend]
        results[backend] = {**t, "tokens_per_s": tokens / t["median_ms"] * 1e3, **accuracy[backend]}
    length = f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)
    return {"shape": f"{MODEL} {layers}L {length} b1", "tokens": tokens, "flops": flops, "results": results}


def _ratio(results, backend, peer):
    r, p = results[backend], results.get(peer, {})
    if "unavailable" in r or "median_ms" not in p:
        return "-"
    return f"{p['median_ms'] / r['median_ms']:.2f}×"


def markdown(record):
    """The record as a markdown table: per length and backend, the prefill time, its spread, tokens/s, the speed
    relative to SDPA and to FlashAttention-3 bf16, and the logits against SDPA's."""
    lines = [f"{record['model']} ({record['layers']} layers, random bf16 weights), prefill of batch 1 on "
             f"{record['device']}; {record['rounds']} rounds of {record['launches']} calls; commit {record['commit']}",
             "",
             "| tokens | backend | prefill ms | spread | tokens/s | vs SDPA | vs FA3 bf16 | logits rel. L2 vs SDPA "
             "| top-1 = SDPA's |",
             "|---|---|---|---|---|---|---|---|---|"]
    for length in record["lengths"]:
        results = length["results"]
        for backend, r in results.items():
            if "unavailable" in r:
                lines.append(f"| {length['tokens']} | {backend} | unavailable: {r['unavailable']} | | | | | | |")
                continue
            error = ("reference", "reference") if r.get("reference") else \
                (f"{r['logits_rel_l2']:.3e}", f"{r['top1_agreement']:.2%}")
            lines.append(f"| {length['tokens']} | {backend} | {r['median_ms']:.1f} | {r['spread']:.1%} | "
                         f"{r['tokens_per_s']:,.0f} | {_ratio(results, backend, SDPA)} | "
                         f"{_ratio(results, backend, FA3)} | {error[0]} | {error[1]} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=records.LATEST)
    ap.add_argument("--records", default=records.RECORDS, help="the records file to append to; empty: none")
    ap.add_argument("--commit", default=None, help="the commit measured (default: git's HEAD)")
    ap.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"])
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="prompt lengths in tokens, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--launches", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    started = time.perf_counter()
    import torch
    import transformers

    names, unavailable = register_backends()
    model = build_model(args.layers, args.seed)
    print(f"model built in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    lengths = []
    with torch.inference_mode():
        for tokens in (int(n) for n in args.lengths.split(",")):
            lengths.append(bench_length(model, names, unavailable, tokens, generator, args.layers, args.rounds,
                                        args.launches))
            print(f"{tokens} tokens done at {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    device = torch.cuda.get_device_name()
    run = (records.today(), args.commit or records.git_commit(), device, "bench_hf")
    record = {"date": run[0], "commit": run[1], "device": device, "torch": torch.__version__,
              "transformers": transformers.__version__, "model": MODEL, "layers": args.layers,
              "config": model_config(args.layers), "seed": args.seed, "rounds": args.rounds,
              "launches": args.launches, "lengths": lengths, "seconds": time.perf_counter() - started}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_hf.json"), "w") as f:
        json.dump(record, f, indent=1)
    if args.records:
        records.append(records.hf_rows(record, run), args.records)
    table = markdown(record)
    with open(os.path.join(args.out, "bench_hf.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
