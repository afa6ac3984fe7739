"""Paged KV caches (flashprefill.h's block_table form) in the gfx950 forward kernels, run in the functional emulator on
the sequences of tests/test_gfx950_varlen_emulated.py: k and v are caches of pages (pages, page_size, heads_kv, dim)
that each sequence's block_table row names, in shuffled order; every page and row no sequence's keys fill holds NaN
(the rows past a sequence's last key in its last page too), and the table's entries past a sequence's last page name
no page (a kernel that read them would address memory outside the caches, which the emulator refuses). Every sequence
against the float64 reference (fp8: and the numpy model), out and lse poisoned, the rows past the sequences untouched;
the input seed is the emulator's schedule seed."""
import ml_dtypes
import numpy as np
import pytest

import markers
from test_gfx950_kernel_emulated import ROOT
from gfx950_bounds import bf16_verdict  # tools/, on sys.path from there
from test_gfx950_varlen_emulated import (BLOCK_TOKENS, DIM_V, HEADS_KV, HEADS_Q, PAD_ROWS, RNG, SEQUENCES,
                                         _bf16_floor, _check_fp8_sequence, _check_lse, _check_untouched, _layout,
                                         _quantized, _rows, _run, _sequence_reference)

pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
SPARE_PAGES = 2      # pages no sequence names (NaN)
NO_PAGE = 1 << 24    # the table's entries past a sequence's pages: far outside the caches


def _block_table(rng, page_size):
    """int32 (batch, most pages + 1): each sequence's pages, drawn from a shuffled set; and the number of pages."""
    pages = [-(-sk // page_size) for _, sk in SEQUENCES]
    order = rng.permutation(sum(pages) + SPARE_PAGES)
    table = np.full((len(SEQUENCES), max(pages) + 1), NO_PAGE, np.int32)
    first = np.concatenate([[0], np.cumsum(pages)])
    for b, n in enumerate(pages):
        table[b, :n] = order[first[b]:first[b] + n]
    return table, len(order)


def _page_exponents(exponents, table, pages):
    """int8 (batch, heads, blocks) exponents of blocks of page_size keys -> (pages, heads, 1): each block's at its
    page (0 at the pages no sequence names), as the kernels read a paged cache's per-block descales."""
    out = np.zeros((pages, exponents.shape[1], 1), np.int8)
    for b, (_, sk) in enumerate(SEQUENCES):
        for i in range(-(-sk // BLOCK_TOKENS)):
            out[table[b, i], :, 0] = exponents[b, :, i]
    return out


def _paged(x, cu_k, table, page_size, pages, fill, pad_rows=0):
    """The keys of packed x (rows cu_k[b] .. for sequence b) moved into a cache (pages, page_size + pad_rows, heads,
    dim) of `fill` where no key lies."""
    cache = np.full((pages, page_size + pad_rows) + x.shape[1:], fill, x.dtype)
    for b, (_, sk) in enumerate(SEQUENCES):
        for j in range(sk):
            cache[table[b, j // page_size], j % page_size] = x[cu_k[b] + j]
    return cache


@pytest.mark.parametrize("name, page_size, causal, descale", [
    ("fwd_bf16_hd128", 16, True, None), ("fwd_bf16_qk192", 256, False, None),  # 16: a 32-key tile spans two pages
    ("fwd_fp8_hd128", BLOCK_TOKENS, False, "per_block"), ("fwd_fp8_qk192", 16, True, "per_head")])  # 16: four pages
def test_paged(name, page_size, causal, descale):
    """bf16 within 1.5x the bf16 floor of float64 attention; fp8 within the bf16 rounding of the model of its pipeline
    and 1.5x the model's error of float64 attention, with descales per (sequence, kv head), or per block of k and v
    one per page (exponents (pages, heads_kv)) and q's per block of its sequence."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    dim_qk = 192 if name.endswith("qk192") else 128
    cu_q, cu_k, _ = _layout(False)
    seqused_k = np.array([sk for _, sk in SEQUENCES], np.int32)
    table, pages = _block_table(rng, page_size)
    tensors = ((cu_q, HEADS_Q, dim_qk), (cu_k, HEADS_KV, dim_qk), (cu_k, HEADS_KV, DIM_V))
    descales = blocks = None
    if "fp8" in name:
        per_block = descale == "per_block"
        (q, qd, qx), (k, kd, kx), (v, vd, vx) = (_quantized(rng, cu, np.diff(cu), heads, dim, per_block)
                                                 for cu, heads, dim in tensors)
        fill = 0x7F
        if per_block:
            blocks = (qd, *(_page_exponents(e, table, pages) for e in (kd, vd)))
        else:
            descales = (qd, kd, vd)
    else:
        q, k, v = (np.full((int(cu[-1]) + PAD_ROWS, heads, dim), np.nan) for cu, heads, dim in tensors)
        for x, cu in ((q, cu_q), (k, cu_k), (v, cu_k)):
            x[:int(cu[-1])] = rng.standard_normal((int(cu[-1]),) + x.shape[1:])
        q, k, v = (x.astype(ml_dtypes.bfloat16) for x in (q, k, v))
        fill = np.nan
    # v's pages a row longer than k's (unused, NaN): a kernel that mixed up their page strides would read NaN
    k_cache, v_cache = (_paged(x, cu_k, table, page_size, pages, fill, pad) for x, pad in ((k, 0), (v, 1)))
    as_kernel = (lambda x: x.view(ml_dtypes.float8_e4m3fn)) if "fp8" in name else (lambda x: x)
    out_bits, lse = _run(name, *(as_kernel(x) for x in (q, k_cache, v_cache)), cu_q, None, seqused_k, causal, seed,
                         descales=descales, blocks=blocks, pages=(table, page_size), root=ROOT)
    out = _check_untouched(seed, out_bits, lse, cu_q)
    for b, (sq, sk) in enumerate(SEQUENCES):
        if sq == 0:
            continue  # no row of out or lse is the sequence's
        rows_q, rows_k = _rows(cu_q, b, sq), _rows(cu_k, b, sk)
        if "fp8" in name:
            _check_fp8_sequence(seed, b, out, lse, (q, k, v), (qd, kd, vd), (qx, kx, vx), rows_q, rows_k, sq, sk,
                                descale == "per_block", causal)
        else:
            ref, ref_lse = _sequence_reference(q[rows_q], k[rows_k], v[rows_k], causal)
            verdict = bf16_verdict(out[rows_q], ref, _bf16_floor(q[rows_q], k[rows_k], v[rows_k], causal))
            assert verdict.ok, f"seed {seed}: sequence {b}: {verdict.detail}"
            _check_lse(seed, b, lse[:, rows_q], ref_lse)
