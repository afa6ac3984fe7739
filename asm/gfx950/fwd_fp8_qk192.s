// fwd_fp8_qk192: causal (or full) attention forward, fp8 e4m3 (OCP) in, bf16 out, dim_qk 192 and dim_v 128
// (DeepSeek-V2's prefill shape), gfx950: the register map of fwd_fp8.inc's kernel. Q^T takes 3 K-steps (24 VGPRs)
// and K 2 x 3 (48); the 24 VGPRs of fwd_fp8_hd128's row-sum MFMA (its ones and its result) pay for them, so P's
// row sums are decoded on the VALU; K's dims 128-191 pass through LDS in rows of 64 bytes after the first 128 dims
// (fwd_contract.inc, fwd_tile_loop.inc).

.set kHeadDimQk, 192
.set kRowSumsByMfma, 0
.set kQFromBf16, 0      // q in e4m3 only (the Hopper kernels too round a bf16 q at dim_qk 128 only)
.include "fwd_contract.inc"
.include "fwd_frame.inc"
.include "fwd_softmax.inc"
.include "fwd_tile_loop.inc"
.include "fwd_fp8.inc"

.if kHeadDimQk != 192
.error "the register map below is laid out for dim_qk 192"
.endif

// ---- VGPRs from 24 (0..23: fwd_contract.inc) ----------------------------------------------------------------
.set v_q, 24            // v[24:47]   B = Q^T, K-step s in v[v_q + 8 s : + 7]
.set v_k, 48            // v[48:95]   A = K, S tile T and K-step s in v[v_k + 24 T + 8 s : + 7]
.set v_v, 96            // v[96:127]  A = V^T, dim block c in v[v_v + 8 c : + 7]
.set v_s, 128           // v[128:159] S^T, S tile T in v[v_s + 16 T : + 15]
.set v_p, 160           // v[160:167] B = P^T codes (and epilogue scratch)
.set v_o, 168           // v[168:231] O^T, dim block c in v[v_o + 16 c : + 15]
.set v_stage, 232       // v[232:243] this lane's 16 bytes of K, of V and of K's dims 128-191 of a tile fill
.set v_row_constant, 244
.set v_vscale, 245      // E8M0 scale of V^T in the P.V MFMA: 127 + this tile's V exponent (127: none)
.set v_one_e8m0, 246    // 127: the E8M0 scale 1.0 of P^T
.set v_fill_row, 247    // the tile row this lane fills
.set v_fill_lds, 248    // its byte offset in a tile
.set v_k_lds, 249       // LDS offset of this lane's K operand bytes in a tile: key lane % 32, byte 16 h
.set v_v_lds, 250       // LDS offset of this lane's 8 bytes of the transposing V^T reads in a tile (the V half)
.set v_fill_v, 251      // the LDS offset in a tile of this lane's 16 bytes of V in a fill (keys swapped)
.set v_fill_tail, 252   // ... and of K's dims 128-191
.set v_end, 253

fwd_fp8_kernel fwd_fp8_qk192, 253, 73728
