"""The problem both kernels' bit-exact probability-code tests run (tests/test_kernel_gpu.py on Hopper,
tests/test_gfx950_kernel_emulated.py on gfx950), and how they read the codes back.

One KV tile of `seq` keys, q and k zero but for their first channel, so every score is one exact e4m3 product
(the matrix cores add only zeros to it); v is the identity, so out[i, j] = P[i, j] / rowsum_i. Each code is read
back as the e4m3 value nearest out[i, j] times the model's row sum: neighbouring codes differ by at least 1/16
of their value, bf16 rounds by at most 1/512. Scores span 40 binades below the row max, so every code from 120
(the row max) through the subnormals 1-7 down to 0 occurs."""
import numpy as np

from flashprefill import fp8


def inputs(rng, seq, heads, dim_qk=128, q_max=16):
    """uint8 e4m3 codes q, k (1, seq, heads, dim_qk) and v (1, seq, heads, 128); q's magnitudes at most q_max (1.125
    keeps every score of hd128 within float16 scores' bound, flashprefill.h)."""
    magnitude = np.abs(fp8.e4m3_decode(np.arange(256, dtype=np.uint8)))
    finite = lambda top: np.flatnonzero((magnitude >= 2.0**-3) & (magnitude <= top)).astype(np.uint8)  # no NaN
    q_codes = np.zeros((1, seq, heads, dim_qk), np.uint8)
    k_codes = np.zeros((1, seq, heads, dim_qk), np.uint8)
    q_codes[..., 0] = rng.choice(finite(q_max), (1, seq, heads))
    k_codes[..., 0] = rng.choice(finite(16), (1, seq, heads))
    v_codes = np.zeros((1, seq, heads, 128), np.uint8)
    v_codes[0, np.arange(seq), :, np.arange(seq)] = 0x38  # 1.0
    return q_codes, k_codes, v_codes


def check(out, q_codes, k_codes, causal, scale_log2, seed, encoder="f16"):
    """Asserts that the kernel's output (1, seq, heads, >= seq), float, shows fp8.expfree_codes' codes (encoder as
    there) bit for bit. scale_log2 as the kernel holds it (float32); the model's row max is f32(max s) * scale_log2,
    the same as the max of the products since rounding is monotonic. Every score is one product of two e4m3
    values, exact in float16 as in float32."""
    seq = q_codes.shape[1]
    qv, kv = (fp8.e4m3_decode(c[0, :, :, 0]).astype(np.float32) for c in (q_codes, k_codes))
    s = (qv.T[:, :, None] * kv.T[:, None, :]).astype(np.float32)  # (heads, query, key), exact
    if causal:
        s = np.where(np.arange(seq)[None, :] <= np.arange(seq)[:, None], s, np.float32(-np.inf))
    row_max = s.max(axis=-1) * np.float32(scale_log2)
    codes, row_sum = fp8.expfree_probabilities(s, scale_log2, row_max, encoder=encoder)
    assert {0, 120} <= set(np.unique(codes).tolist()) and np.any((codes > 0) & (codes < 8)), "codes not covered"
    code_sum = row_sum * 2.0**8  # row_sum is of the probabilities; a code decodes to 2^8 times its probability
    p_kernel = np.asarray(out, np.float64)[0, :, :, :seq].transpose(1, 0, 2) * code_sum[..., None]
    read_back = fp8.e4m3_encode(p_kernel.astype(np.float32))
    mismatch = read_back != codes
    assert not mismatch.any(), (f"seed {seed}: {mismatch.sum()} of {codes.size} codes differ, e.g. (head, query, "
                                f"key) {np.argwhere(mismatch)[:4].tolist()}: kernel {read_back[mismatch][:4]} "
                                f"model {codes[mismatch][:4]}")
