"""The NaN/inf rule's check, shared by the Hopper (test_nonfinite_gpu.py) and the emulated gfx950
(test_gfx950_nonfinite_emulated.py) tests: a non-finite element planted in q, k or v must make non-finite exactly what
the float64 reference (flashprefill.reference.attention_reference, IEEE arithmetic) makes non-finite, plus at most
column d of the rows whose tile loaded v's key; everything that does not read it must equal the clean run (the same
inputs with the element zeroed) bit for bit; rows that read it and stay finite must match the reference."""
import numpy as np

from flashprefill import reference


def where_report(report, mask):
    points = np.argwhere(mask)
    return f"{len(points)} {report}" + (f", first at {points[0].tolist()}" if len(points) else "")


def reading_rows(shape, tensor, where, causal):
    """Rows (batch, query, head) that read the element planted at `where` of `tensor`, by the mask alone; shape:
    (batch, seqlen_q, seqlen_k, heads_q, heads_kv)."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv = shape
    rows = np.zeros((batch, seqlen_q, heads_q), dtype=bool)
    b, j, h = where[:3]
    if tensor == "q":
        rows[b, j, h] = True
        return rows
    seeing = j <= np.arange(seqlen_q) + seqlen_k - seqlen_q if causal else np.ones(seqlen_q, dtype=bool)
    group = heads_q // heads_kv
    rows[b][np.ix_(seeing, np.arange(h * group, (h + 1) * group))] = True
    return rows


def _bits(x):
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def check(seed, family, tensor, where, reads, v_tile_rows, planted, clean, ref):
    """planted, clean: the kernel's (out, lse) on the inputs with the element and with it zeroed; ref: the reference's
    (out, lse) on the planted inputs; reads: reading_rows(...); v_tile_rows: for v, the rows whose tile loaded its
    key."""
    (out, lse), (clean_out, clean_lse), (ref_out, ref_lse) = planted, clean, ref
    reach_out, reach_lse = np.isnan(ref_out), ~np.isfinite(ref_lse)  # lse -inf: every score -inf
    assert np.isfinite(clean_out).all() and np.isfinite(clean_lse).all(), f"seed {seed}: the clean run"
    assert reads.any(), "some row reads the planted element"
    non_finite, non_finite_lse = ~np.isfinite(out), ~np.isfinite(lse)
    allowed = reach_out.copy()
    if tensor == "v":
        allowed[..., where[3]] |= v_tile_rows
    assert not (non_finite & ~allowed).any(), \
        f"seed {seed}: " + where_report("non-finite outputs outside the reach", non_finite & ~allowed)
    assert not (reach_out & ~non_finite).any(), \
        f"seed {seed}: " + where_report("finite outputs within the reach", reach_out & ~non_finite)
    assert np.array_equal(non_finite_lse, reach_lse), \
        f"seed {seed}: " + where_report("lse elements off the rule", non_finite_lse != reach_lse)
    assert np.array_equal(lse[reach_lse] == -np.inf, ref_lse[reach_lse] == -np.inf), f"seed {seed}: lse -inf or NaN"
    untouched = ~reads[..., None] & ~allowed
    differ = untouched & (_bits(out) != _bits(clean_out))
    assert not differ.any(), \
        f"seed {seed}: " + where_report("outputs that do not read it differ from the clean run's", differ)
    untouched_lse = ~reads.transpose(0, 2, 1) & ~reach_lse
    assert np.array_equal(_bits(lse[untouched_lse]), _bits(clean_lse[untouched_lse])), \
        f"seed {seed}: lse that does not read it differs from the clean run's"
    finite_readers = reads[..., None] & ~allowed  # rows that read it and stay finite: a score of -inf drops the key
    if finite_readers.any():
        error = reference.relative_l2(out[finite_readers], ref_out[finite_readers])
        bound = 1e-2 if family == "bf16" else 6e-2  # about 3x the kernels' own error on N(0, 1) inputs
        assert error < bound, f"seed {seed}: rows that read it and stay finite are off the reference by {error:.3e}"
