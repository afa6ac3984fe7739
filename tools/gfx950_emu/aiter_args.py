"""Kernel-argument packing for AMD's hardware-proven gfx950 aiter kernels (the `amd-aiter` wheel's code objects),
written from the C++ argument structs the wheel's launchers fill (aiter_meta/csrc): the emulator runs them to check
its own instruction semantics against code that is known to be right on an MI355X.

Those structs are `__attribute__((packed))` and give every field a 16-byte slot: a pointer then `p2` (two unsigned
ints), a 32-bit scalar then `p3` (three). So a struct is its field list, field i at byte 16 * i, the padding zero.
The code objects' metadata notes state the same sizes (checked by the emulator at launch).
"""
import dataclasses
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


# fmha_v3 forward by head dim of q: (kernel, query rows per tile, work-items per workgroup), from
# aiter_meta/hsa/gfx950/fmha_v3_fwd/codegen.py; "_causal" names the masked kernel. dim_v is 128 for both.
FMHA_FWD_V3_KERNELS = {128: ("fmha_fwd_hd128_bf16", 256, 512), 192: ("fmha_fwd_hd192_hd128_bf16", 128, 256)}
FMHA_FWD_V3_DIM_V = 128


def mangled(name: str) -> str:
    """aiter's kernel symbol for `name` (`_ZN5aiter<len><name>E`, as its launchers build it)."""
    return f"_ZN5aiter{len(name)}{name}E"


@dataclasses.dataclass(frozen=True)
class AiterLaunch:
    code_object: str  # relative to aiter_meta/hsa/gfx950/
    symbol: str
    grid: tuple       # workgroups (x, y, z)
    workitems: int    # per workgroup, along x
    kernarg: bytes


def fmha_fwd_v3_launch(pointers: dict, q_shape, k_shape, strides: dict, causal: bool, scale: float) -> AiterLaunch:
    """The launch of fmha_v3 forward bf16 on equal-length q (batch, seqlen, heads_q, dim_q), k (batch, seqlen,
    heads_kv, dim_q), v (batch, seqlen, heads_kv, 128) into out (batch, seqlen, heads_q, 128) and lse float32
    (batch, heads_q, seqlen), as the wheel's launcher builds it. pointers: {"o", "q", "k", "v", "lse"} device
    addresses; strides: {"o", "q", "k", "v"}: (seq, head, batch) in elements. KeyError for a dim_q without a kernel."""
    name, tile_rows, workitems = FMHA_FWD_V3_KERNELS[q_shape[3]]
    name += "_causal" if causal else ""
    args, grid = _fmha_fwd_v3_args(pointers, q_shape, k_shape, strides, causal, scale, tile_rows, input_bytes=2)
    return AiterLaunch(f"fmha_v3_fwd/fwd_{name.removeprefix('fmha_fwd_')}.co", mangled(name), grid, workitems,
                       pack_slots(FMHA_FWD_V3_FIELDS, args))


# fmha_v3 forward fp8 (fp8 q, k, v; bf16 out), hd128 only: in AMD's aiter repository (hsa/gfx950/fmha_v3_fwd/, from
# commit e4048607a5 on), not in the wheel. Its mha_fwd.h appends the descales to fmha_fwd_v3_args (41 slots, 656
# bytes); the kernels load one float from each descale pointer and never read the six strides, so a descale is per
# tensor whatever the launcher is given. Symbols as fmha_fwd.csv lists them (their length prefix is one short of
# the name, so not mangled()); 256 query rows per tile as bf16, 128 keys per KV tile.
FMHA_FWD_V3_FP8_FIELDS = FMHA_FWD_V3_FIELDS + (
    ("ptr_q_descale", "P"), ("ptr_k_descale", "P"), ("ptr_v_descale", "P"), ("s_descale_q_Bs", "I"),
    ("s_descale_q_Hs", "I"), ("s_descale_k_Bs", "I"), ("s_descale_k_Hs", "I"), ("s_descale_v_Bs", "I"),
    ("s_descale_v_Hs", "I"),
)
FMHA_FWD_V3_FP8 = {False: ("fwd_hd128_fp8.co", "_ZN5aiter24fmha_fwd_hd128_fp8_gfx950E"),
                   True: ("fwd_hd128_fp8_causal.co", "_ZN5aiter31fmha_fwd_hd128_fp8_causal_gfx950E")}


def fmha_fwd_v3_fp8_launch(pointers: dict, q_shape, k_shape, strides: dict, causal: bool,
                           scale: float) -> AiterLaunch:
    """As fmha_fwd_v3_launch, for the fp8 kernels (dim_q 128): pointers add {"q_descale", "k_descale", "v_descale"},
    one float32 each; code_object is the file name within the folder that holds AMD's fp8 objects."""
    if q_shape[3] != 128:
        raise KeyError(f"fmha_v3 forward fp8 has no kernel for dim_q {q_shape[3]}")
    _, tile_rows, workitems = FMHA_FWD_V3_KERNELS[128]
    args, grid = _fmha_fwd_v3_args(pointers, q_shape, k_shape, strides, causal, scale, tile_rows, input_bytes=1)
    args.update({f"ptr_{n}_descale": pointers[f"{n}_descale"] for n in "qkv"})
    args.update({f"s_descale_{n}_{d}": 0 for n in "qkv" for d in ("Bs", "Hs")})
    code_object, symbol = FMHA_FWD_V3_FP8[causal]
    return AiterLaunch(code_object, symbol, grid, workitems, pack_slots(FMHA_FWD_V3_FP8_FIELDS, args))


def _fmha_fwd_v3_args(pointers, q_shape, k_shape, strides, causal, scale, tile_rows, input_bytes):
    """(the fields of FMHA_FWD_V3_FIELDS, grid) as the launcher sets them: q, k, v strides in bytes of the input
    type, out's in bytes of bf16."""
    batch, seqlen, heads_q, dim_q = q_shape
    heads_kv = k_shape[2]
    (q_seq, q_head, q_batch), (k_seq, k_head, k_batch), (v_seq, v_head, v_batch) = (
        [s * input_bytes for s in strides[x]] for x in "qkv")
    o_seq, o_head, o_batch = (s * 2 for s in strides["o"])
    args = dict(
        ptr_o=pointers["o"], ptr_q=pointers["q"], ptr_k=pointers["k"], ptr_v=pointers["v"], ptr_lse=pointers["lse"],
        scalar=scale, s_seq_len=seqlen, s_Seqs=q_seq, s_Ts=tile_rows * q_seq, s_Hs=q_head, s_Bs=q_batch,
        s_gqa=heads_q // heads_kv, s_k_Seqs=k_seq, s_k_Hs=k_head, s_k_Bs=k_batch,
        s_opt=5 if heads_q % 8 == 0 else 3, s_lse=1, s_kv_seq_len=seqlen, s_qk_head_dim=dim_q,
        s_v_head_dim=FMHA_FWD_V3_DIM_V, s_q_head_num=heads_q, s_v_Seqs=v_seq, s_v_Hs=v_head, s_v_Bs=v_batch,
        s_o_Seqs=o_seq, s_o_Hs=o_head, s_o_Bs=o_batch, ptr_qseq=0, ptr_kseq=0, s_lse_Hs=seqlen * 4,
        ptr_qseq_padding=0, ptr_kseq_padding=0)
    tiles_per_workgroup = 2 if causal else 1  # codegen.py's tg_div: causal pairs a short and a long tile
    grid = ((-(-seqlen // tile_rows) + tiles_per_workgroup - 1) // tiles_per_workgroup, heads_q, batch)
    return args, grid
