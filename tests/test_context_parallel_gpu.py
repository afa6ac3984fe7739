"""Context parallelism on one Hopper GPU (flashprefill.context_parallel with CuPy arrays): every rank of a ring of 2
or 4 run in turn, each piece one fp.attention_varlen call (its query rows against its key prefix, causal aligned
bottom-right where it holds the diagonal), the parts folded with fp.merge_state in float32 and the result rounded to
bf16 as an engine would hand it on; against the float64 reference with the bounds of the varlen GPU tests
(varlen_cases.py: bf16 1.5x torch's bf16 SDPA error, fp8 1.5x the P-and-output rounding floor), the one
attention_varlen call's own error named beside. Lengths of 4096 (equal chunks) and 3001 tokens; bf16, and fp8 per
tensor and per (sequence, kv head). Per-block descales are not tried: the chunks' bounds cut their blocks.
Every piece's output poisoned with NaN (an element left unwritten reaches the result); two runs agree bit for bit
(the fixed merge order)."""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import markers
import varlen_cases as vc
from flashprefill import context_parallel, reference

cp = pytest.importorskip("cupy", reason=markers.NO_CUPY)
# the one call, its options and the bf16 bound of the varlen GPU tests, taken from them so that the two cannot drift
from test_varlen_gpu import FP8_OPTIONS, _device_descale, _run, _sdpa_bound  # noqa: E402

pytestmark = pytest.mark.gpu

WORLDS = [2, 4]
LENGTHS = [4096, 3001]  # 2·world chunks of 512 or 1024 tokens, and chunks of uneven sizes
HEADS = (8, 2)
DIMS = (128, 128)
KINDS = ["bf16", "per_tensor", "per_head"]


def _piece_attention(case):
    """attention for context_parallel: one attention_varlen call of one sequence, out poisoned, float32 out."""
    descales = {f"{name}_descale": _device_descale(getattr(case, name).descale) for name in ("q", "k", "v")}
    options = FP8_OPTIONS if case.q.data.dtype == ga.E4M3 else {}

    def attention(q, k, v, causal):
        n_q, n_k = q.shape[0], k.shape[0]
        cu_q, cu_k = (cp.asarray(np.array([0, n], np.int32)) for n in (n_q, n_k))
        out = ga.poisoned_bf16((n_q, q.shape[1], v.shape[2]))
        out, lse = fp.attention_varlen(q, k, v, cu_q, cu_k, n_q, n_k, causal=causal, out=out, return_lse=True,
                                       check=True, **descales, **options)
        return ga.to_float(out), lse
    return attention


def _merge(out_a, lse_a, out_b, lse_b):
    """merge for context_parallel: fp.merge_state of float32 parts, as batch 1."""
    out, lse = fp.merge_state(out_a[None], lse_a[None], out_b[None], lse_b[None])
    return out[0], lse[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seqlen", LENGTHS)
@pytest.mark.parametrize("world", WORLDS)
def test_matches_the_one_call(rng_seed, world, seqlen, kind):
    rng, seed = rng_seed
    case = vc.varlen_case(rng, [seqlen], [seqlen], HEADS, DIMS, kind)
    q, k, v = (ga.to_device(x.data[:seqlen]) for x in (case.q, case.k, case.v))
    runs = [context_parallel.run_context_parallel(q, k, v, world, attention=_piece_attention(case), merge=_merge)
            for _ in range(2)]
    ga.synchronize()
    (out, lse), (again, lse_again) = runs
    assert out.dtype == np.float32 and out.shape == (seqlen, HEADS[0], DIMS[1]) and lse.shape == (HEADS[0], seqlen)
    assert ga.equal(out, again) and ga.equal(lse, lse_again), f"seed {seed}: two runs differ"
    out, lse = ga.host_f64(ga.to_bf16(out)), cp.asnumpy(lse).astype(np.float64)
    ref, ref_lse = case.reference(causal=True)
    one_call, _ = _run(case, True, seed)
    one_call_error = reference.relative_l2(one_call[:seqlen], ref[:seqlen])
    vc.check_structure(case, out, lse, ref_lse, seed)
    if case.q.descale is None:
        vc.check_lse(case, lse, ref_lse, seed)
    bound_of = _sdpa_bound(case, True) if case.q.descale is None else vc.fp8_floor_bound(case, True, cp.asarray)

    def beside_the_one_call(b, ref_rows):
        bound, name = bound_of(b, ref_rows)
        return bound, f"{name} (world {world}; the one call's error {one_call_error:.3e})"
    vc.check_sequences(case, out, ref, beside_the_one_call, seed)  # last: the bf16 bound skips without torch
