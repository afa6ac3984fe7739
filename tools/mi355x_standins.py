"""numpy stand-ins of the library calls tools/mi355x_check.py makes, for its --dry-run: the same names and arguments
as flashprefill.attention, attention_varlen, varlen_workspace_bytes, quantize_fp8, quantize_paged and merge_state,
and flashprefill_workspace_error's reading, taking their inputs as the ABI defines them (equal batches; packed rows at
cu_seqlens; paged caches through block_table and seqused_k; descale factors (batch, heads_kv) or BlockScales) and
writing into the poisoned outputs the check passes. Each computes what the judgement compares against (bf16:
bf16_floor with the reference's lse; fp8: the fp8 model rounded to bf16; the quantizer's numpy model; the float64
merge rounded; the rule's verdict on a varlen call's arrays, out and lse NaN at fault), so a dry run passes exactly
when the plumbing (inputs, layouts, outputs, judgement, timing, report) is right. It says nothing about the kernels.
"""
import numpy as np

from flashprefill import BlockScales, fp8, paged, prepare, reference
from mi355x_cases import Sequence, token_scales
from mi355x_judge import models
from varlen_verdict import OK, call_arrays, model_verdict

HEADER_INT32 = 4  # the workspace's verdict: error, sequence, value, tiles


def _descale(value):
    """Factors as they are; BlockScales as (exponents, block_tokens), as mi355x_cases.token_scales reads them."""
    if isinstance(value, BlockScales):
        return np.asarray(value.exponents), value.block_tokens
    return value


def _outputs(seq, causal):
    """(out, lse) the stand-in writes for one sequence (1, sq, hq, 128) and (1, hq, sq)."""
    if seq.k.shape[1] == 0:
        return np.zeros(seq.q.shape[:3] + (seq.v.shape[3],)), np.full((1, seq.q.shape[2], seq.q.shape[1]), -np.inf)
    _, lse, model = models(seq, causal)
    return model, lse


def _scales(descales, b, lengths, heads):
    if descales[0] is None:
        return None
    return tuple(token_scales(_per_sequence(d, b), n, h) for d, n, h in zip(descales, lengths, heads))


def _per_sequence(descale, b):
    d = _descale(descale)
    return (d[0][b:b + 1], d[1]) if isinstance(d, tuple) else np.asarray(d)[b:b + 1]


class StandIns:
    """The flashprefill calls of the check, computed on the host, each once per set of argument arrays: the timing
    repeats every call on the same arrays, and the float64 models take a second a call."""
    BlockScales = BlockScales

    def __init__(self):
        self._results = {}  # by the ids of the arguments, which the entry keeps alive

    def _once(self, arguments, compute):
        key = tuple(id(a) for a in arguments)
        if key not in self._results:
            self._results[key] = (arguments, compute())
        return self._results[key][1]

    def attention(self, q, k, v, *, causal=True, q_descale=None, k_descale=None, v_descale=None, out=None,
                  return_lse=False):
        lse = self._once((q, k, v, q_descale, k_descale, v_descale, out, causal),
                         lambda: self._attention(q, k, v, causal, (q_descale, k_descale, v_descale), out))
        return (out, lse) if return_lse else out

    @staticmethod
    def _attention(q, k, v, causal, descales, out):
        batch, sq, hq, _ = q.shape
        sk, hkv = k.shape[1], k.shape[2]
        lse = np.full((batch, hq, sq), np.nan, np.float32)
        for b in range(batch):
            seq = Sequence(q[b:b + 1], k[b:b + 1], v[b:b + 1], _scales(descales, b, (sq, sk, sk), (hq, hkv, hkv)))
            out[b:b + 1], lse[b:b + 1] = _outputs(seq, causal)
        return lse

    def attention_varlen(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, seqused_k=None,
                         block_table=None, causal=True, q_descale=None, k_descale=None, v_descale=None, out=None,
                         return_lse=False, lse=None, workspace=None):
        arguments = (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, q_descale, k_descale, v_descale,
                     out, lse, workspace, causal, max_seqlen_q, max_seqlen_k)
        lse = self._once(arguments, lambda: self._attention_varlen(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table, causal,
            (q_descale, k_descale, v_descale), out, lse, workspace))
        return (out, lse) if return_lse else out

    @staticmethod
    def varlen_workspace_bytes(q, k, v, cu_seqlens_q, *args, **kwargs):
        return 4 * HEADER_INT32  # the verdict alone: the stand-in keeps no copies nor work list

    @staticmethod
    def workspace_error(workspace):
        """(code, message) as flashprefill_workspace_error gives them, from the header the stand-in wrote."""
        error, sequence, value, _ = (int(x) for x in np.asarray(workspace)[:4 * HEADER_INT32].view(np.int32))
        return error, "valid" if error == OK else f"fault {error}: sequence {sequence}, value {value}"

    @staticmethod
    def _attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table,
                          causal, descales, out, lse, workspace):
        """The rule's verdict into the workspace (where given): at fault out and lse all NaN, else each sequence's."""
        verdict = model_verdict(call_arrays(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k,
                                            block_table))
        if workspace is not None:
            workspace[:4 * HEADER_INT32].view(np.int32)[:] = verdict
        hq, hkv = q.shape[1], k.shape[-2]
        if lse is None:
            lse = np.full((hq, q.shape[0]), np.nan, np.float32)
        if verdict[0] != OK:
            out[...], lse[...] = np.nan, np.nan
            return lse
        for b in range(len(cu_seqlens_q) - 1):
            rows = slice(int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1]))
            if block_table is not None:  # key j of sequence b: page block_table[b, j // page_size]
                used, page_size = int(seqused_k[b]), k.shape[1]
                pages = block_table[b, :-(-used // page_size)]
                keys, values = (c[pages].reshape(-1, *c.shape[2:])[:used] for c in (k, v))
            else:
                start = int(cu_seqlens_k[b])
                end = start + int(seqused_k[b]) if seqused_k is not None else int(cu_seqlens_k[b + 1])
                keys, values = k[start:end], v[start:end]
            if rows.stop == rows.start:
                continue
            lengths = (rows.stop - rows.start, len(keys), len(keys))
            seq = Sequence(q[rows][None], keys[None], values[None], _scales(descales, b, lengths, (hq, hkv, hkv)))
            seq_out, seq_lse = _outputs(seq, causal)
            out[rows], lse[:, rows] = seq_out[0], seq_lse[0]
        return lse

    @staticmethod
    def quantize_fp8(x, block=128, *, codes=None, exponents=None, cu_seqlens=None, max_seqlen=None):
        x = np.asarray(x, np.float32)
        if cu_seqlens is None:
            model_codes, model_exponents = fp8.quantize_blocks(prepare.transform(x), block)
        else:
            model_codes, model_exponents = fp8.quantize_blocks_varlen(
                prepare.transform_varlen(x, cu_seqlens), cu_seqlens, max_seqlen, block,
                codes=np.asarray(codes).view(np.uint8), exponents=np.asarray(exponents))
        codes[...] = model_codes.view(codes.dtype)
        exponents[...] = model_exponents
        return codes, BlockScales(exponents, block)

    @staticmethod
    def quantize_paged(x, slot_mapping, codes_cache, exponents):
        model_codes, model_exponents = paged.quantize_paged_model(
            np.asarray(x, np.float32), slot_mapping, np.asarray(codes_cache).view(np.uint8), exponents)
        codes_cache[...] = model_codes.view(codes_cache.dtype)
        exponents[...] = model_exponents

    @staticmethod
    def merge_state(out_a, lse_a, out_b, lse_b, out=None, lse_out=None):
        """The float64 merge rounded to out's dtype and float32."""
        merged, merged_lse = reference.merge_state_reference(*(np.asarray(x).astype(np.float64)
                                                               for x in (out_a, lse_a, out_b, lse_b)))
        out[...] = merged.astype(np.float32).astype(out.dtype)
        lse_out[...] = merged_lse
        return out, lse_out
