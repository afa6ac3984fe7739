"""The inputs and checks of the varlen GPU tests (varlen_cases.py) on the host: the cases hold what they claim (NaN
wherever no sequence reads, out-of-range page ids past each sequence's pages, values that are their codes times their
descales), a stand-in for a right kernel (the reference rounded to bf16) passes every check, and wrong outputs fail."""
import numpy as np
import pytest

import gpu_arrays as ga
import varlen_cases as vc
from flashprefill import fp8, reference

HEADS, DIMS = (4, 2), (64, 32)


def small_lengths(rng):
    return vc.lengths(rng, [0, 1, 17, 40])


def kernel_stand_in(case, causal):
    """What a right kernel gives: the reference's out rounded to bf16 (0 where no key), its lse in float32."""
    ref, lse = case.reference(causal)
    return ga.to_f64(ga.to_bf16(ref)), lse.astype(np.float32).astype(np.float64)


def cases(rng, kind):
    lengths = small_lengths(rng)
    if kind in ("per_tensor_paged", "per_page", "bf16_paged"):
        lengths_q = [min(n, 5) if i % 2 else n for i, n in enumerate(lengths)]
        return vc.paged_case(rng, lengths_q, lengths, HEADS, DIMS, kind.removesuffix("_paged"), 16)
    lengths_k = [0 if n == 1 else n for n in lengths]  # one query without keys
    return vc.varlen_case(rng, lengths, lengths_k, HEADS, DIMS, kind, rows_k=[n + 3 for n in lengths_k])


KINDS = vc.DESCALES + ["bf16_paged", "per_tensor_paged", "per_page"]


@pytest.mark.parametrize("kind", KINDS)
def test_values_are_the_codes_times_their_descales(rng, kind):
    """The reference from codes and descales equals attention_reference on each sequence's values (sequence_values),
    and the values are NaN wherever no sequence reads."""
    case = cases(rng, kind)
    ref, _ = case.reference(True)
    for b in range(len(case.cu_q) - 1):
        q, k, v = case.sequence_values(b)
        assert np.isfinite(q).all() and np.isfinite(k).all() and np.isfinite(v).all()
        if len(q) and len(k):
            want = reference.attention_reference(q[None], k[None], v[None])[0]
            assert np.allclose(ref[case.cu_q[b]:case.cu_q[b + 1]], want, rtol=1e-12, atol=1e-12), f"sequence {b}"
    assert np.isnan(case.q.values[case.cu_q[-1]:]).all()
    read = sum(int(n) for n in case.lengths_k)
    assert np.isfinite(case.k.values).all(axis=(-2, -1)).sum() == read  # every other row or slot NaN
    if case.block_table is not None:
        pages = -(-case.seqused_k // case.k.data.shape[1])
        past = np.arange(case.block_table.shape[1])[None, :] >= pages[:, None]
        assert (case.block_table[past] >= case.k.data.shape[0]).all()
        assert np.isnan(ga.to_f64(case.k.data) if kind.startswith("bf16") else
                        fp8.e4m3_decode(case.k.data.view(np.uint8))).any()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_a_right_kernel_passes(rng, kind, causal):
    case = cases(rng, kind)
    ref, ref_lse = case.reference(causal)
    out, lse = kernel_stand_in(case, causal)
    vc.check_structure(case, out, lse, ref_lse, 0)
    vc.check_lse(case, lse, ref_lse, 0)
    if kind.startswith("bf16"):  # the peer is the GPU file's; the reference's own rounding as a stand-in bound
        vc.check_sequences(case, out, ref, lambda b, rows: (2.0**-8, "bf16 rounding"), 0)
    else:
        vc.check_sequences(case, out, ref, vc.fp8_floor_bound(case, causal), 0)


@pytest.mark.parametrize("wrong", ["unwritten", "blind_row_not_zero", "lse_off", "sequence_shifted", "keys_of_another"])
def test_wrong_outputs_fail(rng, wrong):
    case = cases(rng, "per_head")
    ref, ref_lse = case.reference(True)
    out, lse = kernel_stand_in(case, True)
    b = int(np.argmax(np.diff(case.cu_q)))  # the longest sequence
    rows = slice(case.cu_q[b], case.cu_q[b + 1])
    if wrong == "unwritten":
        out[rows.start + 3, 1, 5] = np.nan
    elif wrong == "blind_row_not_zero":  # the query of the sequence without keys
        out[np.flatnonzero(ref_lse[0, :case.cu_q[-1]] == -np.inf)[0]] = 2.0**-20
    elif wrong == "lse_off":
        lse[1, rows.start + 2] += 0.01
    elif wrong == "sequence_shifted":
        out[rows] = np.roll(out[rows], 1, axis=0)
    else:
        other = case.sequence_values(b)
        out[rows] = ga.to_f64(ga.to_bf16(reference.attention_reference(
            other[0][None], other[1][None, 1:], other[2][None, 1:])[0]))
    with pytest.raises(AssertionError):
        vc.check_structure(case, out, lse, ref_lse, 0)
        vc.check_lse(case, lse, ref_lse, 0)
        vc.check_sequences(case, out, ref, vc.fp8_floor_bound(case, True), 0)


def test_p_rounding_floor_is_near_the_reference(rng):
    """The floor's emulation differs from the reference by its roundings only: more than bf16's, less than e4m3's."""
    q, k, v = rng.standard_normal((20, 4, 16)), rng.standard_normal((30, 2, 16)), rng.standard_normal((30, 2, 8))
    floor = vc.p_rounding_floor(q, k, v, True)
    ref = reference.attention_reference(q[None], k[None], v[None])[0]
    err = reference.relative_l2(floor, ref)
    assert 2.0**-12 < err < 2.0**-4, f"e4m3 P and bf16 output: {err:.3e}"
