"""The variable-length benchmark's pure parts (CPU only): lengths drawn and reproduced, causal work per sequence
with the bottom-right mask, page tables and paged caches, the groups' pairs, the record rows, and one small group
run end to end on the numpy stand-ins (tools/bench_varlen.py --dry-run's path)."""
import math
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import bench_varlen  # noqa: E402
import records  # noqa: E402
import timing  # noqa: E402
import bench_varlen_cases as vc  # noqa: E402
from flashprefill import prepare  # noqa: E402
from flashprefill.reference import attention_reference, relative_l2  # noqa: E402
from varlen_arrays import NumpyOps  # noqa: E402
from varlen_standins import attention_varlen  # noqa: E402

RUN = ("2026-12-01", "abc1234", "a GPU", "bench_varlen")


def test_lengths_of_seed_0_are_the_ones_the_gpu_run_draws():
    # numpy's Generator streams are stable across versions: a change here changes every record's problem
    lengths = vc.sample_lengths(65536, 1024, 16, 16384, 0)
    assert (len(lengths), lengths[:5], max(lengths)) == (47, (1161, 897, 1943, 1137, 599), 4654)


@pytest.mark.parametrize("total, median, low, high", [(65536, 1024, 16, 16384), (2048, 32, 16, 512),
                                                      (20, 16, 16, 64), (5, 16, 16, 64), (1000, 100, 16, 100)])
def test_lengths_sum_to_the_total_within_bounds_and_repeat_with_the_seed(rng, total, median, low, high):
    seed = int(rng.integers(2**31))
    lengths = vc.sample_lengths(total, median, low, high, seed)
    assert sum(lengths) == total and all(isinstance(n, int) for n in lengths)
    assert all(low <= n <= high for n in lengths) or lengths == (total,) and total < low
    assert vc.sample_lengths(total, median, low, high, seed) == lengths
    if total > 10 * high:
        assert vc.sample_lengths(total, median, low, high, seed + 1) != lengths


def test_lengths_have_the_median_asked_for(rng):
    pooled = np.concatenate([vc.sample_lengths(65536, 1024, 16, 16384, int(s)) for s in rng.integers(2**31, size=30)])
    assert 850 < np.median(pooled) < 1200  # ~1200 draws; the lognormal's median is 1024


def _pairs_by_mask(lq, lk):
    i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
    return int((j <= i + lk - lq).sum())


def test_causal_pairs_count_the_bottom_right_mask(rng):
    lq = rng.integers(0, 300, size=40).tolist() + [0, 5, 300, 1, 7]
    lk = rng.integers(0, 300, size=40).tolist() + [7, 0, 300, 1, 5]
    got = vc.causal_pairs(lq, lk)
    assert got.tolist() == [_pairs_by_mask(a, b) for a, b in zip(lq, lk)]
    heads_q, dim_qk, dim_v = 32, 192, 128
    assert vc.varlen_flops(lq, lk, heads_q, dim_qk, dim_v) == 2 * int(got.sum()) * heads_q * (dim_qk + dim_v)


@pytest.mark.parametrize("seq", [1, 16, 4096])
def test_equal_lengths_count_bench_pys_work_with_the_diagonal(seq):
    batch, heads_q, dim_qk, dim_v = 16, 32, 128, 128
    bench_py = batch * heads_q * seq * seq * (dim_qk + dim_v)
    assert vc.varlen_flops([seq] * batch, [seq] * batch, heads_q, dim_qk, dim_v) == bench_py * (seq + 1) // seq


def test_offsets_sequences_and_used_rows_agree(rng):
    used = rng.integers(0, 50, size=7)
    capacity = used + rng.integers(0, 5, size=7)
    cu = vc.cu_seqlens(capacity)
    assert cu.dtype == np.int32 and cu[0] == 0 and np.array_equal(np.diff(cu), capacity)
    owner = vc.token_sequences(capacity)
    rows = vc.key_rows(capacity, used)
    assert len(rows) == used.sum() and np.array_equal(owner[rows], np.repeat(np.arange(7), used))
    assert all(0 <= r - cu[owner[r]] < used[owner[r]] for r in rows)


@pytest.mark.parametrize("page_size", [16, 64, 256])
def test_page_tables_give_each_sequence_its_own_pages_in_a_random_order(rng, page_size):
    lengths = rng.integers(0, 3000, size=9).tolist() + [page_size, page_size + 1]
    seed = int(rng.integers(2**31))
    table, num_pages = vc.page_table(lengths, page_size, seed)
    pages = [-(-n // page_size) for n in lengths]
    assert table.dtype == np.int32 and table.shape == (len(lengths), max(pages)) and num_pages == sum(pages)
    owned = np.concatenate([table[b, :p] for b, p in enumerate(pages)])
    assert sorted(owned.tolist()) == list(range(num_pages))  # every page once
    assert all((table[b, p:] == 0).all() for b, p in enumerate(pages))  # the rest: page 0, never read
    assert not np.array_equal(owned, np.arange(num_pages))  # permuted
    again, _ = vc.page_table(lengths, page_size, seed)
    assert np.array_equal(again, table)


@pytest.mark.parametrize("page_size", [16, 64])
def test_paged_rows_put_key_j_where_the_abi_reads_it(rng, page_size):
    used = rng.integers(1, 200, size=5)
    capacity = used + rng.integers(0, 20, size=5)
    table, num_pages = vc.page_table(used, page_size, int(rng.integers(2**31)))
    k = rng.standard_normal((int(capacity.sum()), 2, 8)).astype(np.float32)
    cache = np.full((num_pages * page_size, 2, 8), np.nan, dtype=np.float32)
    cache[vc.paged_rows(used, page_size, table)] = k[vc.key_rows(capacity, used)]
    cache = cache.reshape(num_pages, page_size, 2, 8)
    starts = vc.cu_seqlens(capacity)
    for b in range(5):
        for j in range(used[b]):  # include/flashprefill.h: key j of sequence b in page table[b, j / page_size]
            assert np.array_equal(cache[table[b, j // page_size], j % page_size], k[starts[b] + j])


@pytest.mark.parametrize("tokens, heads", [(1, 1), (bench_varlen.DRY_RUN_TOKENS, bench_varlen.DRY_RUN_HEADS)])
def test_groups_pair_only_implementations_they_time(tokens, heads):
    groups = vc.groups(tokens, heads)
    assert len(groups) == 7 and len({g.shape for g in groups}) == 7
    for g in groups:
        names = vc.implementations(g)
        assert all(ours in names and set(peers) <= set(names) for ours, peers in vc.pairs(g))
        assert g.problem.capacity_k >= g.problem.lengths_k and len(g.problem.lengths_q) == len(g.problem.lengths_k)
    square, mixed, chunk = (g.problem for g in groups[:3])
    assert groups[0].equal == square and groups[1].equal == square and groups[2].equal is None
    assert sum(mixed.lengths_q) == sum(square.lengths_q) == 65536 // tokens and not mixed.uses_seqused
    assert chunk.uses_seqused and chunk.lengths_k == ((30720 + 2048) // tokens,) * 4
    assert (mixed.heads_q, mixed.heads_kv) == (32 // heads, 8 // heads)
    if (tokens, heads) == (1, 1):
        assert [g.shape for g in groups] == [
            "hd128 32/8 varlen 16x4k", "hd128 32/8 varlen 64k lognormal 1k", "hd128 32/8 chunk 2k on 30k b4",
            "hd128 32/8 varlen 4x4k", "mla 192/128 16h varlen 16x4k", "mla 192/128 16h varlen 64k lognormal 1k",
            "mla 192/128 16h chunk 2k on 30k b4"]
        assert "flashprefill fp8 16x4k" in vc.implementations(groups[1])
        assert 0.3 < mixed.flops / square.flops < 3  # the equal-length path does comparable work
    # bf16 q against the fp8 cache: in every group of dim_qk 128 (its kernels' dim), beside both fp8 peers
    for g in groups:
        has = vc.BF16_Q_NAME in vc.implementations(g)
        assert has == (g.problem.dim_qk == 128)
        assert ((vc.BF16_Q_NAME, ("FA3 fp8 varlen",)) in vc.pairs(g)) == has
    assert groups[3].problem.lengths_q == (4096 // tokens,) * 4 and groups[3].equal is None


def _timed(ms, flops):
    return {"flops": flops, "tflops": flops / ms[0] / 1e9, "spread": 0.0, "round_medians_ms": ms,
            "back_to_back_tflops": flops / ms[0] / 1e9, "back_to_back_spread": 0.0, "back_to_back_rounds_ms": ms}


def test_record_rows_compare_work_per_time_round_by_round(tmp_path):
    results = {"flashprefill fp8 varlen": _timed([1.0, 2.0, 3.0], 1e12),
               "FA3 fp8 varlen": _timed([1.2, 2.0, 3.3], 1e12),
               "flashprefill fp8 16x4k": _timed([2.0, 4.0, 6.0], 4e12),  # twice as fast per unit of work
               "flashprefill fp8 paged 64": _timed([1.0, 2.0, 3.0], 1e12),
               "FA3 fp8 paged 64": {"flops": 1e12, "unavailable": "not built"}}
    pairs = [("flashprefill fp8 varlen", ("FA3 fp8 varlen",)),
             ("flashprefill fp8 varlen", ("flashprefill fp8 16x4k",)),
             ("flashprefill fp8 paged 64", ("FA3 fp8 paged 64", "FA3 fp8 varlen")),
             ("flashprefill bf16 varlen", ("FA3 bf16 varlen",))]  # neither ran: no row
    record = {"groups": [{"shape": "g", "results": results, "pairs": pairs}]}
    rows = records.varlen_rows(record, RUN)
    got = {(r["ours"], r["peer"], r["metric"]): (r["ratio"], r["ratio_min"], r["ratio_max"]) for r in rows}
    assert len(rows) == 6 and len(got) == 6
    assert got["flashprefill fp8 varlen", "FA3 fp8 varlen", records.PER_CALL] == (1.1, 1.0, 1.2)
    assert got["flashprefill fp8 varlen", "flashprefill fp8 16x4k", records.BACK_TO_BACK] == (0.5, 0.5, 0.5)
    assert got["flashprefill fp8 paged 64", "FA3 fp8 varlen", records.PER_CALL] == (1.1, 1.0, 1.2)
    path = tmp_path / "records.csv"
    assert records.append(rows, str(path)) == 6
    assert path.read_text().splitlines()[0] == ",".join(records.COLUMNS)
    assert [r["ratio"] for r in records.read(str(path))] == [str(r["ratio"]) for r in rows]


def test_inputs_quantize_per_sequence_and_page_the_same_codes(rng):
    ops = NumpyOps()
    problem = vc.Problem(8, 2, 32, 16, (40, 17, 100), (60, 17, 130), (70, 17, 140))
    x = bench_varlen.make_inputs(problem, (16,), int(rng.integers(2**31)), ops)
    owner = vc.token_sequences(problem.capacity_k)
    k = np.asarray(x["k"], dtype=np.float32)
    codes = np.asarray(x["k8"], dtype=np.float32)
    assert x["kd"].shape == (3, 2) and np.abs(codes).max() <= 448
    assert relative_l2(codes * x["kd"][owner][:, :, None], k) < 0.05  # e4m3's rounding, and bf16's
    for b in range(3):  # each (sequence, kv head)'s largest code is 448's neighbourhood: one factor per sequence
        assert (np.abs(codes[owner == b]).max(axis=(0, 2)) > 400).all()
    cache = x["pages"][16]
    for name in ("k", "v"):  # the cache's own form: per page and kv head, amax / 2^e in (224, 448] before rounding
        codes = np.asarray(cache[name + "8p"], dtype=np.float32)
        assert cache[name + "e"].dtype == np.int8 and cache[name + "e"].shape == (codes.shape[0], 2)
        values = codes * np.exp2(cache[name + "e"].astype(np.float32))[:, None, :, None]
        assert relative_l2(values, np.asarray(cache[name], dtype=np.float32)) < 0.05
        largest = np.abs(codes).max(axis=(1, 3))  # e one too large would leave every page at 224 or under
        assert (largest >= 224).all() and (largest > 224).mean() > 0.5 and largest.max() <= 448
    q_codes, q_e = np.asarray(cache["q8p"], dtype=np.float32), cache["qe"]
    assert q_e.dtype == np.int8 and q_e.shape == (3, 8, -(-max(problem.lengths_q) // 16))
    block = np.concatenate([np.arange(n) // 16 for n in problem.lengths_q])
    owner_q = vc.token_sequences(problem.lengths_q)
    q_values = q_codes * np.exp2(q_e[owner_q, :, block].astype(np.float32))[:, :, None]
    assert relative_l2(q_values, np.asarray(x["q"], dtype=np.float32)) < 0.05
    for name in ("k", "k8", "v", "v8"):
        rows = np.asarray(cache[name]).reshape((-1,) + x[name].shape[1:])[vc.paged_rows(problem.lengths_k, 16,
                                                                                          cache["table"])]
        assert np.array_equal(rows.view(np.uint8), x[name][vc.key_rows(problem.capacity_k, problem.lengths_k)]
                              .view(np.uint8))


def test_rotated_k_codes_keep_q_dot_k(rng):
    """The bf16 q form's k: codes of k @ H (H = prepare.hadamard(dim, seed)), so that the kernel's rotation of q by
    the same signs (prepare.transform) leaves q.k as it was; fp8 rounding aside."""
    ops = NumpyOps()
    problem = vc.Problem(4, 2, 128, 128, (40, 70), (40, 70), (40, 70))
    seed = int(rng.integers(2**31))
    x = bench_varlen.make_inputs(problem, (), seed, ops)
    owner = vc.token_sequences(problem.capacity_k)
    k_rot = np.asarray(x["k8r"], dtype=np.float32) * x["kdr"][owner][:, :, None]
    q_rot = prepare.transform_varlen(x["q"], vc.cu_seqlens(problem.lengths_q).tolist(), x["signs"])
    q, k = np.asarray(x["q"], dtype=np.float32), np.asarray(x["k"], dtype=np.float32)
    scores = np.einsum("qhd,khd->hqk", q[:40, ::2], k[:40])  # sequence 0, query heads 0 and 2 against kv heads 0, 1
    rotated = np.einsum("qhd,khd->hqk", q_rot[:40, ::2], k_rot[:40])
    assert relative_l2(rotated, scores) < 0.05  # e4m3's rounding of k
    assert relative_l2(np.einsum("qhd,khd->hqk", q[:40, ::2], k_rot[:40]), scores) > 0.5  # unrotated q: unrelated
    assert "k8r" not in bench_varlen.make_inputs(vc.Problem(4, 2, 192, 128, (8,), (8,), (8,)), (), seed, ops)


def test_stand_in_attention_is_attention(rng):
    lengths_q, lengths_k = [5, 0, 33, 40], [9, 4, 33, 20]  # more queries than keys in the last
    heads_q, heads_kv, dim_qk, dim_v = 4, 2, 16, 8
    q = rng.standard_normal((sum(lengths_q), heads_q, dim_qk)).astype(np.float32)
    k = rng.standard_normal((sum(lengths_k), heads_kv, dim_qk)).astype(np.float32)
    v = rng.standard_normal((sum(lengths_k), heads_kv, dim_v)).astype(np.float32)
    descales = tuple(rng.uniform(0.5, 2.0, size=(4, heads_kv)).astype(np.float32) for _ in range(3))
    out = np.full((sum(lengths_q), heads_q, dim_v), np.nan, dtype=np.float32)
    attention_varlen(q, k, v, vc.cu_seqlens(lengths_q), vc.cu_seqlens(lengths_k), None, None, descales, None, out)
    cq, ck = vc.cu_seqlens(lengths_q), vc.cu_seqlens(lengths_k)
    for b in range(4):
        if lengths_q[b] == 0:
            continue
        group = heads_q // heads_kv
        qs = q[cq[b]:cq[b + 1]] * np.repeat(descales[0][b], group)[None, :, None]
        ks, vs = (t[ck[b]:ck[b + 1]] * d[b][None, :, None] for t, d in ((k, descales[1]), (v, descales[2])))
        ref = attention_reference(qs[None], ks[None], vs[None])[0]
        assert relative_l2(out[cq[b]:cq[b + 1]], ref) < 1e-5, b


def test_a_group_runs_end_to_end_on_the_stand_ins():
    libs = bench_varlen.dry_run_libraries()
    mixed = (40, 16, 100, 70)
    equal = vc.Problem(4, 2, 32, 32, *(((64,) * 4,) * 3))
    group = vc.Group("tiny", vc.Problem(4, 2, 32, 32, mixed, mixed, mixed), equal, (16, 256))
    result = bench_varlen.bench_group(group, libs, timing.HostClock, rounds=2, launches=1, idle_s=0)
    r = result["results"]
    assert result["reference"] == "FA3 bf16 varlen"
    assert set(r) == set(vc.implementations(group))
    assert "unavailable" in r["FA3 fp8 paged 16"] and "unavailable" in r["FA3 bf16 paged 16"]
    for name in ("flashprefill bf16 varlen", "flashprefill bf16 paged 16", "FA3 bf16 paged 256"):
        assert r[name]["rel_l2"] < 1e-2, name  # the same attention, rounded to bf16 at the end
    for name in ("flashprefill fp8 varlen", "flashprefill fp8 paged 16", "FA3 fp8 varlen",
                 "flashprefill fp8 paged 16, page scales"):
        assert 1e-3 < r[name]["rel_l2"] < 0.1, name  # e4m3 codes
    assert r["flashprefill fp8 4x64"]["rel_l2"] is None and len(r["flashprefill fp8 4x64"]["round_medians_ms"]) == 2
    rows = records.varlen_rows({"groups": [result]}, RUN)
    peers = {(row["ours"], row["peer"]) for row in rows}
    assert ("flashprefill fp8 paged 16", "FA3 fp8 varlen") in peers  # FA3's paged fp8 refused: its varlen instead
    assert ("flashprefill bf16 paged 256", "FA3 bf16 paged 256") in peers
    assert ("flashprefill fp8 paged 256, page scales", "flashprefill fp8 paged 256") in peers
    assert all(math.isfinite(row["ratio"]) for row in rows)


def test_refusals_become_unavailable_with_their_reason(rng):
    from flashprefill import Error, Status
    from varlen_peers import Libraries, setup
    from varlen_standins import FlashAttention3, Flashprefill

    def refuse(*args, **kwargs):
        raise Error(Status.ERROR_NOT_SUPPORTED, "no kernel for this paged form")

    class Refusing(Flashprefill):
        attention_varlen = staticmethod(refuse)

    libs = Libraries(Refusing, FlashAttention3, NumpyOps())
    problem = vc.Problem(4, 2, 32, 32, (20, 40), (20, 40), (20, 40))
    x = bench_varlen.make_inputs(problem, (16,), int(rng.integers(2**31)), libs.ops)
    with pytest.raises(timing.PeerUnavailable, match="flashprefill: Error: not supported: no kernel for this paged"):
        setup(libs, ("flashprefill", "fp8", "paged", 16))(x)
    with pytest.raises(timing.PeerUnavailable, match="FA3: RuntimeError: This flash attention build"):
        setup(libs, ("FA3", "fp8", "paged", 16))(x)
    setup(libs, ("FA3", "bf16", "varlen", None))(x)()  # runs
    with pytest.raises(KeyError):  # a bug of the benchmark's own stays an error
        setup(libs, ("FA3", "bf16", "paged", 32))(x)
