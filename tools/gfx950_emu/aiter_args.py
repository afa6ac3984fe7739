"""Kernel-argument packing for AMD's hardware-proven gfx950 aiter kernels (the `amd-aiter` wheel's code objects),
written from the C++ argument structs the wheel's launchers fill (aiter_meta/csrc): the emulator runs them to check
its own instruction semantics against code that is known to be right on an MI355X.

Those structs are `__attribute__((packed))` and give every field a 16-byte slot: a pointer then `p2` (two unsigned
ints), a 32-bit scalar then `p3` (three). So a struct is its field list, field i at byte 16 * i, the padding zero.
The code objects' metadata notes state the same sizes (checked by the emulator at launch).
"""
import struct

SLOT_BYTES = 16

# mha_fwd.h, fmha_fwd_v3_args (fmha_v3_fwd kernels); "s_*" byte strides (the launcher multiplies element strides
# by 2, bf16), s_Ts = ts_qo * s_Seqs, s_lse_Hs in bytes of float.
FMHA_FWD_V3_FIELDS = (
    ("ptr_o", "P"), ("ptr_q", "P"), ("ptr_k", "P"), ("ptr_v", "P"), ("ptr_lse", "P"), ("scalar", "f"),
    ("s_seq_len", "I"), ("s_Seqs", "I"), ("s_Ts", "I"), ("s_Hs", "I"), ("s_Bs", "I"), ("s_gqa", "I"),
    ("s_k_Seqs", "I"), ("s_k_Hs", "I"), ("s_k_Bs", "I"), ("s_opt", "I"), ("s_lse", "I"), ("s_kv_seq_len", "I"),
    ("s_qk_head_dim", "I"), ("s_v_head_dim", "I"), ("s_q_head_num", "I"), ("s_v_Seqs", "I"), ("s_v_Hs", "I"),
    ("s_v_Bs", "I"), ("s_o_Seqs", "I"), ("s_o_Hs", "I"), ("s_o_Bs", "I"), ("ptr_qseq", "P"), ("ptr_kseq", "P"),
    ("s_lse_Hs", "I"), ("ptr_qseq_padding", "P"), ("ptr_kseq_padding", "P"),
)

# asm_mla.cu, KernelArgs (mla decode stage 1). 19 slots; the code objects declare 20 (320 bytes) and read none of
# the last: the launcher passes sizeof(KernelArgs), so pack with segment_bytes=320.
MLA_FIELDS = (
    ("ptr_R", "P"), ("ptr_LSE", "P"), ("ptr_Q", "P"), ("ptr_KV", "P"), ("ptr_LTP", "P"), ("ptr_LTD", "P"),
    ("ptr_LTL", "P"), ("scalar", "f"), ("s_MQA", "I"), ("s_kv_split", "I"), ("s_Q_Bs", "I"), ("s_Bs", "I"),
    ("s_log2_plen", "I"), ("ptr_QTP", "P"), ("ptr_STP", "P"), ("ptr_RP", "P"), ("ptr_QSCALE", "P"),
    ("ptr_KVSCALE", "P"), ("out_16_nosplit", "I"),
)


def pack_slots(fields, values: dict, segment_bytes: int = 0) -> bytes:
    """The packed struct: field i (format 'P' 64-bit pointer, 'I' uint32, 'i' int32, 'f' float) at 16 * i, every
    other byte 0, zero-padded to segment_bytes (the kernel's kernarg segment size) when that is larger. Every field
    must be given (a pointer the kernel does not use: 0)."""
    missing = [name for name, _ in fields if name not in values]
    extra = set(values) - {name for name, _ in fields}
    if missing or extra:
        raise ValueError(f"fields missing {missing}, unknown {sorted(extra)}")
    out = bytearray(max(SLOT_BYTES * len(fields), segment_bytes))
    for i, (name, fmt) in enumerate(fields):
        struct.pack_into("<Q" if fmt == "P" else "<" + fmt, out, SLOT_BYTES * i, values[name])
    return bytes(out)

# asm_mi350_a8w8_blockscale.cu, KernelArgs (fp8 block-scale GEMM C = (X W^T) with 128-wide block scales).
F8_BLOCK_SCALE_GEMM_FIELDS = (
    ("ptr_C", "P"), ("ptr_X", "P"), ("ptr_W", "P"), ("ptr_XC", "P"), ("ptr_XQ", "P"), ("ptr_WQ", "P"),
    ("ptr_tmp0", "P"), ("ptr_tmp1", "P"), ("ptr_tmp2", "P"), ("K", "I"), ("N", "I"), ("M", "I"), ("eprt_cnt", "I"),
    ("Xs", "I"), ("Ws", "I"), ("Cs", "I"), ("tmp0", "I"), ("tmp1", "I"), ("tmp2", "I"), ("tmp3", "I"),
    ("splitk", "I"), ("activation", "I"), ("ptr_tmp3", "P"),
)
