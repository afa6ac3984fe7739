"""Two builds of the library, A and B, timed side by side in one process (H200): `python tools/ab_builds.py
--a A.so --b B.so [--label "what B changes"] [--cases mixed,4kx4]`, on the same inputs, in interleaved rounds
(tools/timing.py: per call and back to back, the order reversed every second round). The one binding swaps its
library before each timing (Builds.select), and checks that the library it calls is the file asked for: two imports
of the binding under two FLASHPREFILL_LIBRARY values share its lazily imported submodules, so that both ran the
library imported last (the bug that once made every such comparison read 1.00). Prints B over A per case (A's time
over B's, round by round: above 1, B is faster) and whether the outputs are equal bit for bit; appends records rows
"A/B <label>" (--records, default bench/records.csv) and writes --out (JSON)."""
import argparse
import ctypes
import itertools
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402
import timing  # noqa: E402


class Builds:
    """The binding's library swapped between the files of `paths` ({name: path}); select(name) loads that file (once)
    and checks that the binding's calls reach it."""

    def __init__(self, fp, paths):
        self.fp, self.paths = fp, {name: os.path.realpath(path) for name, path in paths.items()}
        if len(set(self.paths.values())) != len(self.paths):
            raise ValueError(f"the builds must be different files, got {paths}")
        self.selected = None

    def select(self, name):
        os.environ["FLASHPREFILL_LIBRARY"] = self.paths[name]
        self.fp._lib.lib.cache_clear()
        library = self.fp._lib.lib()
        where = mapped_file(ctypes.cast(library.flashprefill_version, ctypes.c_void_p).value)
        if where != self.paths[name]:
            raise RuntimeError(f"build {name}: the binding calls {where}, not {self.paths[name]}")
        self.selected = name


def mapped_file(address):
    """The file mapped at `address` in this process (/proc/self/maps), or None."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high and len(fields) >= 6:
                return os.path.realpath(fields[5])
    return None


PER_CALL, BACK_TO_BACK = "ms per call", "ms back to back"  # the records' metrics: times, B over A as A's / B's


def cases(torch, fp):
    """{name: (flops, make)}: make() -> (run for the selected build, output) on inputs made once per case."""
    import bench_varlen_cases
    dev, fp8 = torch.device("cuda"), torch.float8_e4m3fn
    mixed = list(bench_varlen_cases.sample_lengths(65536, 1024, 16, 16384, 0))

    def inputs(rows, heads_q, heads_kv, dim_qk, kind, blocks_of=None, rows_k=None):
        """q, k, v and their descale keywords; blocks_of: a varlen batch's lengths (its BlockScales' shape); rows_k:
        k's and v's rows where they are not q's."""
        rows_k = rows if rows_k is None else rows_k
        q, k, v = (torch.randn(r + (h, d), device=dev) for r, h, d in ((rows, heads_q, dim_qk),
                                                                         (rows_k, heads_kv, dim_qk),
                                                                         (rows_k, heads_kv, 128)))
        if kind == "bf16":
            return (q.bfloat16(), k.bfloat16(), v.bfloat16()), {}
        one = torch.ones(1, device=dev)
        codes = [x.div(4).to(fp8) for x in (k, v)]
        if kind == "bf16q":  # q in bf16 against k and v's codes, rotated and rounded by the kernel
            signs = torch.where(torch.rand(dim_qk, device=dev) < 0.5, -1.0, 1.0)
            return (q.bfloat16(), *codes), dict(k_descale=one, v_descale=one, q_rotation_signs=signs)
        if kind.startswith("fp8 blocks"):  # power-of-two exponents per block of tokens, as a paged cache has per page
            block = int(kind.removeprefix("fp8 blocks"))
            batch, seqlen = (len(blocks_of), max(blocks_of)) if blocks_of else rows[:2]
            scales = [fp.BlockScales(torch.randint(-3, 0, (batch, h, -(-seqlen // block)), dtype=torch.int8,
                                                   device=dev), block) for h in (heads_q, heads_kv, heads_kv)]
            return (q.div(4).to(fp8), *codes), dict(zip(("q_descale", "k_descale", "v_descale"), scales))
        return (q.div(4).to(fp8), *codes), dict(q_descale=one, k_descale=one, v_descale=one)

    def varlen(lengths, heads_q, heads_kv, dim_qk, kind, keys=None):
        """keys: each sequence's keys where they outnumber its queries (chunked prefill; per-tensor kinds)."""
        def make():
            keys_of = lengths if keys is None else keys
            (q, k, v), kw = inputs((sum(lengths),), heads_q, heads_kv, dim_qk, kind, lengths, (sum(keys_of),))
            cu, cu_k = (torch.tensor([0, *itertools.accumulate(n)], dtype=torch.int32, device=dev)
                        for n in (lengths, keys_of))
            longest, longest_k = max(lengths), max(keys_of)
            outs = {name: torch.empty(q.shape[:2] + (128,), dtype=torch.bfloat16, device=dev) for name in "AB"}
            space = fp.varlen_workspace_bytes(q, k, v, cu, cu_k, longest, longest_k, **kw)
            ws = {name: torch.empty(space, dtype=torch.uint8, device=dev) for name in "AB"}
            return lambda name: (lambda: fp.attention_varlen(q, k, v, cu, cu_k, longest, longest_k, causal=True,
                                                             out=outs[name], workspace=ws[name], **kw)), outs
        return make

    def dense(batch, seqlen, heads_q, heads_kv, dim_qk, kind):
        def make():
            (q, k, v), kw = inputs((batch, seqlen), heads_q, heads_kv, dim_qk, kind)
            outs = {name: torch.empty(q.shape[:3] + (128,), dtype=torch.bfloat16, device=dev) for name in "AB"}
            return lambda name: (lambda: fp.attention(q, k, v, causal=True, out=outs[name], **kw)), outs
        return make

    def flops(lengths, heads_q, dim_qk):  # causal: half of 2 n^2 (dim_qk + dim_v) a head
        return sum(n * n * heads_q * (dim_qk + 128) for n in lengths)

    table = {}
    for kind in ("fp8", "bf16"):
        table[f"hd128 mixed 64k {kind}"] = (flops(mixed, 32, 128), varlen(mixed, 32, 8, 128, kind))
        table[f"mla mixed 64k {kind}"] = (flops(mixed, 16, 192), varlen(mixed, 16, 16, 192, kind))
        table[f"hd128 16x4k varlen {kind}"] = (flops([4096] * 16, 32, 128), varlen([4096] * 16, 32, 8, 128, kind))
        table[f"mla 16x4k varlen {kind}"] = (flops([4096] * 16, 16, 192), varlen([4096] * 16, 16, 16, 192, kind))
        table[f"hd128 16x1k varlen {kind}"] = (flops([1024] * 16, 32, 128), varlen([1024] * 16, 32, 8, 128, kind))
        table[f"mla 16x1k varlen {kind}"] = (flops([1024] * 16, 16, 192), varlen([1024] * 16, 16, 16, 192, kind))
        chunk = 4 * (32768 ** 2 - 30720 ** 2) * 16 * (192 + 128)  # 4 x 2k new queries on 30k cached keys
        table[f"mla chunk 2k on 30k {kind}"] = (chunk, varlen([2048] * 4, 16, 16, 192, kind, keys=[32768] * 4))
        table[f"hd128 4kx4 dense {kind}"] = (flops([4096] * 4, 32, 128), dense(4, 4096, 32, 8, 128, kind))
        table[f"hd128 16k dense {kind}"] = (flops([16384], 32, 128), dense(1, 16384, 32, 8, 128, kind))
        table[f"mla 16k dense {kind}"] = (flops([16384], 16, 192), dense(1, 16384, 16, 16, 192, kind))
    # the per-page exponents of a paged cache's own form
    for shape, block, lengths in (("16k varlen", 128, [16384]), ("mixed 64k", 256, mixed)):
        kind = f"fp8 blocks{block}"
        table[f"hd128 {shape} {kind}"] = (flops(lengths, 32, 128), varlen(lengths, 32, 8, 128, kind))
        table[f"mla {shape} {kind}"] = (flops(lengths, 16, 192), varlen(lengths, 16, 16, 192, kind))
    table["hd128 4x4k bf16q rotated"] = (flops([4096] * 4, 32, 128), varlen([4096] * 4, 32, 8, 128, "bf16q"))
    table["hd128 mixed 64k bf16q rotated"] = (flops(mixed, 32, 128), varlen(mixed, 32, 8, 128, "bf16q"))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="build A's library file (the base)")
    ap.add_argument("--b", required=True, help="build B's library file (the change)")
    ap.add_argument("--label", default="B", help="what B changes, for the records")
    ap.add_argument("--cases", default=None, help="comma-separated parts of case names to run (default: all)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--out", default=None, help="the JSON record (default: none)")
    ap.add_argument("--records", default=None, help='the records file (default bench/records.csv); "": none')
    ap.add_argument("--commit", default=None, help="the commit of B (default: git's HEAD)")
    args = ap.parse_args()
    import torch
    import flashprefill as fp
    builds = Builds(fp, {"A": args.a, "B": args.b})
    wanted = args.cases.split(",") if args.cases else None
    run = (records.today(), args.commit or records.git_commit(), torch.cuda.get_device_name(), f"A/B {args.label}")
    results, rows = [], []
    for name, (flops, make) in cases(torch, fp).items():
        if wanted and not any(w in name for w in wanted):
            continue
        runner, outs = make()
        runs = {build: [runner(build)] for build in "AB"}
        for build in "AB":
            builds.select(build)
            runs[build][0]()
        torch.cuda.synchronize()
        same = bool(torch.equal(outs["A"], outs["B"]))
        timed = timing.time_rounds(runs, args.rounds, args.launches, dict.fromkeys("AB", flops), torch.cuda,
                                   before=builds.select)
        result = {"case": name, "same_bits": same}
        for metric, rounds_key, ms_key, spread_key in ((PER_CALL, "round_medians_ms", "median_ms", "spread"),
                                                       (BACK_TO_BACK, "back_to_back_rounds_ms", "back_to_back_ms",
                                                        "back_to_back_spread")):
            ratios = [a / b for a, b in zip(timed["A"][rounds_key], timed["B"][rounds_key])]
            result[metric] = [statistics.median(ratios), min(ratios), max(ratios)]
            rows.append(records.row(run, metric, name, f"B: {args.label}", f"A: {os.path.basename(args.a)}", ratios,
                                    timed["B"][ms_key], timed["A"][ms_key], timed["B"][spread_key],
                                    timed["A"][spread_key]))
        results.append(result)
        b2b = result[BACK_TO_BACK]
        print(f"{name}: B over A back to back {b2b[0]:.3f} [{b2b[1]:.3f}, {b2b[2]:.3f}], per call "
              f"{result[PER_CALL][0]:.3f}; outputs {'equal' if same else 'differ'}", flush=True)
        del runs, outs
        torch.cuda.empty_cache()
    if args.records != "":
        records.append(rows, args.records or records.RECORDS)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"a": args.a, "b": args.b, "label": args.label, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
