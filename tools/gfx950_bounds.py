"""The acceptance bounds of a gfx950 forward output, one copy: the emulated tests (tests/test_gfx950_*_emulated.py)
and the hardware check (tools/mi355x_check.py) both judge outputs with these functions.

bf16: relative L2 error against float64 at most BOUND_OVER_MODEL times that of a numpy model of the kernel's
precision (bf16_floor: P rounded to bf16, float32 accumulation, output rounded to bf16).
fp8: against the numpy model of the fp8 pipeline (flashprefill.fp8.attention_fp8_model) within the bf16 rounding
of the output (BOUND_OVER_MODEL times it, plus MODEL_SLACK); against float64 of the dequantized inputs within
BOUND_OVER_MODEL times the model's own error plus that rounding.
lse: -inf exactly where the reference's (queries that see no key), elsewhere within LSE_RELATIVE of the largest
|lse| (at least 1). NaN never passes: relative_l2 of a non-finite output is inf.
"""
import dataclasses

import ml_dtypes
import numpy as np

from flashprefill import reference

BOUND_OVER_MODEL = 1.5
MODEL_SLACK = 1e-6
LSE_RELATIVE = 1e-3


@dataclasses.dataclass(frozen=True)
class Verdict:
    ok: bool
    error: float   # relative L2 (or the largest lse difference)
    bound: float
    detail: str    # on failure, what a test or the hardware report prints


def bf16_floor(q, k, v, causal):
    """float32 attention (batch, seqlen_q, heads_q, dim_v) with P rounded to bf16 and the output rounded to bf16 (the
    kernel's precision); mask aligned bottom-right, GQA as the reference; 0 for queries that see no key."""
    batch, sq, hq, dim_qk = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    out = np.zeros((batch, sq, hq, v.shape[-1]))
    hidden = np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq
    for b in range(batch):
        for h in range(hq):
            g = h // (hq // hkv)
            qh, kh, vh = (np.asarray(x[b, :, hh], np.float32) for x, hh in ((q, h), (k, g), (v, g)))
            s = (qh @ kh.T) / np.float32(np.sqrt(dim_qk))
            if causal:
                s[hidden] = -np.inf
            seen = (s > -np.inf).any(axis=1)
            p = np.exp(s - np.where(seen, s.max(axis=1, initial=-np.inf), 0)[:, None])
            pb = p.astype(ml_dtypes.bfloat16).astype(np.float32)
            out[b, seen, h] = (pb[seen] @ vh) / p[seen].sum(-1, keepdims=True)
    return out.astype(ml_dtypes.bfloat16).astype(np.float64)


def bf16_verdict(out, ref, floor):
    """out against the float64 ref, bounded by BOUND_OVER_MODEL times the error of floor (bf16_floor's output)."""
    err, floor_err = reference.relative_l2(out, ref), reference.relative_l2(floor, ref)
    bound = BOUND_OVER_MODEL * floor_err
    return Verdict(err <= bound, err, bound, f"{reference.error_report(out, ref)}; bf16 floor {floor_err:.3e}")


def bf16_rounding(model):
    """The relative L2 change of rounding the float64 `model` to bf16: what the kernel's output rounding adds."""
    return reference.relative_l2(model.astype(ml_dtypes.bfloat16).astype(np.float64), model)


def fp8_verdicts(out, model, ref):
    """(against the model, against float64): out of the fp8 kernel against attention_fp8_model's `model` and the
    float64 `ref` of the dequantized inputs."""
    rounding = bf16_rounding(model)
    err_model, bound_model = reference.relative_l2(out, model), BOUND_OVER_MODEL * rounding + MODEL_SLACK
    err_ref = reference.relative_l2(out, ref)
    bound_ref = BOUND_OVER_MODEL * reference.relative_l2(model, ref) + rounding
    return (Verdict(err_model <= bound_model, err_model, bound_model,
                    f"against the model {reference.error_report(out, model)}; bf16 rounding {rounding:.3e}"),
            Verdict(err_ref <= bound_ref, err_ref, bound_ref, f"against float64 {reference.error_report(out, ref)}"))


def lse_verdict(lse, ref_lse):
    """lse against ref_lse (the reference's or the model's): -inf exactly where ref_lse's, else within LSE_RELATIVE."""
    lse, ref_lse = np.asarray(lse, np.float64), np.asarray(ref_lse, np.float64)
    if not np.array_equal(lse == -np.inf, ref_lse == -np.inf):
        return Verdict(False, float("inf"), 0.0, "lse -inf off the rule (a query that sees no key has lse -inf)")
    finite = np.isfinite(ref_lse)
    if np.isnan(lse).any():
        return Verdict(False, float("inf"), 0.0, f"{int(np.isnan(lse).sum())} lse NaN or unwritten")
    diff = float(np.abs(lse[finite] - ref_lse[finite]).max(initial=0))
    bound = LSE_RELATIVE * max(1.0, float(np.abs(ref_lse[finite]).max(initial=0)))
    return Verdict(diff < bound, diff, bound, f"lse off by {diff:.3e} (bound {bound:.3e})")
