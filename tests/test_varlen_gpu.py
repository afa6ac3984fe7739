"""attention_varlen on the Hopper kernels (CuPy arrays, gpu_arrays.py) against the float64 varlen and paged
references, sequence by sequence, with the bounds of test_kernel_gpu.py (varlen_cases.py states them): lengths 0, 1,
127, 128, 129, 300 and one longer than all of them together, in a random order; bf16 and fp8 with per-tensor,
per-(sequence, KV head) and per-block descales; dims 128/128 and 192/128; GQA 8/2 and 2/2 heads (32/8 and 16/16
scaled down); causal and not. Paged caches of 16, 64 and 256 tokens a page, the pages permuted, NaN in every slot
no sequence reads; fp8 paged calls bit for bit the same call on the keys packed (float16 and float32 scores);
chunked prefill (fewer queries than keys, seqused_k). Outputs poisoned: NaN in the sequences' rows
(every element must be written and finite), random bits past cu_seqlens_q[batch] (left as they were, byte for byte).
Every call runs with check=True. Device arrays the check kernel refuses raise, out and lse all NaN.
"""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
import shapes
import varlen_cases as vc
import varlen_plan_model as plan_model
from flashprefill import reference

cp = pytest.importorskip("cupy", reason=markers.NO_CUPY)
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng()
HEADS = [(8, 2), (2, 2)]
FP8_OPTIONS = {"scores": "fp32"}  # the floor bound is that of float32 scores (test_kernel_gpu.py's _check_fp8)


def _seed():
    return int(RNG.integers(1 << 31))


def _device_descale(descale):
    if descale is None:
        return None
    if isinstance(descale, fp.BlockScales):
        return fp.BlockScales(cp.asarray(descale.exponents), descale.block_tokens)
    return cp.asarray(descale)


def _device_int32(host):
    return None if host is None else cp.asarray(host)


def _arguments(case):
    """attention_varlen's arguments for a Case, on the device."""
    return dict(q=ga.to_device(case.q.data), k=ga.to_device(case.k.data), v=ga.to_device(case.v.data),
                cu_seqlens_q=_device_int32(case.cu_q), cu_seqlens_k=_device_int32(case.cu_k),
                max_seqlen_q=case.max_q, max_seqlen_k=case.max_k, seqused_k=_device_int32(case.seqused_k),
                block_table=_device_int32(case.block_table), q_descale=_device_descale(case.q.descale),
                k_descale=_device_descale(case.k.descale), v_descale=_device_descale(case.v.descale),
                **(FP8_OPTIONS if case.q.data.dtype == ga.E4M3 else {}))


def _poisoned_out(case, dim_v, seed):
    """bfloat16 (total_q, heads_q, dim_v): NaN in the sequences' rows, random bits past them; and a copy of those."""
    rows = case.cu_q[-1]
    out = ga.poisoned_bf16((case.q.data.shape[0], case.q.data.shape[1], dim_v))
    ga.bits(out)[rows:] = ga.randint(0, 1 << 16, out[rows:].shape, seed).astype(cp.uint16)
    return out, ga.copy(out[rows:])


def _run(case, causal, seed):
    """(out, lse) of attention_varlen on the Case with check=True, float64 and float32 on the host, after asserting
    that the rows past the sequences are unchanged."""
    dim_v = case.v.data.shape[-1]
    out, tail = _poisoned_out(case, dim_v, seed)
    result, lse = fp.attention_varlen(**_arguments(case), causal=causal, out=out, return_lse=True, check=True)
    ga.synchronize()
    assert result is out and lse.shape == (case.q.data.shape[1], case.q.data.shape[0]) and lse.dtype == cp.float32
    assert ga.equal(out[case.cu_q[-1]:], tail), f"seed {seed}: rows past cu_seqlens_q[batch] were written"
    return ga.host_f64(out), cp.asnumpy(lse).astype(np.float64)


def _sdpa_sequence(q, k, v, causal):
    """torch's bf16 SDPA of one sequence (host bf16 (n, heads, dim) each) as float64, rows that see no key 0; skips
    (markers.NO_TORCH) where torch is not installed: call it after every other check."""
    torch = markers.torch_or_skip()
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(ga.bits(x)).view(np.int16)).cuda().view(torch.bfloat16)
                  for x in (q, k, v))
    rep = tq.shape[1] // tk.shape[1]
    qt, kt, vt = (x.transpose(0, 1)[None] for x in (tq, tk.repeat_interleave(rep, 1), tv.repeat_interleave(rep, 1)))
    mask = None
    if causal:
        mask = torch.ones(q.shape[0], k.shape[0], dtype=torch.bool, device=tq.device).tril(k.shape[0] - q.shape[0])
    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    out = out[0].transpose(0, 1).double().cpu().numpy()
    return np.where(np.isnan(out), 0.0, out)  # SDPA's rows without keys: 0 / 0


def _sdpa_bound(case, causal):
    """bound_of for bf16: 1.5x torch's bf16 SDPA error on the sequence."""
    def bound_of(b, ref_rows):
        queries = slice(case.cu_q[b], case.cu_q[b + 1])
        if case.lengths_k[b] == 0:
            return 0.0, "no key: out exactly 0"
        q = case.q.data[queries]
        if case.block_table is None:
            keys = slice(case.cu_k[b], case.cu_k[b] + case.lengths_k[b])
            k, v = case.k.data[keys], case.v.data[keys]
        else:
            k, v = (reference.gather_pages(x, case.seqused_k[b:b + 1], case.block_table[b:b + 1])
                    for x in (case.k.data, case.v.data))
        peer = reference.relative_l2(_sdpa_sequence(q, k, v, causal), ref_rows)
        return 1.5 * peer, "1.5x torch's bf16 SDPA error"
    return bound_of


def _check(case, causal, seed):
    ref, ref_lse = case.reference(causal)
    out, lse = _run(case, causal, seed)
    vc.check_structure(case, out, lse, ref_lse, seed)
    if case.q.descale is None:
        vc.check_lse(case, lse, ref_lse, seed)
        vc.check_sequences(case, out, ref, _sdpa_bound(case, causal), seed)  # last: it skips without torch
    else:
        vc.check_sequences(case, out, ref, vc.fp8_floor_bound(case, causal, cp.asarray), seed)


@shapes.over_attention_dims
@pytest.mark.parametrize("heads", HEADS, ids=lambda h: "h{}_{}".format(*h))
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("kind", vc.DESCALES)
def test_varlen(kind, causal, heads, dims):
    seed = _seed()
    rng = np.random.default_rng(seed)
    lengths = vc.lengths(rng)
    _check(vc.varlen_case(rng, lengths, lengths, heads, dims, kind), causal, seed)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("kind", ["bf16", "per_head"])
def test_chunked_prefill(kind, causal):
    """Chunks of new queries over longer keys (the last queries of each sequence), k's rows past seqused_k NaN; a
    sequence with more queries than keys (causal: its first queries see none) and one with queries but no key."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    lengths_k = vc.lengths(rng, [1, 127, 129, 300, 40, 0])
    lengths_q = [min(n, int(rng.integers(1, 130))) for n in lengths_k]
    lengths_q[lengths_k.index(40)], lengths_q[lengths_k.index(0)] = 70, 5
    rows_k = [n + int(rng.integers(0, 50)) for n in lengths_k]
    _check(vc.varlen_case(rng, lengths_q, lengths_k, (8, 2), (128, 128), kind, rows_k=rows_k), causal, seed)


# every page size and descale kind, causal at dims 128/128 and not at 192/128 (the time of the file's reference)
PAGED = [(page_size, kind, causal, dims) for page_size in (16, 64, 256) for kind in ("bf16", "per_tensor", "per_page")
         for causal, dims in ((True, (128, 128)), (False, (192, 128)))]


@pytest.mark.parametrize("page_size, kind, causal, dims", PAGED,
                         ids=["page{}-{}-{}-{}".format(p, k, "causal" if c else "full", shapes.dims_id(d))
                              for p, k, c, d in PAGED])
def test_paged(page_size, kind, causal, dims):
    """Paged k and v, the pages permuted, NaN in every slot no sequence reads; q chunks of each sequence's keys.
    Per-page exponents are blocks of page_size tokens: where no kernel takes blocks that fine the call must be refused
    (NOT_SUPPORTED) as supports_varlen says, never run."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    lengths_k = vc.lengths(rng)
    lengths_q = [n if i % 2 else min(n, int(rng.integers(1, 200))) for i, n in enumerate(lengths_k)]
    case = vc.paged_case(rng, lengths_q, lengths_k, (8, 2), dims, kind, page_size)
    if kind == "per_page" and page_size % vc.BLOCK and not fp.supports_varlen(**_arguments(case), causal=causal):
        with pytest.raises(fp.Error) as info:
            fp.attention_varlen(**_arguments(case), causal=causal)
        assert info.value.status == fp.Status.ERROR_NOT_SUPPORTED
        return
    _check(case, causal, seed)


# fp8 paged against the same keys packed: every page size, float16 scores and float32, both dims
PAGED_BITS = [(page_size, scores, dims) for page_size in (16, 64, 256) for scores in ("fp16", "fp32")
              for dims in ((128, 128), (192, 128))]
F16_SCORES_Q_CODE_MAX = {128: 1.125, 192: 0.75}  # flashprefill.h: float16 scores' bound on q's codes


@pytest.mark.parametrize("page_size, scores, dims", PAGED_BITS,
                         ids=["page{}-{}-{}".format(p, s, shapes.dims_id(d)) for p, s, d in PAGED_BITS])
def test_paged_same_bits_as_packed(page_size, scores, dims):
    """fp8 paged k and v (pages permuted, NaN in every slot no sequence reads) against the same keys packed: out and
    lse bit for bit, every row of the sequences written, the rows past them untouched. q's codes within the float16
    scores' bound; "fp16" names the float16-score kernels (refused, not replaced, where none takes the call), whose
    paged boxes come each from its own lane."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    lengths_k = vc.lengths(rng)
    lengths_q = [n if i % 2 else min(n, int(rng.integers(1, 200))) for i, n in enumerate(lengths_k)]
    case = vc.paged_case(rng, lengths_q, lengths_k, (8, 2), dims, "per_tensor", page_size)
    bound = F16_SCORES_Q_CODE_MAX[dims[0]]
    q = ga.to_e4m3(np.clip(rng.standard_normal(case.q.data.shape) * bound / 2, -bound, bound).astype(np.float32))
    packed = [reference.gather_pages(x.data, case.seqused_k, case.block_table) for x in (case.k, case.v)]
    forms = {"paged": (case.k.data, case.v.data, dict(cu_seqlens_k=None, seqused_k=_device_int32(case.seqused_k),
                                                      block_table=_device_int32(case.block_table))),
             "packed": (*packed, dict(cu_seqlens_k=_device_int32(vc.offsets(case.seqused_k)), seqused_k=None,
                                      block_table=None))}
    rows, results = case.cu_q[-1], {}
    for name, (k, v, keys) in forms.items():
        out, tail = _poisoned_out(case, dims[1], seed)
        _, lse = fp.attention_varlen(ga.to_device(q), ga.to_device(k), ga.to_device(v), _device_int32(case.cu_q),
                                     max_seqlen_q=case.max_q, max_seqlen_k=case.max_k, **keys,
                                     q_descale=_device_descale(case.q.descale), k_descale=_device_descale(case.k.descale),
                                     v_descale=_device_descale(case.v.descale), scores=scores, causal=True, out=out,
                                     return_lse=True, check=True)
        ga.synchronize()
        assert ga.equal(out[rows:], tail), f"seed {seed}: {name}: rows past cu_seqlens_q[batch] were written"
        assert ga.all_finite(out[:rows]), f"seed {seed}: {name}: unwritten or non-finite elements"
        results[name] = (ga.to_host(out[:rows]), cp.asnumpy(lse[:, :rows]))
    assert ga.equal(results["paged"][0], results["packed"][0]), f"seed {seed}: paged out differs from packed"
    assert np.array_equal(results["paged"][1], results["packed"][1]), f"seed {seed}: paged lse differs from packed"


def test_workspace_reused_and_calls_deterministic():
    """One caller's workspace for several calls: repeated calls agree bit for bit, and a call after one the check
    kernel refused runs clean (the workspace's error does not stick)."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    lengths = vc.lengths(rng)
    case = vc.varlen_case(rng, lengths, lengths, (8, 2), (128, 128), "bf16")
    args = _arguments(case)
    workspace = cp.empty(fp.varlen_workspace_bytes(**args), cp.uint8)
    first, second = (fp.attention_varlen(**args, workspace=workspace, check=True) for _ in range(2))
    bad = dict(args, cu_seqlens_q=cp.asarray(case.cu_q[::-1].copy()))
    with pytest.raises(fp.Error):
        fp.attention_varlen(**bad, workspace=workspace, check=True)
    third = fp.attention_varlen(**args, workspace=workspace, check=True)
    ga.synchronize()
    rows = case.cu_q[-1]
    assert ga.all_finite(first[:rows]), f"seed {seed}: unwritten or non-finite output elements"
    assert ga.equal(first[:rows], second[:rows]) and ga.equal(first[:rows], third[:rows]), \
        f"seed {seed}: repeated calls differ"


# (lengths, the bound on the largest CTA's cost over the mean, in half KV tiles): at the least section size the
# snaking rounds leave 9 and 46 (tests/varlen_plan_model.py, 132 CTAs); 4 x 1536 keeps it (less than two passes of the
# plan's search would cost), the other picks 1.125 times it (28, less than two further passes).
PLAN_CASES = [([1536] * 4, 2 * plan_model.PASS_HALF_TILES), ([3000, 1000, 500, 700], 4 * plan_model.PASS_HALF_TILES)]


@pytest.mark.parametrize("lengths, excess", PLAN_CASES, ids=str)
def test_plan_lists_every_item_once_in_the_modelled_order(lengths, excess):
    """More items than SMs (16 kv heads, a query head each, bf16: several rounds, L2 sections): the plan's list, read
    back from the workspace (16 bytes of header: error, sequence, value, entries; then 32 bytes an entry, the
    sequence, query tile and kv head at words 4-6, the KV tiles in the low half of word 7), holds every (sequence,
    query tile, kv head) once, its tile counts in the order of the host model (sections, directions, the size picked
    by the rounds' balance), whose rounds leave no CTA more than `excess` half tiles above the mean cost; and the
    output is right."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    case = vc.varlen_case(rng, lengths, lengths, (16, 16), (128, 128), "bf16")
    args = _arguments(case)
    workspace = cp.zeros(fp.varlen_workspace_bytes(**args), cp.uint8)
    out, tail = _poisoned_out(case, 128, seed)
    _, lse = fp.attention_varlen(**args, out=out, workspace=workspace, return_lse=True, check=True)
    ga.synchronize()
    error, _, _, count = (int(x) for x in cp.asnumpy(workspace[:16].view(cp.int32)))
    entries = cp.asnumpy(workspace[16:16 + 32 * count].view(cp.int32)).reshape(count, 8)
    listed = sorted(tuple(int(x) for x in e[4:7]) for e in entries)
    expected = sorted((b, m, h) for b, n in enumerate(lengths) for m in range(-(-n // plan_model.TILE_ROWS))
                      for h in range(16))
    assert error == 0 and listed == expected, \
        f"seed {seed}: the plan listed {count} entries, {len(set(listed))} distinct, of {len(expected)}"
    device = cp.cuda.Device().attributes
    grid = plan_model.grid_of(lengths, 16, device["MultiProcessorCount"])
    order = [int(e[7]) & 0xFFFF for e in entries]
    assert order == plan_model.plan_order(lengths, lengths, 16, 1, (128 + 128) * 2, 128, max(lengths), grid,
                                          device["L2CacheSize"]), "the list's tile counts differ from the model's"
    load = plan_model.rounds_load(order, 1, grid)
    assert max(load) * grid <= sum(load) + excess * grid, \
        f"the largest CTA's cost {max(load) - sum(load) / grid:.1f} half tiles above the mean"
    assert ga.equal(out[case.cu_q[-1]:], tail), f"seed {seed}: rows past cu_seqlens_q[batch] were written"
    ref, ref_lse = case.reference(True)
    host, host_lse = ga.host_f64(out), cp.asnumpy(lse).astype(np.float64)
    vc.check_structure(case, host, host_lse, ref_lse, seed)
    vc.check_lse(case, host_lse, ref_lse, seed)
    vc.check_sequences(case, host, ref, _sdpa_bound(case, True), seed)  # last: it skips without torch


def _corrupt(case, name):
    """The Case's arguments with one device array holding values the check kernel must refuse."""
    args = _arguments(case)
    cu_q, cu_k = case.cu_q.copy(), None if case.cu_k is None else case.cu_k.copy()
    used = case.seqused_k.copy() if case.seqused_k is not None else None
    if name == "cu_seqlens_q_decreasing":
        cu_q[2] = cu_q[1] - 1
    elif name == "cu_seqlens_q_past_total_q":
        cu_q[-1] = case.q.data.shape[0] + 16
    elif name == "cu_seqlens_k_past_total_k":
        cu_k[-1] = case.k.data.shape[0] + 16
    elif name == "length_past_max_seqlen_q":
        args["max_seqlen_q"] = case.max_q - 1
    elif name == "seqused_k_past_its_rows":
        used[0] = cu_k[1] - cu_k[0] + 1
    elif name == "block_table_past_num_pages":
        args["block_table"][1, 0] = case.k.data.shape[0]
    elif name == "block_table_negative":
        args["block_table"][1, 0] = -1
    elif name == "seqused_k_past_its_pages":
        used[0] = case.block_table.shape[1] * case.k.data.shape[1] + 1
    args.update(cu_seqlens_q=cp.asarray(cu_q), cu_seqlens_k=_device_int32(cu_k), seqused_k=_device_int32(used))
    return args


@pytest.mark.parametrize("name", ["cu_seqlens_q_decreasing", "cu_seqlens_q_past_total_q", "cu_seqlens_k_past_total_k",
                                  "length_past_max_seqlen_q", "seqused_k_past_its_rows", "block_table_past_num_pages",
                                  "block_table_negative", "seqused_k_past_its_pages"])
def test_check_refuses_bad_device_arrays(name):
    """check=True raises Error (INVALID_ARGUMENT) with the check kernel's reason, and every element of out is NaN
    (poisoned with finite values first)."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    lengths = [50, 130, 20, 200]
    rows_k = [n + 10 for n in lengths]
    if name.startswith(("block_table", "seqused_k_past_its_pages")):
        case = vc.paged_case(rng, lengths, lengths, (4, 2), (128, 128), "bf16", 64)
    else:
        case = vc.varlen_case(rng, lengths, lengths, (4, 2), (128, 128), "bf16", rows_k=rows_k)
    args = _corrupt(case, name)
    out = ga.to_bf16(ga.randn((case.q.data.shape[0], 4, 128), seed))
    with pytest.raises(fp.Error) as info:
        fp.attention_varlen(**args, out=out, return_lse=True, check=True)
    assert info.value.status == fp.Status.ERROR_INVALID_ARGUMENT and info.value.message, f"seed {seed}"
    ga.synchronize()
    assert cp.isnan(ga.to_float(out)).all(), f"seed {seed}: out must be all NaN after a refused call"
