"""Preparing q, k, v for the fp8 kernels: exact accuracy levers, then quantization (DESIGN.md, "Where FP8 error
comes from": the error is won on the inputs, not in the kernel).

  * Rotation: (q H)(k H)^T = q k^T for an orthonormal H. A random-sign Hadamard spreads outlier channels over
    all channels before rounding to e4m3 (float64 emulation: 3.5e-1 -> 9.5e-2 relative L2 on inputs with
    outlier channels). For a head dim that is not a power of two, H is block diagonal (e.g. 192 = 128 + 64).
  * K smoothing: softmax is unchanged when every key of a head loses the same vector (it shifts each query's
    scores by a constant), so K minus its mean over tokens, per (batch, head), rounds with a smaller range.
Both are exact in real arithmetic; only the rounding to e4m3 afterwards loses anything.
"""
import numpy as np

from . import fp8


def hadamard(dim, seed=0):
    """float64 (dim, dim) orthonormal random-sign Hadamard: diag(signs) times block-diagonal Sylvester
    Hadamard matrices over the binary decomposition of dim (largest block first), each scaled by 1/sqrt(n)."""
    if dim <= 0:
        raise ValueError(f"dim must be > 0, got {dim}")
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], dim)
    h = np.zeros((dim, dim))
    start = 0
    for bit in reversed(range(dim.bit_length())):
        n = 1 << bit
        if dim - start < n:
            continue
        block = np.ones((1, 1))
        while block.shape[0] < n:
            block = np.block([[block, block], [block, -block]])
        h[start:start + n, start:start + n] = block / np.sqrt(n)
        start += n
    return signs[:, None] * h


def quantize_qkv(q, k, v, *, rotate=True, smooth_k=False, per_block=None, seed=0):
    """fp8 q, k, v and their descales for `attention`, from float arrays (batch, seq, heads, dim) (numpy or
    CuPy; the same arithmetic on either).

    rotate: multiply q and k by the same random-sign Hadamard (`seed` picks the signs) before quantizing.
    smooth_k: subtract from k its mean over tokens, per (batch, head).
    per_block: None for FlashAttention-3-style factors, one per (batch, kv head), q's shared by the query heads
        of a group (what every kernel takes); or a token count for per-block power-of-two scales
        (fp8.quantize_blocks; kernels that take them: gfx950 fp8).
    Returns a dict: q, k, v uint8 e4m3 codes of the inputs' shapes, and q_descale, k_descale, v_descale: float32
    (batch, heads_kv) factors, or (exponents, block_tokens) pairs for BlockScales.
    """
    xp = fp8.array_module(q)
    heads_kv = k.shape[2]
    q64, k64, v64 = (xp.asarray(x, dtype=xp.float64) for x in (q, k, v))
    if smooth_k:
        k64 = k64 - k64.mean(axis=1, keepdims=True)
    if rotate:
        h = xp.asarray(hadamard(q.shape[-1], seed))
        q64, k64 = q64 @ h, k64 @ h
    out = {}
    for name, x in (("q", q64), ("k", k64), ("v", v64)):
        if per_block is None:
            batch, seq, heads, dim = x.shape
            codes, descale = fp8.quantize_per_head(x.reshape(batch, seq, heads_kv, heads // heads_kv * dim))
            out[name], out[f"{name}_descale"] = codes.reshape(x.shape), descale
        else:
            codes, exponents = fp8.quantize_blocks(x, per_block)
            out[name], out[f"{name}_descale"] = codes, (exponents, per_block)
    return out
