"""The problems of the variable-length and paged-KV benchmark (tools/bench_varlen.py), torch-free so that the CPU
tests and the dry run build them as the GPU run does: sequence lengths, cu_seqlens, causal work per sequence, page
tables, and the groups of implementations timed side by side with the pairs each group reports.

Work: FLOPs = 2 · (visible (query, key) pairs) · heads_q · (dim_qk + dim_v), the pairs counted exactly per sequence
with the causal mask aligned bottom-right (query i of lq sees key j of lk iff j <= i + lk - lq). For lq = lk = S
that is heads_q · S(S + 1) · (dim_qk + dim_v), tools/bench.py's S² count times (1 + 1/S): the same within 0.03% at
4k, but exact for the short sequences of a mixed batch, where the diagonal is a larger share of the work.
"""
import dataclasses

import numpy as np

LENGTH_SIGMA = 1.0  # the mixed batch's lognormal spread (natural log): half its lengths within 0.51-1.96 x median


def sample_lengths(total_tokens, median, low, high, seed, sigma=LENGTH_SIGMA):
    """Sequence lengths (a tuple of ints) summing to total_tokens: drawn from a lognormal of this median, rounded and
    clipped to [low, high], until the total is reached. The last draw is cut to what remains; a remainder under `low`
    goes to the shortest sequence instead. The same seed gives the same lengths on every machine."""
    if not 0 < low <= median <= high:
        raise ValueError(f"need 0 < low <= median <= high, got {low}, {median}, {high}")
    rng = np.random.default_rng(seed)
    lengths, remaining = [], total_tokens
    while remaining > 0:
        drawn = int(np.clip(np.rint(rng.lognormal(np.log(median), sigma)), low, high))
        if remaining < low and lengths:
            shortest = int(np.argmin(lengths))
            if lengths[shortest] + remaining > high:
                raise ValueError(f"no sequence can take the remaining {remaining} tokens within {high}")
            lengths[shortest] += remaining
            break
        lengths.append(min(drawn, remaining))
        remaining -= lengths[-1]
    return tuple(lengths)


def causal_pairs(lengths_q, lengths_k):
    """The (query, key) pairs the bottom-right causal mask lets through, per sequence (int64 array): with
    n = min(lq, lk), n(n + 1)/2 + (lk - n)·lq (a query row i sees i + lk - lq + 1 keys, at most lk, at least 0)."""
    lq, lk = np.asarray(lengths_q, dtype=np.int64), np.asarray(lengths_k, dtype=np.int64)
    n = np.minimum(lq, lk)
    return n * (n + 1) // 2 + (lk - n) * lq


def varlen_flops(lengths_q, lengths_k, heads_q, dim_qk, dim_v):
    """Floating-point operations of causal varlen attention: 2 · pairs · heads_q · (dim_qk + dim_v)."""
    return 2 * int(causal_pairs(lengths_q, lengths_k).sum()) * heads_q * (dim_qk + dim_v)


def cu_seqlens(lengths):
    """int32 (batch + 1,): 0 and the running sums of `lengths`, where each sequence starts and ends."""
    offsets = np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))])
    if offsets[-1] >= 2**31:
        raise ValueError(f"{offsets[-1]} tokens do not fit int32 offsets")
    return offsets.astype(np.int32)


def token_sequences(lengths):
    """int64 (sum of lengths,): the sequence each token of the varlen layout belongs to."""
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def key_rows(capacity_k, lengths_k):
    """int64: the rows of the varlen k layout (sequence b's rows start at cu_seqlens(capacity_k)[b]) that hold its
    first lengths_k[b] keys, the keys its queries see (seqused_k), sequence after sequence."""
    starts = cu_seqlens(capacity_k)[:-1].astype(np.int64)
    return np.concatenate([start + np.arange(n, dtype=np.int64) for start, n in zip(starts, lengths_k)])


def page_table(lengths_k, page_size, seed):
    """(block_table int32 (batch, max pages), num_pages) of a paged cache holding these sequences' keys, its pages in
    a random order: sequence b owns ceil(lengths_k[b] / page_size) pages, drawn without replacement from a seeded
    permutation of all num_pages. Entries past a sequence's last page hold page 0: never read, and valid for a peer
    that reads them anyway."""
    pages = -(-np.asarray(lengths_k, dtype=np.int64) // page_size)
    num_pages = int(pages.sum())
    order = np.random.default_rng(seed).permutation(num_pages).astype(np.int32)
    table = np.zeros((len(pages), max(int(pages.max(initial=0)), 1)), dtype=np.int32)
    for b, start in enumerate(np.concatenate([[0], np.cumsum(pages)])[:-1]):
        table[b, :pages[b]] = order[start:start + pages[b]]
    return table, num_pages


def paged_rows(lengths_k, page_size, table):
    """int64: the row of a (num_pages · page_size, ...) view of the cache holding each key, sequence after sequence
    (key j of sequence b: page table[b, j // page_size], row j % page_size), the order of key_rows."""
    return np.concatenate([table[b, j // page_size].astype(np.int64) * page_size + j % page_size
                           for b, j in enumerate(np.arange(n, dtype=np.int64) for n in lengths_k)])


def tokens(n):
    """A token count as the benchmarks name sizes: 4096 -> "4k", 200 -> "200"."""
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


@dataclasses.dataclass(frozen=True)
class Problem:
    """One batch: lengths_q[b] queries of sequence b see its first lengths_k[b] keys (bottom-right causal); its k and
    v rows in the varlen layout number capacity_k[b] >= lengths_k[b] (the rows past lengths_k are never read:
    seqused_k)."""
    heads_q: int
    heads_kv: int
    dim_qk: int
    dim_v: int
    lengths_q: tuple
    lengths_k: tuple
    capacity_k: tuple

    @property
    def flops(self):
        return varlen_flops(self.lengths_q, self.lengths_k, self.heads_q, self.dim_qk, self.dim_v)

    @property
    def uses_seqused(self):
        """Whether the contiguous form needs seqused_k (some sequence has rows it does not use)."""
        return self.capacity_k != self.lengths_k


@dataclasses.dataclass(frozen=True)
class Group:
    """Implementations timed in the same rounds: the varlen forms (contiguous, and paged at each of page_sizes) of
    `problem`, and the equal-length path on `equal` (a problem of equal lengths, or None): `problem` itself, on the
    same inputs, or another, compared by work per time."""
    shape: str
    problem: Problem
    equal: Problem = None
    page_sizes: tuple = (64, 256)


BF16_Q_DIM = 128  # the dim_qk of the kernels that take a bf16 q against fp8 k and v
BF16_Q_NAME = "flashprefill fp8 varlen, bf16 q"


def takes_bf16_q(problem):
    """Whether a problem is timed with q in bf16 against the fp8 cache too (what an engine's call costs when the
    kernel rotates and rounds q itself)."""
    return problem.dim_qk == BF16_Q_DIM


def implementations(group):
    """{name: (library, dtype, form, page_size)} of a group, in the order they are timed; form is "varlen",
    "varlen bf16 q" (ours: bf16 q rotated and rounded by the kernel against rotated fp8 k, varlen_peers), "paged",
    "paged scales" (ours fp8 only: the cache's own form, varlen_peers) or "equal"."""
    names = {}
    for dtype in ("fp8", "bf16"):
        for library in ("flashprefill", "FA3"):
            names[f"{library} {dtype} varlen"] = (library, dtype, "varlen", None)
            if (library, dtype) == ("flashprefill", "fp8") and takes_bf16_q(group.problem):
                names[BF16_Q_NAME] = (library, dtype, "varlen bf16 q", None)
            for page in group.page_sizes:
                names[f"{library} {dtype} paged {page}"] = (library, dtype, "paged", page)
                if (library, dtype) == ("flashprefill", "fp8"):
                    names[f"{library} {dtype} paged {page}, page scales"] = (library, dtype, "paged scales", page)
        if group.equal is not None:
            names[equal_name(dtype, group.equal)] = ("flashprefill", dtype, "equal", None)
    return names


def equal_name(dtype, problem):
    """Our equal-length path's name by its shape, e.g. "flashprefill fp8 16x4k"."""
    return f"flashprefill {dtype} {len(problem.lengths_q)}x{tokens(problem.lengths_q[0])}"


def pairs(group):
    """[(ours, (peers...))]: what each row of the report compares, the peer being the first of its candidates that
    ran. Ours against FA3 on the same work; paged against our contiguous varlen on the same work; FA3's paged form
    where it runs, else its contiguous varlen; varlen against the equal-length path (work per time); fp8 paged in
    the cache's own form (page scales) against paged with factors, and against FA3."""
    out = []
    for dtype in ("fp8", "bf16"):
        varlen = f"flashprefill {dtype} varlen"
        out.append((varlen, (f"FA3 {dtype} varlen",)))
        if dtype == "fp8" and takes_bf16_q(group.problem):
            out += [(BF16_Q_NAME, ("FA3 fp8 varlen",)), (BF16_Q_NAME, (varlen,))]
        if group.equal is not None:
            out.append((varlen, (equal_name(dtype, group.equal),)))
        for page in group.page_sizes:
            paged = f"flashprefill {dtype} paged {page}"
            fa3 = (f"FA3 {dtype} paged {page}", f"FA3 {dtype} varlen")
            out += [(paged, (varlen,)), (paged, fa3)]
            if dtype == "fp8":
                out += [(f"{paged}, page scales", (paged,)), (f"{paged}, page scales", fa3)]
    return out


HEADS = ((32, 8, 128, 128), (16, 16, 192, 128))  # (heads_q, heads_kv, dim_qk, dim_v): Llama-style, DeepSeek-V2-Lite


def heads_tag(heads_q, heads_kv, dim_qk, dim_v):
    """The heads as tools/bench.py names its shapes: "hd128 32/8", or "mla 192/128 16h" where the dims differ."""
    return f"hd{dim_qk} {heads_q}/{heads_kv}" if dim_qk == dim_v else f"mla {dim_qk}/{dim_v} {heads_q}h"


def groups(token_scale=1, head_scale=1, seed=0):
    """The benchmark's groups, at each of HEADS. Equal lengths: 16 x 4k through attention_varlen and through the
    equal-length path on the same inputs (what varlen costs by itself). Mixed: 64k tokens in lengths from a lognormal
    of median 1k clipped to [16, 16k], contiguous and paged, beside the equal-length path at 16 x 4k (work per time).
    Chunked prefill: 4 sequences of 2k new queries on 30k cached keys (32k keys seen, bottom-right), each sequence's
    rows holding 2k more (seqused_k), contiguous and paged. The dry run's numpy stand-ins take the groups smaller:
    token_scale divides every token count (not the 16-token floor nor the page sizes), head_scale the heads (and
    the names say so). bf16 q against the fp8 cache (takes_bf16_q): in every hd128 group, and at 4 x 4k of its own."""
    mixed = sample_lengths(65536 // token_scale, 1024 // token_scale, 16, 16384 // token_scale, seed)
    equal = ((4096 // token_scale,) * 16,) * 3
    batch, new, cached, spare = 4, 2048 // token_scale, 30720 // token_scale, 2048 // token_scale
    out = []
    for hq, hkv, dqk, dv in HEADS:
        hq, hkv = max(hq // head_scale, 1), max(hkv // head_scale, 1)
        tag = heads_tag(hq, hkv, dqk, dv)
        square = Problem(hq, hkv, dqk, dv, *equal)
        out.append(Group(f"{tag} varlen {len(equal[0])}x{tokens(equal[0][0])}", square, square, ()))
        out.append(Group(f"{tag} varlen {tokens(sum(mixed))} lognormal {tokens(1024 // token_scale)}",
                         Problem(hq, hkv, dqk, dv, mixed, mixed, mixed), square))
        out.append(Group(f"{tag} chunk {tokens(new)} on {tokens(cached)} b{batch}",
                         Problem(hq, hkv, dqk, dv, (new,) * batch, (cached + new,) * batch,
                                 (cached + new + spare,) * batch)))
        if dqk == BF16_Q_DIM:
            four = ((4096 // token_scale,) * 4,) * 3
            out.append(Group(f"{tag} varlen 4x{tokens(four[0][0])}", Problem(hq, hkv, dqk, dv, *four), None, ()))
    return out
