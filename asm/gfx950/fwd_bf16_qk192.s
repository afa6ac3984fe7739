// fwd_bf16_qk192: causal (or full) attention forward, bf16 in and out, dim_qk 192 and dim_v 128 (DeepSeek-V2's
// prefill shape), gfx950 (MI355X): the register map of fwd_bf16.inc's kernel. Q^T and K take 12 K-steps (48
// VGPRs each, against 32 at dim 128), which fills all 256 VGPRs a wave may have at two waves per SIMD; K's dims
// 128-191 pass through LDS in rows of 128 bytes after the first 128 dims (fwd_contract.inc, fwd_tile_loop.inc).

.set kHeadDimQk, 192
.include "fwd_contract.inc"
.include "fwd_frame.inc"
.include "fwd_softmax.inc"
.include "fwd_tile_loop.inc"
.include "fwd_bf16.inc"

.if kHeadDimQk != 192
.error "the register map below is laid out for dim_qk 192"
.endif

// ---- VGPRs from 24 (0..23: fwd_contract.inc) ----------------------------------------------------------------
.set v_q, 24            // v[24:71]   B = Q^T, K-step s in v[v_q + 4 s : + 3]
.set v_k, 72            // v[72:119]  A = K, K-step s
.set v_v, 120           // v[120:151] A = V^T, dim block c and K-step u in v[v_v + 4 (2 c + u) : + 3]
.set v_s, 152           // v[152:167] S^T, then t, then p
.set v_p, 168           // v[168:175] B = P^T, K-step u in v[v_p + 4 u : + 3]
.set v_o, 176           // v[176:239] O^T, dim block c in v[v_o + 16 c : + 15]
.set v_stage, 240       // v[240:251] this lane's 16 bytes of K, of V and of K's dims 128-191 of a tile fill
.set v_fill_row, 252    // the tile row this lane fills
.set v_fill_lds, 253    // its byte offset in a tile
.set v_k_lds, 254       // LDS offset of this lane's K operand bytes in a tile: key lane % 32, dims 8 h ..
.set v_v_lds, 255       // LDS offset of this lane's 8 bytes of the transposing V^T reads in a tile (the V half)
.set v_end, 256

fwd_bf16_kernel fwd_bf16_qk192, 256, 70656
