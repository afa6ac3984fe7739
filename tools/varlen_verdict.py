"""The verdict of the check of a varlen or paged call's device arrays, modelled on the host: the rule the Hopper plan
kernel follows (cuda/varlen_plan.cu) and the gfx950 check kernel (asm/gfx950/varlen_check.s) implements, one model
for the emulated test (tests/test_gfx950_varlen_check_emulated.py), the hardware check (tools/mi355x_check.py) and
its dry-run stand-ins.

Per sequence in order: cu_seqlens_q, the query length, cu_seqlens_k, seqused_k, the key length, its first failure
first; then the page ids of the sequences before the first at fault; the lowest (sequence, error) wins.
"""
import math

import numpy as np

# fp_varlen_error (src/launch_common.h), the code flashprefill_workspace_error returns: OK, cu_seqlens_q, a query
# length, cu_seqlens_k, a key length, seqused_k, a page id
OK, CU_Q, SEQLEN_Q, CU_K, SEQLEN_K, SEQUSED_K, BLOCK_TABLE = range(7)


def model_verdict(a):
    """(error, sequence, value, 0) of the arrays in `a` (call_arrays' dict) by the rule."""
    batch, first, lengths = len(a["cu_q"]) - 1, None, []
    for b in range(batch):
        q0, q1 = int(a["cu_q"][b]), int(a["cu_q"][b + 1])
        fault = None
        if q0 < 0 or q1 < q0 or q1 > a["total_q"]:
            fault = (CU_Q, q0 if q0 < 0 or q1 < q0 else q1)
        elif q1 - q0 > a["max_q"]:
            fault = (SEQLEN_Q, q1 - q0)
        else:
            rows = a["bts"] << a["page_log2"]
            if a["cu_k"] is not None:
                k0, k1 = int(a["cu_k"][b]), int(a["cu_k"][b + 1])
                if k0 < 0 or k1 < k0 or k1 > a["total_k"]:
                    fault = (CU_K, k0 if k0 < 0 or k1 < k0 else k1)
                rows = k1 - k0
            if fault is None:
                seqlen_k = int(a["used"][b]) if a["used"] is not None else rows
                if a["used"] is not None and not 0 <= seqlen_k <= rows:
                    fault = (SEQUSED_K, seqlen_k)
                elif seqlen_k > a["max_k"]:
                    fault = (SEQLEN_K, seqlen_k)
                lengths.append(seqlen_k)
        if fault is not None:
            first = (fault[0], b, fault[1], 0)
            break
    if a["table"] is not None:
        for b, seqlen_k in enumerate(lengths):
            pages = a["table"][b, :math.ceil(seqlen_k / (1 << a["page_log2"]))]
            bad = (pages < 0) | (pages >= a["num_pages"])
            if bad.any():
                return (BLOCK_TABLE, b, int(pages[np.argmax(bad)]), 0)
    return first or (OK, 0, 0, 0)


def call_arrays(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k=None, block_table=None):
    """model_verdict's dict of an attention_varlen call's host arrays: q (total_q, heads_q, dim); k (total_k, heads_kv,
    dim), or with block_table the cache (num_pages, page_size, heads_kv, dim)."""
    paged = block_table is not None
    return {"cu_q": np.asarray(cu_seqlens_q), "cu_k": None if cu_seqlens_k is None else np.asarray(cu_seqlens_k),
            "used": None if seqused_k is None else np.asarray(seqused_k),
            "table": np.asarray(block_table) if paged else None, "total_q": q.shape[0],
            "total_k": 0 if paged else k.shape[0], "max_q": max_seqlen_q, "max_k": max_seqlen_k,
            "bts": block_table.shape[1] if paged else 0, "page_log2": int(k.shape[1]).bit_length() - 1 if paged else 0,
            "num_pages": k.shape[0] if paged else 0}
