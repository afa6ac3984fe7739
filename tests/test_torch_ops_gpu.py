"""flashprefill.torch's custom operators on a GPU (Hopper, torch installed: a missing torch fails here, it does not
skip). Fresh random inputs every run (the seed is printed), outputs of the out= forms poisoned with NaN.

1. Each operator's outputs are bit for bit those of the Python API on the same inputs, every element written; one
   case of each against its float64 reference: attention (bf16: 1.5x torch SDPA's bf16 error; fp8: 1.5x the P-and-
   output rounding floor, varlen_cases.py), the quantizers against their bit-exact numpy models, merge_state against
   merge_state_reference (1.5x the bf16 rounding of the exact result, test_merge_state_gpu.py's bound).
2. quantize + attention (equal-length with merge_state, packed varlen, paged with a bf16 q) compile with
   torch.compile(fullgraph=True), which raises at any graph break, and give eager's bits.
3. The same three captured in a CUDA graph (warmed up on a side stream, as torch documents) and replayed on new inputs
   copied into the captured buffers give eager's bits on those inputs.
4. The out= forms allocate nothing (torch.cuda.memory_stats' allocation count unchanged across a call), and
   torch.library.opcheck passes for every operator (schemas, mutation declarations, fake implementations).
"""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import varlen_cases as vc
from flashprefill import fp8, paged, prepare, reference
from flashprefill.scales import BlockScales

pytestmark = pytest.mark.gpu

HEADS_Q, HEADS_KV, DIM = 4, 2, 128
BATCH, SEQ_Q, SEQ_K = 2, 200, 300
BLOCK = 384  # equal-length per-block descales: the block of the Hopper kernels with 192-key tiles
VARLEN_BLOCK = PAGE = 128  # packed and paged per-block descales take the 128-key kernels
LENGTHS_Q, LENGTHS_K = [1, 127, 200, 0, 77], [1, 300, 200, 5, 77]
USED_K, PAGED_Q = [130, 1, 257], [100, 1, 257]  # a paged batch: keys in the cache, queries of this call
NUM_PAGES = 9  # 6 in use, 3 spare


@pytest.fixture(scope="module")
def torch():
    """torch with flashprefill's operators registered."""
    import torch as module

    import flashprefill.torch  # noqa: F401
    return module


@pytest.fixture(scope="module")
def fpt(torch):
    import flashprefill.torch as module
    return module


@pytest.fixture
def seed(torch, rng_seed):
    torch.manual_seed(rng_seed[1])
    return rng_seed[1]


# ---------------------------------------------------------------------------------------------------------
# Inputs

def _bf16(torch, *shape):
    return torch.randn(shape, device="cuda").to(torch.bfloat16)


def _offsets(torch, lengths):
    return torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32, device="cuda")


def _equal_inputs(torch, fpt, seed):
    """(xq, xk, xv, xk2, xv2, signs): q against two sets of keys, for two attentions merged."""
    return (_bf16(torch, BATCH, SEQ_Q, HEADS_Q, DIM), _bf16(torch, BATCH, SEQ_K, HEADS_KV, DIM),
            _bf16(torch, BATCH, SEQ_K, HEADS_KV, DIM), _bf16(torch, BATCH, SEQ_Q, HEADS_KV, DIM),
            _bf16(torch, BATCH, SEQ_Q, HEADS_KV, DIM), fpt.rotation_signs(DIM, seed))


def _varlen_inputs(torch, lengths_q=LENGTHS_Q, lengths_k=LENGTHS_K):
    """(xq, xk, xv, cu_seqlens_q, cu_seqlens_k): a packed batch, every row in a sequence."""
    return (_bf16(torch, sum(lengths_q), HEADS_Q, DIM), _bf16(torch, sum(lengths_k), HEADS_KV, DIM),
            _bf16(torch, sum(lengths_k), HEADS_KV, DIM), _offsets(torch, lengths_q), _offsets(torch, lengths_k))


def _paged_inputs(torch, fpt, seed):
    """(xq, xk, xv, slot_mapping, block_table, seqused_k, cu_seqlens_q, signs) and the caches (k codes, k exponents,
    v codes, v exponents): the sequences' pages in a random order, -1 past each one's last, the caches' codes random
    bytes (NaN among them) and every page empty."""
    rng = np.random.default_rng(seed)
    pages = [-(-n // PAGE) for n in USED_K]
    order = rng.permutation(NUM_PAGES)
    table = np.full((len(USED_K), max(pages)), -1, np.int32)
    slots = []
    for b, (n, count) in enumerate(zip(USED_K, pages)):
        table[b, :count] = order[sum(pages[:b]):sum(pages[:b]) + count]
        j = np.arange(n)
        slots.append(table[b, j // PAGE] * PAGE + j % PAGE)
    device = lambda a: torch.from_numpy(np.ascontiguousarray(a, np.int32)).cuda()
    inputs = (_bf16(torch, sum(PAGED_Q), HEADS_Q, DIM), _bf16(torch, sum(USED_K), HEADS_KV, DIM),
              _bf16(torch, sum(USED_K), HEADS_KV, DIM), device(np.concatenate(slots)), device(table),
              device(USED_K), _offsets(torch, PAGED_Q), fpt.rotation_signs(DIM, seed))
    caches = []
    for _ in "kv":
        caches += [torch.randint(0, 256, (NUM_PAGES, PAGE, HEADS_KV, DIM), dtype=torch.uint8,
                                 device="cuda").view(torch.float8_e4m3fn),
                   torch.full((NUM_PAGES, HEADS_KV), paged.PAGE_EMPTY, dtype=torch.int8, device="cuda")]
    return inputs, caches


def _clones(tensors):
    return [t.clone() for t in tensors]


# ---------------------------------------------------------------------------------------------------------
# Checks

def _same(torch, mine, theirs, what):
    """mine holds theirs' shape, dtype and bits (NaN equal to the same NaN)."""
    assert mine.shape == theirs.shape and mine.dtype == theirs.dtype, \
        f"{what}: {mine.dtype} {tuple(mine.shape)}, expected {theirs.dtype} {tuple(theirs.shape)}"
    torch.cuda.synchronize()
    differ = mine.contiguous().view(torch.uint8) != theirs.contiguous().view(torch.uint8)
    assert not differ.any(), f"{what}: {int(differ.sum())} of {differ.numel()} bytes differ"


def _all_written(torch, *tensors):
    for t in tensors:
        assert torch.isfinite(t.float()).all(), f"{int((~torch.isfinite(t.float())).sum())} elements left unwritten"


def _nan(torch, shape, dtype=None):
    return torch.full(shape, float("nan"), dtype=dtype or torch.bfloat16, device="cuda")


def _nan_codes(torch, like):
    """float8_e4m3fn of like's shape, the NaN code 0x7f everywhere."""
    return torch.full(like.shape, 0x7F, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)


def _f64(torch, t):
    """A bf16 / float32 / e4m3 tensor as float64 numpy, exactly."""
    return t.float().double().cpu().numpy()


def _codes(torch, t):
    return t.view(torch.uint8).cpu().numpy()


def _dequantize_packed(torch, codes, exponents, lengths, block):
    """float64 (total, heads, dim) of packed codes with per-sequence block exponents (batch, heads, blocks)."""
    values, exps = _f64(torch, codes), exponents.cpu().numpy().astype(np.float64)
    start = 0
    for b, n in enumerate(lengths):
        blocks = np.arange(n) // block
        values[start:start + n] *= np.exp2(exps[b][:, blocks]).T[:, :, None]
        start += n
    return values


def _assert_within(err, bound, what, seed):
    assert err <= bound, f"seed {seed}: {what}: relative L2 {err:.3e} > bound {bound:.3e}"


def _descales(exponents, block):
    """The operators' descale keywords for (q, k, v) exponents of one block size (plain enough for dynamo)."""
    q, k, v = exponents
    return dict(q_descale=q, k_descale=k, v_descale=v, q_block_tokens=block, k_block_tokens=block,
                v_block_tokens=block)


# ---------------------------------------------------------------------------------------------------------
# 1. The operators against the Python API, and one case each against its reference

def test_attention_bf16_ops_equal_the_api(torch, fpt, seed):
    q = _bf16(torch, BATCH, SEQ_K, HEADS_Q, DIM)
    k, v = (_bf16(torch, BATCH, SEQ_K, HEADS_KV, DIM) for _ in range(2))
    api_out, api_lse = fp.attention(q, k, v, return_lse=True)
    out, (out_lse, lse) = fpt.attention(q, k, v), fpt.attention_lse(q, k, v)
    into, into_lse = _nan(torch, api_out.shape), _nan(torch, api_lse.shape, torch.float32)
    fpt.attention_out(q, k, v, into, into_lse)
    for mine, what in ((out, "attention"), (out_lse, "attention_lse out"), (into, "attention_out out")):
        _same(torch, mine, api_out, what)
    for mine, what in ((lse, "attention_lse lse"), (into_lse, "attention_out lse")):
        _same(torch, mine, api_lse, what)
    _all_written(torch, into, into_lse)
    exact = reference.attention_reference(*(_f64(torch, x) for x in (q, k, v)), causal=True)
    rep = HEADS_Q // HEADS_KV
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.repeat_interleave(rep, 2).transpose(1, 2), v.repeat_interleave(rep, 2).transpose(1, 2),
        is_causal=True).transpose(1, 2)
    _assert_within(reference.relative_l2(_f64(torch, out), exact),
                   1.5 * reference.relative_l2(_f64(torch, sdpa), exact), "bf16 attention (1.5x SDPA bf16)", seed)


def test_quantize_and_fp8_attention_ops_equal_the_api(torch, fpt, seed):
    xq, xk, xv, _, _, signs = _equal_inputs(torch, fpt, seed)
    q, qe = fpt.quantize_fp8(xq, BLOCK, signs=signs)
    k, ke = fpt.quantize_fp8(xk, BLOCK, signs=signs)
    v, ve = fpt.quantize_fp8(xv, BLOCK)
    v_prepared, vpe = fpt.quantize_fp8(xv, BLOCK, layout="prepared")
    api = {name: fp.quantize_fp8(x, BLOCK, signs=s) for name, x, s in (("q", xq, signs), ("k", xk, signs),
                                                                         ("v", xv, None))}
    api_prepared = fp.quantize_fp8(xv, BLOCK, layout="prepared")
    for name, (codes, exps) in (("q", (q, qe)), ("k", (k, ke)), ("v", (v, ve)), ("prepared v", (v_prepared, vpe))):
        api_codes, api_scales = api_prepared if name == "prepared v" else api[name]
        _same(torch, codes, getattr(api_codes, "data", api_codes), f"quantize_fp8 {name} codes")
        _same(torch, exps, api_scales.exponents, f"quantize_fp8 {name} exponents")
    into_codes, into_exps = _nan_codes(torch, q), torch.full_like(qe, 127)
    fpt.quantize_fp8_out(xq, into_codes, into_exps, BLOCK, signs=signs)
    _same(torch, into_codes, q, "quantize_fp8_out codes")
    _same(torch, into_exps, qe, "quantize_fp8_out exponents")
    model = fp8.quantize_blocks(prepare.transform(_f64(torch, xq), signs.cpu().numpy()), BLOCK)
    assert np.array_equal(_codes(torch, q), model[0]) and np.array_equal(qe.cpu().numpy(), model[1]), \
        f"seed {seed}: quantize_fp8 differs from fp8.quantize_blocks"

    descales = _descales((qe, ke, ve), BLOCK)
    scales = {f"{name}_descale": BlockScales(e, BLOCK) for name, e in zip("qkv", (qe, ke, ve))}
    api_out = fp.attention(q, k, v, **scales)
    _same(torch, fpt.attention(q, k, v, **descales), api_out, "fp8 attention")
    _same(torch, fpt.attention(q, k, v_prepared, **(descales | {"v_descale": vpe}), v_prepared=True),
          fp.attention(q, k, api_prepared[0], **(scales | {"v_descale": api_prepared[1]})), "fp8 attention, v prepared")
    api_out, api_lse = fp.attention(q, k, v, return_lse=True, **scales)
    into, into_lse = _nan(torch, api_out.shape), _nan(torch, api_lse.shape, torch.float32)
    fpt.attention_out(q, k, v, into, into_lse, **descales)
    _same(torch, into, api_out, "fp8 attention_out out")
    _same(torch, into_lse, api_lse, "fp8 attention_out lse")
    _all_written(torch, into, into_lse)

    values = [fp8.dequantize_blocks(_codes(torch, c), e.cpu().numpy(), BLOCK) for c, e in ((q, qe), (k, ke), (v, ve))]
    out = _f64(torch, fpt.attention(q, k, v, scores="fp32", **descales))
    exact = reference.attention_reference(*values, causal=True)
    for b in range(BATCH):
        floor = reference.relative_l2(vc.p_rounding_floor(*(x[b] for x in values), True), exact[b])
        _assert_within(reference.relative_l2(out[b], exact[b]), 1.5 * floor, f"fp8 attention batch {b}", seed)


def test_varlen_ops_equal_the_api(torch, fpt, seed):
    xq, xk, xv, cu_q, cu_k = _varlen_inputs(torch)
    max_q, max_k = max(LENGTHS_Q), max(LENGTHS_K)
    quantized = []
    for x, cu, top in ((xq, cu_q, max_q), (xk, cu_k, max_k), (xv, cu_k, max_k)):
        codes, exps = fpt.quantize_fp8_varlen(x, cu, top, VARLEN_BLOCK)
        api_codes, api_scales = fp.quantize_fp8(x, VARLEN_BLOCK, cu_seqlens=cu, max_seqlen=top)
        _same(torch, codes, api_codes, "quantize_fp8_varlen codes")
        lengths = LENGTHS_Q if x is xq else LENGTHS_K
        for b, n in enumerate(lengths):  # the slots past a sequence's blocks are not written
            blocks = -(-n // VARLEN_BLOCK)
            _same(torch, exps[b, :, :blocks], api_scales.exponents[b, :, :blocks], f"exponents of sequence {b}")
        into_codes, into_exps = _nan_codes(torch, codes), torch.full_like(exps, 127)
        api_exps = into_exps.clone()
        fp.quantize_fp8(x, VARLEN_BLOCK, cu_seqlens=cu, max_seqlen=top, exponents=api_exps)
        fpt.quantize_fp8_out(x, into_codes, into_exps, VARLEN_BLOCK, cu_seqlens=cu, max_seqlen=top)
        _same(torch, into_codes, codes, "quantize_fp8_out packed codes")
        _same(torch, into_exps, api_exps, "quantize_fp8_out packed exponents")
        quantized.append((codes, exps))
    (q, qe), (k, ke), (v, ve) = quantized

    descales = _descales((qe, ke, ve), VARLEN_BLOCK)
    scales = {f"{name}_descale": BlockScales(e, VARLEN_BLOCK) for name, e in zip("qkv", (qe, ke, ve))}
    args = (q, k, v, cu_q, cu_k, max_q, max_k)
    api_out, api_lse = fp.attention_varlen(*args, return_lse=True, **scales)
    _same(torch, fpt.attention_varlen(*args, **descales), api_out, "attention_varlen")
    out, lse = fpt.attention_varlen_lse(*args, **descales)
    _same(torch, out, api_out, "attention_varlen_lse out")
    _same(torch, lse, api_lse, "attention_varlen_lse lse")
    into, into_lse = _nan(torch, api_out.shape), _nan(torch, api_lse.shape, torch.float32)
    workspace = fpt.varlen_workspace(*args, **scales)
    fpt.attention_varlen_out(*args, into, workspace, into_lse, **descales)
    _same(torch, into, api_out, "attention_varlen_out out")
    _same(torch, into_lse, api_lse, "attention_varlen_out lse")
    _all_written(torch, into, into_lse)

    values = [_dequantize_packed(torch, c, e, n, VARLEN_BLOCK)
              for c, e, n in ((q, qe, LENGTHS_Q), (k, ke, LENGTHS_K), (v, ve, LENGTHS_K))]
    out = _f64(torch, fpt.attention_varlen(*args, scores="fp32", **descales))
    exact = reference.attention_varlen_reference(*values, cu_q.cpu().numpy(), cu_k.cpu().numpy(), causal=True)
    starts_q, starts_k = np.cumsum([0] + LENGTHS_Q), np.cumsum([0] + LENGTHS_K)
    for b, (n_q, n_k) in enumerate(zip(LENGTHS_Q, LENGTHS_K)):
        if n_q == 0:
            continue
        rows, keys = slice(starts_q[b], starts_q[b] + n_q), slice(starts_k[b], starts_k[b] + n_k)
        floor = reference.relative_l2(vc.p_rounding_floor(values[0][rows], values[1][keys], values[2][keys], True),
                                      exact[rows])
        _assert_within(reference.relative_l2(out[rows], exact[rows]), 1.5 * floor, f"varlen sequence {b}", seed)


def test_paged_ops_equal_the_api(torch, fpt, seed):
    (xq, xk, xv, slots, table, used, cu_q, signs), caches = _paged_inputs(torch, fpt, seed)
    before = _clones(caches)
    k_codes, k_exps, v_codes, v_exps = caches
    fpt.quantize_paged(xk, slots, k_codes, k_exps, signs=signs)
    fpt.quantize_paged(xv, slots, v_codes, v_exps)
    api_caches = _clones(before)
    fp.quantize_paged(xk, slots, api_caches[0], api_caches[1], signs=signs)
    fp.quantize_paged(xv, slots, api_caches[2], api_caches[3])
    for mine, theirs, what in zip(caches, api_caches, ("k codes", "k exponents", "v codes", "v exponents")):
        _same(torch, mine, theirs, f"quantize_paged {what}")
    host_slots = slots.cpu().numpy()
    for x, s, (codes, exps), start in ((xk, signs, (k_codes, k_exps), 0), (xv, None, (v_codes, v_exps), 2)):
        model = paged.quantize_paged_model(_f64(torch, x), host_slots, _codes(torch, before[start]),
                                           before[start + 1].cpu().numpy(), None if s is None else s.cpu().numpy())
        assert np.array_equal(_codes(torch, codes), model[0]) and np.array_equal(exps.cpu().numpy(), model[1]), \
            f"seed {seed}: quantize_paged differs from paged.quantize_paged_model"

    max_q, max_k = max(PAGED_Q), max(USED_K)
    args = (xq, k_codes, v_codes, cu_q, None, max_q, max_k)
    options = dict(seqused_k=used, block_table=table, q_rotation_signs=signs)
    scales = dict(k_descale=BlockScales(k_exps, PAGE), v_descale=BlockScales(v_exps, PAGE))
    descales = dict(k_descale=k_exps, v_descale=v_exps, k_block_tokens=PAGE, v_block_tokens=PAGE)
    api_out, api_lse = fp.attention_varlen(*args, return_lse=True, **options, **scales)
    _same(torch, fpt.attention_varlen(*args, **options, **descales), api_out, "paged attention_varlen, bf16 q")
    into, into_lse = _nan(torch, api_out.shape), _nan(torch, api_lse.shape, torch.float32)
    workspace = fpt.varlen_workspace(*args, **options, **scales)
    fpt.attention_varlen_out(*args, into, workspace, into_lse, **options, **descales)
    _same(torch, into, api_out, "paged attention_varlen_out out")
    _same(torch, into_lse, api_lse, "paged attention_varlen_out lse")
    _all_written(torch, into, into_lse)


def test_merge_state_ops_equal_the_api(torch, fpt, seed):
    shape = (BATCH, SEQ_Q, HEADS_Q, DIM)
    parts = [(_bf16(torch, *shape), torch.randn(BATCH, HEADS_Q, SEQ_Q, device="cuda") * 4 + 5) for _ in range(2)]
    (out_a, lse_a), (out_b, lse_b) = parts
    api_out, api_lse = fp.merge_state(out_a, lse_a, out_b, lse_b)
    out, lse = fpt.merge_state(out_a, lse_a, out_b, lse_b)
    into, into_lse = _nan(torch, shape), _nan(torch, api_lse.shape, torch.float32)
    fpt.merge_state_out(out_a, lse_a, out_b, lse_b, into, into_lse)
    for mine, theirs, what in ((out, api_out, "merge_state out"), (lse, api_lse, "merge_state lse"),
                               (into, api_out, "merge_state_out out"), (into_lse, api_lse, "merge_state_out lse")):
        _same(torch, mine, theirs, what)
    _all_written(torch, into, into_lse)
    exact, _ = reference.merge_state_reference(*(_f64(torch, x) for x in (out_a, lse_a, out_b, lse_b)))
    _assert_within(reference.relative_l2(_f64(torch, out), exact),
                   1.5 * reference.relative_l2(ga.to_f64(ga.to_bf16(exact)), exact), "merge_state", seed)


# ---------------------------------------------------------------------------------------------------------
# 2, 3. quantize + attention compiled and captured

def _equal_step(fpt):
    def step(xq, xk, xv, xk2, xv2, signs):
        q, qe = fpt.quantize_fp8(xq, BLOCK, signs=signs)
        parts = []
        for x_k, x_v in ((xk, xv), (xk2, xv2)):
            k, ke = fpt.quantize_fp8(x_k, BLOCK, signs=signs)
            v, ve = fpt.quantize_fp8(x_v, BLOCK, layout="prepared")
            parts.extend(fpt.attention_lse(q, k, v, causal=False, v_prepared=True,
                                            **_descales((qe, ke, ve), BLOCK)))
        return fpt.merge_state(*parts)
    return step


def _varlen_step(fpt):
    max_q, max_k = max(LENGTHS_Q), max(LENGTHS_K)

    def step(xq, xk, xv, cu_q, cu_k):
        q, qe = fpt.quantize_fp8_varlen(xq, cu_q, max_q, VARLEN_BLOCK)
        k, ke = fpt.quantize_fp8_varlen(xk, cu_k, max_k, VARLEN_BLOCK)
        v, ve = fpt.quantize_fp8_varlen(xv, cu_k, max_k, VARLEN_BLOCK)
        return fpt.attention_varlen_lse(q, k, v, cu_q, cu_k, max_q, max_k, **_descales((qe, ke, ve), VARLEN_BLOCK))
    return step


def _paged_step(fpt):
    max_q, max_k = max(PAGED_Q), max(USED_K)

    def step(xq, xk, xv, slots, table, used, cu_q, signs, k_codes, k_exps, v_codes, v_exps):
        fpt.quantize_paged(xk, slots, k_codes, k_exps, signs=signs)
        fpt.quantize_paged(xv, slots, v_codes, v_exps)
        return fpt.attention_varlen_lse(xq, k_codes, v_codes, cu_q, None, max_q, max_k, seqused_k=used,
                                        block_table=table, q_rotation_signs=signs, k_descale=k_exps,
                                        v_descale=v_exps, k_block_tokens=PAGE, v_block_tokens=PAGE)
    return step


def _case(torch, fpt, seed, form):
    """(step, fresh inputs maker, the indices of the inputs the step writes) of one form."""
    if form == "equal":
        return _equal_step(fpt), lambda: list(_equal_inputs(torch, fpt, seed)), ()
    if form == "varlen":
        return _varlen_step(fpt), lambda: list(_varlen_inputs(torch)), ()

    def paged_inputs():
        inputs, caches = _paged_inputs(torch, fpt, seed)
        return list(inputs) + caches
    return _paged_step(fpt), paged_inputs, (8, 9, 10, 11)


FORMS = ["equal", "varlen", "paged"]


@pytest.mark.parametrize("form", FORMS)
def test_compiled_without_graph_breaks_equals_eager(torch, fpt, seed, form):
    step, inputs, written = _case(torch, fpt, seed, form)
    args = inputs()
    eager_args, compiled_args = _clones(args), _clones(args)
    compiled = torch.compile(step, fullgraph=True)  # a graph break raises
    eager_out, compiled_out = step(*eager_args), compiled(*compiled_args)
    for i, (mine, theirs) in enumerate(zip(compiled_out, eager_out)):
        _same(torch, mine, theirs, f"{form}: compiled output {i}")
    for i in written:
        _same(torch, compiled_args[i], eager_args[i], f"{form}: compiled input {i} written")


@pytest.mark.parametrize("form", FORMS)
def test_cuda_graph_replay_equals_eager(torch, fpt, seed, form):
    step, inputs, written = _case(torch, fpt, seed, form)
    static = inputs()
    initial = {i: static[i].clone() for i in written}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(*static)
    fresh = inputs()  # new values (the offsets, lengths and page table as before)
    for i, (buffer, value) in enumerate(zip(static, fresh)):
        buffer.copy_(initial[i] if i in written else value)
    eager_args = _clones(static)
    graph.replay()
    eager = step(*eager_args)
    for i, (mine, theirs) in enumerate(zip(captured, eager)):
        _same(torch, mine, theirs, f"{form}: replayed output {i}")
    for i in written:
        _same(torch, static[i], eager_args[i], f"{form}: replayed input {i} written")


# ---------------------------------------------------------------------------------------------------------
# 4. The out= forms allocate nothing; opcheck of every operator

def _written_paged(torch, fpt, seed):
    """A paged call on caches quantize_paged wrote: (varlen args, options, the operators' descales, the API's
    descales, quantize_paged's args for k)."""
    (xq, xk, xv, slots, table, used, cu_q, signs), (k_codes, k_exps, v_codes, v_exps) = _paged_inputs(torch, fpt, seed)
    fpt.quantize_paged(xk, slots, k_codes, k_exps, signs=signs)
    fpt.quantize_paged(xv, slots, v_codes, v_exps)
    args = (xq, k_codes, v_codes, cu_q, None, max(PAGED_Q), max(USED_K))
    options = dict(seqused_k=used, block_table=table, q_rotation_signs=signs)
    descales = dict(k_descale=k_exps, v_descale=v_exps, k_block_tokens=PAGE, v_block_tokens=PAGE)
    scales = dict(k_descale=BlockScales(k_exps, PAGE), v_descale=BlockScales(v_exps, PAGE))
    return args, options, descales, scales, (xk, slots, k_codes, k_exps)


def _out_calls(torch, fpt, seed):
    """(name, call) of each out= form on its own inputs and outputs."""
    xq, xk, xv, _, _, signs = _equal_inputs(torch, fpt, seed)
    q, qe = fpt.quantize_fp8(xq, BLOCK, signs=signs)
    k, ke = fpt.quantize_fp8(xk, BLOCK, signs=signs)
    v, ve = fpt.quantize_fp8(xv, BLOCK)
    descales = _descales((qe, ke, ve), BLOCK)
    out, lse = fpt.attention_lse(q, k, v, **descales)
    other_out, other_lse, merged, merged_lse = out.flip(0), lse.flip(0), torch.empty_like(out), torch.empty_like(lse)
    codes, exps = torch.empty_like(q), torch.empty_like(qe)
    args, options, paged_descales, scales, (pk, slots, k_codes, k_exps) = _written_paged(torch, fpt, seed)
    workspace = fpt.varlen_workspace(*args, **options, **scales)
    varlen_out, varlen_lse = fpt.attention_varlen_lse(*args, **options, **paged_descales)
    return [
        ("attention_out", lambda: fpt.attention_out(q, k, v, out, lse, **descales)),
        ("attention_varlen_out", lambda: fpt.attention_varlen_out(*args, varlen_out, workspace, varlen_lse, **options,
                                                                  **paged_descales)),
        ("quantize_fp8_out", lambda: fpt.quantize_fp8_out(xq, codes, exps, BLOCK, signs=signs)),
        ("quantize_paged", lambda: fpt.quantize_paged(pk, slots, k_codes, k_exps, signs=options["q_rotation_signs"])),
        ("merge_state_out", lambda: fpt.merge_state_out(out, lse, other_out, other_lse, merged, merged_lse)),
    ]


def test_out_forms_allocate_nothing(torch, fpt, seed):
    for name, call in _out_calls(torch, fpt, seed):
        call()  # warm: the library loaded, its kernels' attributes set
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        call()
        after = torch.cuda.memory_stats()["allocation.all.allocated"]
        assert after == before, f"{name} allocated {after - before} times"


def _opcheck_cases(torch, fpt, seed):
    """(operator, args, kwargs) of every operator; every element of the functional forms' outputs written (opcheck
    compares them between eager and AOTDispatcher), so the packed quantizer's sequences fill all their slots."""
    xq, xk, xv, xk2, _, signs = _equal_inputs(torch, fpt, seed)
    q, qe = fpt.quantize_fp8(xq, BLOCK, signs=signs)
    k, ke = fpt.quantize_fp8(xk, BLOCK, signs=signs)
    v, ve = fpt.quantize_fp8(xv, BLOCK, layout="prepared")
    descales = _descales((qe, ke, ve), BLOCK) | {"v_prepared": True}
    out, lse = fpt.attention_lse(q, k, v, **descales)
    lengths = [256, 200, 129]  # two blocks of 128 each
    packed, cu = _bf16(torch, sum(lengths), HEADS_KV, DIM), _offsets(torch, lengths)
    args, options, paged_descales, scales, (pk, slots, k_codes, k_exps) = _written_paged(torch, fpt, seed)
    workspace = fpt.varlen_workspace(*args, **options, **scales)
    options |= paged_descales
    varlen_out, varlen_lse = fpt.attention_varlen_lse(*args, **options)
    bf16 = (_bf16(torch, BATCH, SEQ_Q, HEADS_Q, DIM), xk2, xk2)
    return [
        (fpt.attention, bf16, {}),
        (fpt.attention, (q, k, v), descales),
        (fpt.attention_lse, (q, k, v), descales),
        (fpt.attention_out, (q, k, v, torch.empty_like(out), torch.empty_like(lse)), descales),
        (fpt.attention_varlen, args, options),
        (fpt.attention_varlen_lse, args, options),
        (fpt.attention_varlen_out, (*args, torch.empty_like(varlen_out), workspace, torch.empty_like(varlen_lse)),
         options),
        (fpt.quantize_fp8, (xq, BLOCK), {"signs": signs}),
        (fpt.quantize_fp8, (xv, BLOCK), {"layout": "prepared"}),
        (fpt.quantize_fp8_varlen, (packed, cu, max(lengths), VARLEN_BLOCK), {"signs": signs}),
        (fpt.quantize_fp8_out, (xq, torch.empty_like(q), torch.empty_like(qe), BLOCK), {"signs": signs}),
        (fpt.quantize_paged, (pk, slots, k_codes.clone(), k_exps.clone()), {"signs": signs}),
        (fpt.merge_state, (out, lse, out.flip(0), lse.flip(0)), {}),
        (fpt.merge_state_out, (out, lse, out.flip(0), lse.flip(0), torch.empty_like(out), torch.empty_like(lse)),
         {}),
    ]


def _messages(e):
    """The messages of an exception and of those it was raised from."""
    text = []
    while e is not None:
        text.append(str(e))
        e = e.__cause__ or e.__context__
    return " / ".join(text)


def _declared_mutations_hold(torch, op, args, kwargs):
    """opcheck's test_schema done on the bytes: the tensors the schema does not declare written are unchanged."""
    schema = op._opoverload._schema
    named = dict(zip((a.name for a in schema.arguments), args)) | kwargs
    written = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    before = {name: t.clone() for name, t in named.items() if isinstance(t, torch.Tensor) and name not in written}
    op(*args, **kwargs)
    for name, copy in before.items():
        _same(torch, named[name], copy, f"{schema.name}: {name}, which it does not declare mutated")


def test_opcheck(torch, fpt, seed):
    """opcheck of each operator. torch's own schema check compares every argument before and after with allclose,
    which some torch versions cannot do on float8_e4m3fn: there the other checks run, and the mutation check on the
    bytes (_declared_mutations_hold)."""
    for op, args, kwargs in _opcheck_cases(torch, fpt, seed):
        try:
            torch.library.opcheck(op, args, kwargs)
            continue
        except Exception as e:
            if "Float8" not in _messages(e):
                raise AssertionError(f"seed {seed}: opcheck of {op} failed: {_messages(e)}") from e
            print(f"opcheck of {op}: torch's schema check cannot compare float8 ({str(e).splitlines()[0]})")
        torch.library.opcheck(op, args, kwargs, test_utils=("test_autograd_registration", "test_faketensor",
                                                            "test_aot_dispatch_dynamic"))
        _declared_mutations_hold(torch, op, args, kwargs)
