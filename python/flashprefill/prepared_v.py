"""v prepared for the Hopper fp8 kernels (FLASHPREFILL_V_LAYOUT_PREPARED, include/flashprefill.h).

FP8 P.V on Hopper reads V^T (keys along each row). From v as every tensor, (batch, seq, heads, dim), the kernel
transposes each tile itself; from a prepared v, TMA loads V^T as it stands. The rows hold the keys of each
(batch, head, dim) in the order in which P's registers hold them: key j at position
16 (j // 16) + 4 (j % 8 // 2) + 2 (j % 16 // 8) + j % 2, the row padded with zeros to a multiple of 16.
"""
import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class PreparedV:
    """e4m3 codes of v in the prepared layout; pass it to attention as v.

    data: float8_e4m3fn device array (batch, heads_kv, dim_v, positions), positions >= seqlen rounded up to 16,
    each row contiguous; seqlen: the keys (seqlen_k). Made by flashprefill.prepare_v (or quantize_qkv, whose
    v_layout is "prepared" by default on Hopper); the descale stays v's own.
    """
    data: object
    seqlen: int


def positions(seqlen):
    """The positions of a prepared row of seqlen keys: seqlen rounded up to 16."""
    return -(-seqlen // 16) * 16


def key_position(key):
    """Where key `key` (int or integer array) sits in its prepared row."""
    key = np.asarray(key)
    return 16 * (key // 16) + 4 * (key % 8 // 2) + 2 * (key % 16 // 8) + key % 2


def prepare_v_model(codes):
    """The prepared layout of e4m3 codes (numpy, any dtype of one byte), bit for bit as flashprefill_prepare_v
    writes it: (batch, seq, heads, dim) -> (batch, heads, dim, positions(seq)), positions past seq 0."""
    batch, seq, heads, dim = codes.shape
    out = np.zeros((batch, heads, dim, positions(seq)), dtype=codes.dtype)
    out[..., key_position(np.arange(seq))] = codes.transpose(0, 2, 3, 1)
    return out
