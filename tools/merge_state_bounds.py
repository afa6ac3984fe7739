"""The accuracy bounds of flashprefill_merge_state's output, one definition for every backend's test (the Hopper
kernel on a GPU, tests/test_merge_state_gpu.py; the gfx950 kernel in the emulator,
tests/test_gfx950_merge_state_emulated.py) and for the hardware check (tools/mi355x_check.py on an MI355X).

bf16 out: relative L2 within 1.5x that of rounding the exact merge to bf16 (the float32 math costs ~1e-6, rounding
~1e-3). float32 out: within 2x that of the same formula computed in numpy float32 (both dominated by the rounding of
lse to float32, which moves every weight by up to |lse| 2^-24), plus 2^-21 of |w_a out_a| + |w_b out_b| (2 ulps of
the exponential, CUDA's documented bound for expf, beyond numpy's correctly rounded exp). lse: 4 float32 ulps of
|lse| + 1. The *_verdicts functions return gfx950_bounds.Verdicts (the hardware check reports them); the check_*
functions assert them (the tests)."""
import ml_dtypes
import numpy as np

from flashprefill.reference import error_report, merge_state_reference, relative_l2
from gfx950_bounds import Verdict

LSE_RELATIVE = 2.0**-22
# The (in, out) dtypes flashprefill_merge_state takes, and their test ids
DTYPE_PAIRS = [("bfloat16", "bfloat16"), ("float32", "float32"), ("bfloat16", "float32"), ("float32", "bfloat16")]
DTYPE_PAIR_IDS = [f"{a}-{b}" for a, b in DTYPE_PAIRS]


def rounded(x, dtype):
    """float64 host values rounded to `dtype` ("bfloat16" or "float32") and back."""
    narrow = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    return np.asarray(x, np.float32).astype(narrow).astype(np.float64)


def float32_model(out_a, lse_a, out_b, lse_b):
    """The merge in numpy float32 (finite lse only)."""
    la, lb = lse_a.astype(np.float32), lse_b.astype(np.float32)
    hi, lo = np.maximum(la, lb), np.minimum(la, lb)
    lse = hi + np.log1p(np.exp(lo - hi))
    wa, wb = (np.exp(part - lse).transpose(0, 2, 1)[..., None] for part in (la, lb))
    return wa * out_a.astype(np.float32) + wb * out_b.astype(np.float32)


def merge_verdicts(out, lse, host, out_dtype):
    """[("out", Verdict), ("lse", Verdict)] of out and lse (host float64) against the exact merge of `host`, the
    float64 (out_a, lse_a, out_b, lse_b) of finite parts. A NaN (an element not written) never passes."""
    exact_out, exact_lse = merge_state_reference(*host)
    if out_dtype == "float32":
        out_a, lse_a, out_b, lse_b = host
        terms = sum(np.abs(np.exp(part - exact_lse).transpose(0, 2, 1)[..., None] * x)
                    for x, part in ((out_a, lse_a), (out_b, lse_b)))
        bound = 2.0 * relative_l2(float32_model(*host), exact_out) + \
            2.0**-21 * float(np.linalg.norm(terms.ravel()) / np.linalg.norm(exact_out.ravel()))
    else:
        bound = 1.5 * relative_l2(rounded(exact_out, "bfloat16"), exact_out)
    error = relative_l2(out, exact_out)  # inf where out holds a NaN
    with np.errstate(invalid="ignore"):
        lse_error = np.abs(lse - exact_lse) / (np.abs(exact_lse) + 1)
    lse_worst = float(lse_error.max()) if np.isfinite(lse_error).all() else float("inf")
    return [("out", Verdict(error <= bound, error, bound, f"bound {bound:.3e}; " + error_report(out, exact_out))),
            ("lse", Verdict(lse_worst <= LSE_RELATIVE, lse_worst, LSE_RELATIVE,
                            f"lse off by {lse_worst:.3e} of |lse| + 1 (NaN: unwritten)"))]


def check_merge(out, lse, host, out_dtype):
    for what, verdict in merge_verdicts(out, lse, host, out_dtype):
        assert verdict.ok, f"{what}: {verdict.detail}"


# Rows that are not finite, per query row of every head: 0 a saw no key; 1 b saw none; 2 neither; 3 lse_a NaN;
# 4 lse_b +inf; 5 both +inf; 6 a NaN in out_a's column 3; 7 a saw no key but holds a NaN in column 2 (weight 0 times
# NaN is NaN); the rest finite. At least 8 rows.
def nonfinite_parts(rng, shape, in_dtype):
    """{"out_a", "lse_a", "out_b", "lse_b"}: float64 host values that in_dtype (out) and float32 (lse) hold exactly,
    out N(0, 1) and lse ~ N(5, 4) with the rows above."""
    batch, seqlen, heads, _ = shape
    host = {}
    for part in ("a", "b"):
        host[f"out_{part}"] = rounded(rng.standard_normal(shape), in_dtype)
        host[f"lse_{part}"] = rounded(rng.normal(5.0, 4.0, (batch, heads, seqlen)), "float32")
    host["lse_a"][:, :, [0, 2, 7]] = -np.inf
    host["lse_b"][:, :, [1, 2]] = -np.inf
    host["out_a"][:, [0, 2, 7]] = host["out_b"][:, [1, 2]] = 0.0
    host["lse_a"][:, :, 3], host["lse_b"][:, :, 4] = np.nan, np.inf
    host["lse_a"][:, :, 5] = host["lse_b"][:, :, 5] = np.inf
    host["out_a"][:, 6, :, 3] = host["out_a"][:, 7, :, 2] = np.nan
    return host


def _equal(what, got, want):
    """Verdict that got equals want element by element (NaN equal to NaN)."""
    differ = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    where = f", first at {np.argwhere(differ)[0].tolist()}" if differ.any() else ""
    return what, Verdict(not differ.any(), float(differ.mean()), 0.0,
                         f"{int(differ.sum())} of {differ.size} differ{where}")


def nonfinite_verdicts(out, lse, host, out_dtype):
    """[(what, Verdict)] of out and lse (host float64, poisoned with a finite value before the call) of merging
    nonfinite_parts' host: NaN exactly where the exact merge has it, a part without keys giving the other part
    exactly, the finite elements near the exact merge."""
    exact_out, exact_lse = merge_state_reference(host["out_a"], host["lse_a"], host["out_b"], host["lse_b"])
    verdicts = [_equal("out NaN where the merge's", np.isnan(out), np.isnan(exact_out)),
                _equal("lse of rows 0..2 (-inf and the other part's)", lse[:, :, :3], exact_lse[:, :, :3]),
                _equal("lse NaN in rows 3..5 only", np.isnan(lse), np.isnan(exact_lse)),
                _equal("lse finite where the merge's", np.isfinite(lse), np.isfinite(exact_lse)),
                _equal("out of rows 0..2 (the other part)", out[:, :3], rounded(exact_out[:, :3], out_dtype))]
    finite = np.isfinite(exact_out)
    tolerance = (2.0**-8 if out_dtype == "bfloat16" else 0.0) * np.abs(exact_out) + \
        2.0**-17 * (np.abs(np.nan_to_num(host["out_a"])) + np.abs(host["out_b"]))
    with np.errstate(invalid="ignore"):
        excess = np.where(finite, np.abs(out - exact_out) - tolerance, 0.0)
    worst = float(np.nan_to_num(excess, nan=np.inf).max())
    verdicts.append(("finite out", Verdict(worst <= 0, max(worst, 0.0), 0.0,
                                           error_report(out[finite], exact_out[finite]))))
    return verdicts


def check_nonfinite(out, lse, host, out_dtype):
    for what, verdict in nonfinite_verdicts(out, lse, host, out_dtype):
        assert verdict.ok, f"{what}: {verdict.detail}"
