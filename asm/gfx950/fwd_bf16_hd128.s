// fwd_bf16_hd128: causal (or full) attention forward, bf16 in and out, head dim 128, gfx950 (MI355X): the register
// map of fwd_bf16.inc's kernel at dim_qk = dim_v = 128.

.include "fwd_contract.inc"
.include "fwd_frame.inc"
.include "fwd_softmax.inc"
.include "fwd_tile_loop.inc"
.include "fwd_bf16.inc"

.if kHeadDimQk != 128
.error "the register map below is laid out for dim_qk 128"
.endif

// ---- VGPRs from 24 (0..23: fwd_contract.inc) ----------------------------------------------------------------
.set v_q, 24            // v[24:55]  B = Q^T, K-step s in v[v_q + 4 s : + 3]
.set v_k, 56            // v[56:87]  A = K, K-step s
.set v_v, 88            // v[88:119] A = V^T, dim block c and K-step u in v[v_v + 4 (2 c + u) : + 3]
.set v_s, 120           // v[120:135] S^T, then t, then p
.set v_p, 136           // v[136:143] B = P^T, K-step u in v[v_p + 4 u : + 3]
.set v_o, 144           // v[144:207] O^T, dim block c in v[v_o + 16 c : + 15]
.set v_stage, 208       // v[208:215] this lane's 16 bytes of K and of V of a tile fill in flight
.set v_fill_row, 216    // the tile row this lane fills
.set v_fill_lds, 217    // its byte offset in a tile
.set v_k_lds, 218       // LDS offset of this lane's K operand bytes in a tile: key lane % 32, dims 8 h ..
.set v_v_lds, 219       // LDS offset of this lane's 8 bytes of the transposing V^T reads in a tile (the V half)
.set v_end, 220

fwd_bf16_kernel fwd_bf16_hd128, 220, 56832
