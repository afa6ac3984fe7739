"""Preparing q, k, v for the fp8 kernels: exact accuracy levers, then quantization (docs/numerics.md, "Where fp8
error comes from": the error is won on the inputs, not in the kernel).

  * Rotation: (q H)(k H)^T = q k^T for an orthonormal H. A random-sign Hadamard spreads outlier channels over
    all channels before rounding to e4m3 (float64 emulation: 3.5e-1 -> 9.5e-2 relative L2 on inputs with
    outlier channels). For a head dim that is not a power of two, H is block diagonal (e.g. 192 = 128 + 64).
  * K smoothing: softmax is unchanged when every key of a head loses the same vector (it shifts each query's
    scores by a constant), so K minus its mean over tokens, per (batch, head), rounds with a smaller range.
Both are exact in real arithmetic; only the rounding to e4m3 afterwards loses anything.
"""
import numpy as np

from . import fp8


def _parts(dim):
    """The power-of-two blocks of the block-diagonal Hadamard: dim's binary decomposition, largest first."""
    return [1 << bit for bit in reversed(range(dim.bit_length())) if dim >> bit & 1]


def rotation_signs(dim, seed=0):
    """float32 (dim,) random signs (+1 / -1) of the rotation; `seed` picks them."""
    if dim <= 0:
        raise ValueError(f"dim must be > 0, got {dim}")
    return np.random.default_rng(seed).choice([-1.0, 1.0], dim).astype(np.float32)


def hadamard(dim, seed=0):
    """float64 (dim, dim) orthonormal random-sign Hadamard: diag(signs) times block-diagonal Sylvester
    Hadamard matrices over the binary decomposition of dim (largest block first), each scaled by 1/sqrt(n).
    transform(x, rotation_signs(dim, seed)) equals x @ hadamard(dim, seed) up to rounding."""
    signs = rotation_signs(dim, seed).astype(np.float64)
    h = np.zeros((dim, dim))
    start = 0
    for n in _parts(dim):
        block = np.ones((1, 1))
        while block.shape[0] < n:
            block = np.block([[block, block], [block, -block]])
        h[start:start + n, start:start + n] = block / np.sqrt(n)
        start += n
    return signs[:, None] * h


def _fwht(x):
    """Unnormalised Sylvester Hadamard transform over the last axis (a power of two long): butterflies
    (x_i, x_{i+h}) -> (x_i + x_{i+h}, x_i - x_{i+h}) for h = 1, 2, 4, ..., the GPU quantizer's order."""
    xp = fp8.array_module(x)
    n, h = x.shape[-1], 1
    while h < n:
        pairs = x.reshape(*x.shape[:-1], n // (2 * h), 2, h)
        x = xp.stack((pairs[..., 0, :] + pairs[..., 1, :], pairs[..., 0, :] - pairs[..., 1, :]),
                     axis=-2).reshape(x.shape)
        h *= 2
    return x


def transform(x, signs=None, subtract=None):
    """The GPU quantizer's transform, bit for bit: float32 y = H diag(signs) (x - subtract[b, h]) per token row,
    each step skipped when its argument is None.

    x: float (batch, seq, heads, dim), numpy or CuPy, rounded to float32 first (exact for bf16 and float32);
    signs: (dim,) of +1 / -1 (rotation_signs); subtract: float32 (batch, heads, dim) (key_mean). H: per
    power-of-two part of dim, largest first, _fwht in float32, then times float32(1/sqrt(n)). The float32
    rounding of the butterflies (a relative 2^-24 per step) is far below e4m3's 2^-4.
    """
    xp = fp8.array_module(x)
    y = xp.asarray(x, dtype=xp.float32)
    if subtract is not None:
        y = y - xp.asarray(subtract, dtype=xp.float32)[:, None]
    if signs is None:
        return y
    y = y * xp.asarray(signs, dtype=xp.float32)
    parts, start = [], 0
    for n in _parts(x.shape[-1]):
        parts.append(_fwht(y[..., start:start + n]) * xp.float32(1.0 / np.sqrt(n)))
        start += n
    return xp.concatenate(parts, axis=-1)


def transform_varlen(x, cu_seqlens, signs=None, subtract=None):
    """transform of a packed (varlen) batch, bit for bit as flashprefill_quantize with cu_seqlens: x float (total,
    heads, dim); cu_seqlens host ints (batch + 1); subtract float32 (batch, heads, dim), sequence b's from its rows
    (rows outside every valid sequence, fp8.varlen_bounds, are transformed without it). float32 (total, heads, dim)."""
    xp = fp8.array_module(x)
    y = xp.asarray(x, dtype=xp.float32)
    if subtract is not None:
        rows = xp.zeros(y.shape, xp.float32)  # x - 0 is x exactly
        subtract = xp.asarray(subtract, dtype=xp.float32)
        for b, bound in enumerate(fp8.varlen_bounds(cu_seqlens, y.shape[0], y.shape[0])):
            if bound is not None:
                rows[bound[0]:bound[1]] = subtract[b]
        y = y - rows
    return transform(y[None], signs)[0]


def key_mean(k):
    """float32 (batch, heads, dim): k's mean over tokens (computed in float64), what K smoothing subtracts."""
    xp = fp8.array_module(k)
    return xp.asarray(k, dtype=xp.float64).mean(axis=1).astype(xp.float32)


def quantize_qkv(q, k, v, *, rotate=True, smooth_k=False, per_block=None, seed=0, q_code_max=fp8.E4M3_MAX):
    """fp8 q, k, v and their descales for `attention`, from float arrays (batch, seq, heads, dim) (numpy or
    CuPy; the same arithmetic on either).

    rotate: transform q and k with the same rotation_signs(dim, seed) before quantizing.
    smooth_k: subtract from k its mean over tokens (key_mean), per (batch, head).
    per_block: None for FlashAttention-3-style factors, one per (batch, kv head), q's shared by the query heads
        of a group (what every kernel takes); or a token count for per-block power-of-two scales
        (fp8.quantize_blocks; what flashprefill_quantize computes on the GPU).
    q_code_max: the largest magnitude of q's codes, an e4m3 value (policy.query(backend, dim_qk, dim_v,
        scores="fp16").q_code_max lets the Hopper kernels take float16 scores).
    Returns a dict: q, k, v uint8 e4m3 codes of the inputs' shapes, and q_descale, k_descale, v_descale: float32
    (batch, heads_kv) factors, or (exponents, block_tokens) pairs for BlockScales.
    """
    xp = fp8.array_module(q)
    heads_kv = k.shape[2]
    signs = xp.asarray(rotation_signs(q.shape[-1], seed)) if rotate else None
    transformed = {"q": transform(q, signs), "k": transform(k, signs, key_mean(k) if smooth_k else None),
                   "v": transform(v)}
    out = {}
    for name, x in transformed.items():
        code_max = q_code_max if name == "q" else fp8.E4M3_MAX
        if per_block is None:
            batch, seq, heads, dim = x.shape
            codes, descale = fp8.quantize_per_head(x.reshape(batch, seq, heads_kv, heads // heads_kv * dim), code_max)
            out[name], out[f"{name}_descale"] = codes.reshape(x.shape), descale
        else:
            codes, exponents = fp8.quantize_blocks(x, per_block, code_max)
            out[name], out[f"{name}_descale"] = codes, (exponents, per_block)
    return out
