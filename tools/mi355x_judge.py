"""The judgement of tools/mi355x_check.py's outputs (its cases: tools/mi355x_cases.py): against the float64 reference
and the fp8 numpy model with the bounds of tools/gfx950_bounds.py and tools/merge_state_bounds.py (the emulated tests'
own), bit for bit against the quantizers' numpy models, and the varlen check's verdict against the rule's
(tools/varlen_verdict.py).

Long sequences are judged on their first and last JUDGED_ROWS query rows (every head): the float64 reference of all
16k rows would take minutes per case on the host, and the first and last rows see the fewest and the most keys.
"""
import numpy as np

from flashprefill import fp8, paged, prepare, reference
from gfx950_bounds import Verdict, bf16_floor, bf16_verdict, fp8_verdicts, lse_verdict
from merge_state_bounds import merge_verdicts, nonfinite_verdicts
from mi355x_cases import E4M3_NAN_CODE, EXPONENT_POISON, MERGE_DTYPES, QUANTIZE_BLOCK
from varlen_verdict import OK, call_arrays, model_verdict

JUDGED_ROWS = 128


def row_blocks(sq, sk, causal, rows=JUDGED_ROWS):
    """[(first row, end row, keys they may see)]: all rows when there are at most 2 * rows, else the first and the
    last `rows`; causal (aligned bottom-right) rows r0..r1-1 see no key past sk - sq + r1 - 1."""
    spans = [(0, sq)] if sq <= 2 * rows else [(0, rows), (sq - rows, sq)]
    return [(r0, r1, int(np.clip(sk - sq + r1, 0, sk)) if causal else sk) for r0, r1 in spans]


def models(seq, causal, rows=None):
    """What the kernel's output should be near, for query rows `rows` = (r0, r1, keys): bf16: (float64 reference,
    its lse, bf16_floor); fp8: (float64 reference of the dequantized inputs, the model's lse, the fp8 model)."""
    r0, r1, keys = rows or (0, seq.q.shape[1], seq.k.shape[1])
    q, k, v = seq.q[:, r0:r1], seq.k[:, :keys], seq.v[:, :keys]
    if seq.scales is None:
        ref, ref_lse = reference.attention_reference(q, k, v, causal=causal, return_lse=True)
        return ref, ref_lse, bf16_floor(q, k, v, causal)
    qs, ks, vs = seq.scales[0][:, r0:r1], seq.scales[1][:, :keys], seq.scales[2][:, :keys]
    model, model_lse = fp8.attention_fp8_model(q.view(np.uint8), k.view(np.uint8), v.view(np.uint8), qs, ks, vs,
                                               causal=causal, kv_tile=64, return_lse=True)
    values = [x.astype(np.float64) * s[..., None] for x, s in ((q, qs), (k, ks), (v, vs))]
    return reference.attention_reference(*values, causal=causal), model_lse, model


def judge_sequence(seq, out, lse, causal):
    """[(what, Verdict)] of one sequence's out (1, sq, hq, 128) and lse (1, hq, sq) (float64)."""
    verdicts = []
    sq = seq.q.shape[1]
    for r0, r1, keys in row_blocks(sq, seq.k.shape[1], causal):
        where = f"rows {r0}..{r1 - 1}"
        got, got_lse = out[:, r0:r1], lse[:, :, r0:r1]
        if keys == 0:  # no row sees a key: out 0, lse -inf
            err = reference.relative_l2(got, np.zeros_like(got))
            verdicts.append((f"{where} out", Verdict(err == 0, err, 0.0, "rows that see no key must be 0")))
            verdicts.append((f"{where} lse", lse_verdict(got_lse, np.full(got_lse.shape, -np.inf))))
            continue
        ref, ref_lse, model = models(seq, causal, (r0, r1, keys))
        if seq.scales is None:
            verdicts.append((f"{where} out", bf16_verdict(got, ref, model)))
        else:
            against_model, against_ref = fp8_verdicts(got, model, ref)
            verdicts += [(f"{where} out vs model", against_model), (f"{where} out vs float64", against_ref)]
        verdicts.append((f"{where} lse", lse_verdict(got_lse, ref_lse)))
    return verdicts


def judge(case, sequences, arrays, results):
    """[(what, Verdict)] of a case's host results: attention (out, lse) in its form's layout; the quantizers (codes,
    exponents); merge_state (out, lse); varlen_check (out, lse, the verdict (code, sequence, value, message) read
    back)."""
    if case.form == "quantize":
        return judge_quantize(arrays["x"], *results)
    if case.form == "quantize_packed":
        return judge_quantize_packed(arrays, *results)
    if case.form == "quantize_paged":
        return judge_quantize_paged(arrays, *results)
    out, lse = (np.asarray(x).astype(np.float64) for x in results[:2])
    if case.form.startswith("merge_state"):
        return judge_merge(case, arrays, out, lse)
    if case.form == "varlen_check":
        return judge_varlen_check(case, sequences, arrays, out, lse, results[2])
    if case.form == "equal":
        verdicts = []
        for b, seq in enumerate(sequences):
            verdicts += [(f"batch {b} {what}", v) for what, v in judge_sequence(seq, out[b:b + 1], lse[b:b + 1],
                                                                                case.causal)]
        return verdicts
    return judge_varlen(case, sequences, arrays, out, lse)


def judge_varlen(case, sequences, arrays, out, lse):
    """[(what, Verdict)] of each sequence's rows of a varlen or paged call's out and lse."""
    cu_q, verdicts = arrays["cu_seqlens_q"], []
    for b, seq in enumerate(sequences):
        if seq.q.shape[1] == 0:
            continue  # no row of out or lse is the sequence's
        rows = slice(int(cu_q[b]), int(cu_q[b + 1]))
        verdicts += [(f"sequence {b} {what}", v) for what, v in
                     judge_sequence(seq, out[rows][None], lse[:, rows][None], case.causal)]
    return verdicts


def judge_merge(case, arrays, out, lse):
    """merge_state_bounds' verdicts of out and lse against the float64 merge of the inputs."""
    host = {n: np.asarray(arrays[n]).astype(np.float64) for n in ("out_a", "lse_a", "out_b", "lse_b")}
    out_dtype = MERGE_DTYPES[case.out_dtype]
    if case.form == "merge_state_nonfinite":
        return nonfinite_verdicts(out, lse, host, out_dtype)
    return merge_verdicts(out, lse, [host[n] for n in ("out_a", "lse_a", "out_b", "lse_b")], out_dtype)


def expected_verdict(arrays):
    """(error, sequence, value) the rule gives the call's host arrays."""
    return model_verdict(call_arrays(arrays["q"], arrays["k"], arrays["cu_seqlens_q"], arrays["cu_seqlens_k"],
                                     arrays["max_seqlen_q"], arrays["max_seqlen_k"], arrays["seqused_k"],
                                     arrays.get("block_table")))[:3]


def judge_varlen_check(case, sequences, arrays, out, lse, verdict):
    """The verdict read back against the rule's; then, arrays valid, the outputs as a varlen call's; at fault, every
    element of out and lse NaN (they were poisoned with a finite value)."""
    want, (code, sequence, value, message) = expected_verdict(arrays), verdict
    got = (code, sequence, value)
    verdicts = [("verdict", Verdict(got == want, float(got != want), 0.0,
                                    f"flashprefill_workspace_error: {got} \"{message}\"; the rule: {want}"))]
    if want[0] == OK:
        return verdicts + judge_varlen(case, sequences, arrays, out, lse)
    for what, x in (("out", out), ("lse", lse)):
        left = ~np.isnan(x)
        verdicts.append((f"{what} NaN after the fault", Verdict(not left.any(), float(left.mean()), 0.0,
                                                               f"{int(left.sum())} of {left.size} not NaN")))
    return verdicts


def judge_quantize(x, codes, exponents):
    """Bit for bit against fp8.quantize_blocks of the quantizer's transform (no rotation, no smoothing)."""
    model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(np.asarray(x, np.float32)), QUANTIZE_BLOCK)
    return _bit_verdicts(codes, exponents, model_codes, model_exponents)


def packed_model(arrays):
    """(codes, exponents) of the packed quantizer on poisoned outputs: fp8.quantize_blocks_varlen of the transform."""
    x, cu, max_seqlen = np.asarray(arrays["x"], np.float32), arrays["cu_seqlens"], arrays["max_seqlen"]
    slots = -(-max_seqlen // QUANTIZE_BLOCK)
    return fp8.quantize_blocks_varlen(prepare.transform_varlen(x, cu), cu, max_seqlen, QUANTIZE_BLOCK,
                                      codes=np.full(x.shape, E4M3_NAN_CODE, np.uint8),
                                      exponents=np.full((len(cu) - 1, x.shape[1], slots), EXPONENT_POISON, np.int8))


def paged_model(arrays, num_pages, page_size):
    """(codes, exponents) of the paged writer's two calls (the prompt, then the decode step) into a cache of NaN codes
    and empty pages (EXPONENT_POISON is PAGE_EMPTY)."""
    heads_kv, dim = arrays["x"].shape[1:]
    codes = np.full((num_pages, page_size, heads_kv, dim), E4M3_NAN_CODE, np.uint8)
    exponents = np.full((num_pages, heads_kv), EXPONENT_POISON, np.int8)
    for x, slots in ((arrays["x"], arrays["slot_mapping"]), (arrays["x_step"], arrays["slot_mapping_step"])):
        codes, exponents = paged.quantize_paged_model(np.asarray(x, np.float32), slots, codes, exponents)
    return codes, exponents


def judge_quantize_packed(arrays, codes, exponents):
    """Bit for bit against packed_model (no rotation, no smoothing): the rows past every sequence and the slots past
    each sequence's blocks keep their poison."""
    return _bit_verdicts(codes, exponents, *packed_model(arrays))


def judge_quantize_paged(arrays, codes, exponents):
    """The whole cache bit for bit against paged_model (no rotation)."""
    codes = np.asarray(codes)
    return _bit_verdicts(codes, exponents, *paged_model(arrays, codes.shape[0], codes.shape[1]))


def _bit_verdicts(codes, exponents, model_codes, model_exponents):
    codes, exponents = np.asarray(codes).view(np.uint8), np.asarray(exponents)
    verdicts = []
    for what, got, want in (("codes", codes, model_codes), ("exponents", exponents, model_exponents)):
        differ = got != want
        where = f", first at {np.argwhere(differ)[0].tolist()}" if differ.any() else ""
        verdicts.append((what, Verdict(not differ.any(), float(differ.mean()), 0.0,
                                       f"{int(differ.sum())} of {differ.size} {what} differ from the model{where}")))
    return verdicts
