// fwd_fp8_hd128: causal (or full) attention forward, fp8 e4m3 (OCP) in, bf16 out, head dim 128, gfx950: the
// register map of fwd_fp8.inc's kernel, with P's row sums by an MFMA of ones; q in e4m3, or in bf16 rounded by the
// kernel (fwd_q_from_bf16.inc) in its setup, in registers the tile loop has not yet taken.

.set kRowSumsByMfma, 1
.set kQFromBf16, 1
.include "fwd_contract.inc"
.include "fwd_frame.inc"
.include "fwd_softmax.inc"
.include "fwd_tile_loop.inc"
.include "fwd_fp8.inc"

.if kHeadDimQk != 128
.error "the register map below is laid out for dim_qk 128"
.endif

// ---- VGPRs from 24 (0..23: fwd_contract.inc) ----------------------------------------------------------------
.set v_q, 24            // v[24:39]   B = Q^T, K-step s in v[v_q + 8 s : + 7]
.set v_k, 40            // v[40:71]   A = K, S tile T and K-step s in v[v_k + 16 T + 8 s : + 7]
.set v_v, 72            // v[72:103]  A = V^T, dim block c in v[v_v + 8 c : + 7]
.set v_s, 104           // v[104:135] S^T, S tile T in v[v_s + 16 T : + 15]
.set v_p, 136           // v[136:143] B = P^T codes (and epilogue scratch)
.set v_o, 144           // v[144:207] O^T, dim block c in v[v_o + 16 c : + 15]
.set v_stage, 216       // v[216:223] this lane's 16 bytes of K and of V of a tile fill in flight
.set v_row_constant, 224
.set v_vscale, 225      // E8M0 scale of V^T in the P.V MFMA: 127 + this tile's V exponent (127: none)
.set v_one_e8m0, 226    // 127: the E8M0 scale 1.0 of P^T
.set v_fill_row, 227    // the tile row this lane fills
.set v_fill_lds, 228    // its byte offset in a tile
.set v_k_lds, 229       // LDS offset of this lane's K operand bytes in a tile: key lane % 32, byte 16 h
.set v_v_lds, 230       // LDS offset of this lane's 8 bytes of the transposing V^T reads in a tile (the V half)
.set v_fill_v, 231      // the LDS offset in a tile of this lane's 16 bytes of V in a fill (keys swapped)
.set v_ones, 232        // v[232:239] A = 32 x 64 e4m3 ones, for the row sums of P
.set v_sum, 240         // v[240:255] D = the last P's row sums (every register: this lane's query's sum)
.set v_end, 256
// setup only, a bf16 q's (fwd_q_from_bf16.inc): S's and P's registers past tile 1's fill (v_s .. v_s + 7), O's,
// K's and V's
.set v_q_bf16, v_s + 8  // v[112:143] this lane's 64 bf16 of its query
.set v_q_y, v_o         // v[144:207] its 64 float32, rotated
.set v_q_z, v_k         // v[40:103]  the signs, then the butterflies' other array
.if v_p != v_s + 32 || v_v != v_k + 32
.error "v_q_bf16 and v_q_z span two regions each"
.endif
.include "fwd_q_from_bf16.inc"


fwd_fp8_kernel fwd_fp8_hd128, 256, 58368
