"""The implementations tools/bench_varlen.py times side by side, each as setup(libraries, spec, inputs) -> run(),
for every (library, form) of varlen_cases.implementations: flashprefill's attention_varlen (contiguous or paged
k and v), its equal-length attention, and FlashAttention-3's flash_attn_varlen_func and flash_attn_with_kvcache
(its paged form, q varlen). The libraries are given (Libraries): flashprefill and fa3_fwd on a GPU, the numpy
stand-ins of tools/varlen_standins.py in a dry run; nothing here imports torch.

inputs (bench_varlen.make_inputs): q, k, v (bf16) and q8, k8, v8 (fp8 e4m3) in the varlen layout, FA3-style
descales qd, kd, vd (float32, (batch, heads_kv): one factor per sequence and KV head), cu_q, cu_k, used_k (int32),
max_q, max_k, lengths_q, uses_seqused, and pages[page_size] = {table, k, v, k8, v8}: the same codes in a paged cache,
with q8p, k8p, v8p and their exponents qe, ke, ve: the cache's own fp8 form (bench_varlen.page_scales); where
takes_bf16_q (bench_varlen_cases), k8r and kdr: the codes and descales of k rotated (k @ prepare.hadamard(dim_qk,
seed)), with the rotation's signs (float32 (dim_qk,)).
Every fp8 implementation gets the same codes and factors; run() returns the output, (total_q, heads_q, dim_v) bf16
((batch, seq, heads_q, dim_v) for the equal-length path). A setup raises PeerUnavailable with the reason where a
library is missing or refuses the form (setup).
"""
import dataclasses

from timing import PeerUnavailable


@dataclasses.dataclass(frozen=True)
class Libraries:
    fp: object           # flashprefill, or varlen_standins.Flashprefill
    fa3: object          # fa3_fwd_interface, varlen_standins.FlashAttention3, or None where not installed
    ops: object          # varlen_arrays.TorchOps or NumpyOps
    fa3_missing: str = ""  # why fa3 is None


def _suffix(dtype):
    """The inputs' names end in 8 for the fp8 codes."""
    return "8" if dtype == "fp8" else ""


def _codes(x, dtype):
    """q, k, v of this dtype and the descale keywords both libraries take."""
    s = _suffix(dtype)
    descales = dict(q_descale=x["qd"], k_descale=x["kd"], v_descale=x["vd"]) if dtype == "fp8" else {}
    return x["q" + s], x["k" + s], x["v" + s], descales


def flashprefill_varlen(libs, spec, x):
    """attention_varlen on contiguous k, v (seqused_k where the problem has spare rows) or on the paged cache, fp8
    with the factors every fp8 implementation takes or ("paged scales") in the cache's own form: codes and
    power-of-two descales per page (k, v) and per block of page_size tokens (q), BlockScales; "varlen bf16 q": q in
    bf16 against the rotated k's codes, the kernel rotating and rounding q (q_rotation_signs)."""
    fp, ops = libs.fp, libs.ops
    _, dtype, form, page = spec
    if not hasattr(fp, "attention_varlen"):
        raise PeerUnavailable("this flashprefill has no attention_varlen (its Python binding predates 0.10.0)")
    q, k, v, kw = _codes(x, dtype)
    cu_k = x["cu_k"]
    if form == "varlen bf16 q":  # q as bf16, rotated and rounded by the kernel, against the rotated k's codes
        q, k, kw = x["q"], x["k8r"], dict(k_descale=x["kdr"], v_descale=x["vd"], q_rotation_signs=x["signs"])
    if form in ("varlen", "varlen bf16 q"):
        if x["uses_seqused"]:
            kw.update(seqused_k=x["used_k"])
    else:
        cache = x["pages"][page]
        k, v, cu_k = cache["k" + _suffix(dtype)], cache["v" + _suffix(dtype)], None
        kw.update(seqused_k=x["used_k"], block_table=cache["table"])
        if form == "paged scales":
            q, k, v = cache["q8p"], cache["k8p"], cache["v8p"]
            kw.update({f"{n}_descale": fp.BlockScales(cache[n + "e"], page) for n in "qkv"})
    args = (q, k, v, x["cu_q"], cu_k, x["max_q"], x["max_k"])
    out = ops.empty((q.shape[0], q.shape[1], v.shape[-1]), "bf16")
    workspace = ops.empty((fp.varlen_workspace_bytes(*args, causal=True, **kw),), "uint8")

    def run(check=False):
        return fp.attention_varlen(*args, causal=True, out=out, workspace=workspace, check=check, **kw)
    run(check=True)
    return run


def flashprefill_equal(libs, spec, x):
    """attention on the batch of equal lengths as (batch, seq, heads, dim): the path varlen is measured against."""
    fp, ops = libs.fp, libs.ops
    q, k, v, kw = _codes(x, spec[1])
    batch, seq = len(x["lengths_q"]), x["max_q"]
    if x["lengths_q"] != (seq,) * batch or x["uses_seqused"]:
        raise ValueError("the equal-length path needs one length for every sequence, queries and keys")
    q, k, v = (t.reshape((batch, seq) + tuple(t.shape[1:])) for t in (q, k, v))
    out = ops.empty((batch, seq, q.shape[2], v.shape[-1]), "bf16")

    def run():
        return fp.attention(q, k, v, causal=True, out=out, **kw)
    run()
    return run


def _fa3(libs):
    if libs.fa3 is None:
        raise PeerUnavailable(f"fa3_fwd not installed ({libs.fa3_missing})")
    return libs.fa3


def fa3_varlen(libs, spec, x):
    f = _fa3(libs).flash_attn_varlen_func
    q, k, v, kw = _codes(x, spec[1])
    used = x["used_k"] if x["uses_seqused"] else None

    def run():
        return f(q, k, v, x["cu_q"], x["cu_k"], x["max_q"], x["max_k"], seqused_k=used, causal=True, **kw)
    run()
    return run


def fa3_paged(libs, spec, x):
    """flash_attn_with_kvcache on the paged cache, q varlen (cu_seqlens_q), cache_seqlens the keys seen."""
    f = _fa3(libs).flash_attn_with_kvcache
    _, dtype, _, page = spec
    q, _, _, kw = _codes(x, dtype)
    cache = x["pages"][page]
    k, v = cache["k" + _suffix(dtype)], cache["v" + _suffix(dtype)]

    def run():
        return f(q, k, v, cache_seqlens=x["used_k"], page_table=cache["table"], cu_seqlens_q=x["cu_q"],
                 max_seqlen_q=x["max_q"], causal=True, **kw)
    run()
    return run


SETUPS = {("flashprefill", "varlen"): flashprefill_varlen, ("flashprefill", "paged"): flashprefill_varlen,
          ("flashprefill", "paged scales"): flashprefill_varlen, ("flashprefill", "varlen bf16 q"): flashprefill_varlen,
          ("flashprefill", "equal"): flashprefill_equal,
          ("FA3", "varlen"): fa3_varlen, ("FA3", "paged"): fa3_paged}


def _refusals(libs, library):
    """What a library raises for a call it does not take. flashprefill: its Error (not supported, an argument the
    library or the check kernel rejects), and TypeError / ValueError from its Python side; FA3: RuntimeError. Each
    becomes PeerUnavailable with its message, so that one form's failure leaves the others' timings in the record."""
    return (libs.fp.Error, TypeError, ValueError) if library == "flashprefill" else (RuntimeError,)


def setup(libs, spec):
    """setup(inputs) -> run() of one implementation; spec: (library, dtype, form, page_size). The setup makes the
    first call (flashprefill's with check=True, the check kernel's verdict on the device arrays read back)."""
    library, _, form, _ = spec

    def make(x):
        try:
            return SETUPS[library, form](libs, spec, x)
        except _refusals(libs, library) as e:
            message = str(e).splitlines()[0] if str(e) else ""
            raise PeerUnavailable(f"{library}: {type(e).__name__}: {message}")
    return make
