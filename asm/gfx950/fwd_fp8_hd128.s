// fwd_fp8_hd128: causal (or full) attention forward, fp8 e4m3 (OCP) in, bf16 out, head dim 128, gfx950.
//
// As fwd_bf16_hd128: 8 waves of 32 query rows of one head, in two ping-pong groups sharing the K and V tiles
// through LDS, with the full-rate v_mfma_f32_32x32x64_f8f6f4 (e4m3 A and B). Per loop iteration a KV tile
// of 64 keys (two S^T tiles of 32, since P.V contracts over 64 keys):
//   S^T_T = K_T Q^T                  2 MFMAs per tile T, A = K (32 keys x 64 dims), B = Q^T (64 dims x queries)
//   masked to -inf where key > limit(query); m_new = max(m, max_keys S * scale)
//   P codes = the e4m3 code of 2^(S * scale - m_new + 8), exp-free: one FMA computes
//             y = (8 (S * scale - m_new) + 120 - 0.34) 2^-24, v_cvt_pk_f16_f32 with clamp rounds two y to
//             float16 subnormals whose bits are the codes (negative ones 0), and a byte permute packs four
//             codes per register (the numerics of the Hopper kernel, cuda/expfree.cuh; numpy model
//             flashprefill.fp8.expfree_codes(encoder="f16"))
//   l = (l + l_prev) 2^(m - m_new); O^T *= 2^(m - m_new)
//   O^T += V^T P^T                   4 MFMAs, A = V^T (32 dims x 64 keys), B = P^T (64 keys x queries)
//   l_prev = 1 P^T                   1 MFMA, A = e4m3 ones (32 x 64 keys): every row of D is the sum over the
//                                    tile's keys of the codes P.V multiplied by, for each query (the next
//                                    softmax adds it, as the Hopper kernel's row sums come from P.V's wgmma)
// then O = O^T * v_descale / l (rows < seqlen_q), lse = ln 2 (m - 8 + log2 l). scale = softmax_scale log2(e)
// q_descale k_descale: the fp8 descales (per tensor or per (batch, kv head)) fold into it.
//
// MFMA v_mfma_f32_32x32x64_f8f6f4 layouts (lane L, h = L / 32; element j of a lane's 32 bytes, 8 VGPRs):
//   A[i][k]: i = L % 32, k = 32 (j / 16) + 16 h + j % 16     B[k][n]: n = L % 32, likewise
//   D[i][n]: n = L % 32, i = 8 (r / 4) + 4 h + r % 4 for accumulator register r = 0..15
// After the two S^T tiles a lane holds query L % 32 and keys 32 T + 8 (r / 4) + 4 h + r % 4. P^T enters
// the next MFMA's B as it lies: element j = register j % 16 of tile j / 16, so the contraction index
// (h, j) names key 32 (j / 16) + 8 ((j % 16) / 4) + 4 h + j % 4 — four consecutive keys per VGPR — and
// the V^T operand is gathered in that same order.
//
// Contract: fwd_contract.inc (arguments, grid, entry registers, no LDS); registers below.

.include "fwd_contract.inc"
.include "fwd_frame.inc"
.include "fwd_softmax.inc"
.include "fwd_tile_loop.inc"

.set kTileKeys, 64      // keys per loop iteration: the K of the P.V MFMA
.set kRowBytes, 128     // one K or V row in LDS: 128 e4m3
.set kRowChunksLog2, 3  // 8 16-byte chunks per row
.set kTileKeysLog2, 6
.set kPOffsetLog2, 8    // p' = 2^(t - m + 8): the row max lands on code 0x78 (256)
.set kCodeScaleBits, 0x35000000     // 2^-21: 8 code steps per unit of log2, one code step being 2^-24
.set kRowBaseBits, 0x36ef51ec       // float32(56 - 0.34 + 8 * kPOffsetLog2) * 2^-24
.set kMinusEightBits, 0xb5000000    // -8 * 2^-24
.set kCodeBytes, 0x06040200         // v_perm_b32: bytes 0 and 2 of S1, then of S0 (the low bytes of four halves)
.set kE4m3OnesX4, 0x38383838        // four e4m3 codes of 1.0
.if kHeadDimQk != 128 || kHeadDimV != 128 || kBlockQ != 32 || kBlockKey != 32 || kPOffsetLog2 != 8
.error "the register map and constants below are laid out for head dim 128, 32 x 32 tiles, offset 8"
.endif

// ---- SGPRs that fwd_contract.inc leaves free: 77, 90-95, 98 ---------------------------------------------------
.set s_scale_qk, 77     // softmax_scale * log2(e) * q_descale * k_descale (of this tile's key block)
.set s_scale8, 90       // 8 * s_scale_qk * 2^-24 (the code multiplier)
.set s_q_factor, 91     // q descale: a factor, or 2^exponent of this wave's query block
.set s_k_factor, 92     // k descale: a factor, or 2^exponent of this tile's key block
.set s_scale_q, 93      // softmax_scale * log2(e) * q descale
.set s_exp_block, 94    // a per-block scale's block index
.set s_heads_kv, 95
.set s_code_bytes, 98   // kCodeBytes

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
.set v_ones, 232        // v[232:239] A = 32 x 64 e4m3 ones, for the row sums of P
.set v_sum, 240         // v[240:255] D = the last P's row sums (every register: this lane's query's sum)
.set v_end, 256

// s[dst] = the int8 exponent (sign-extended) at exponents[(batch * s[heads] + s[head]) * s[blocks] + s[block]].
.macro load_exponent dst, exponents, heads, head, blocks
    s_mul_i32 s[s_t0], s[s_batch], s[\heads]
    s_add_u32 s[s_t0], s[s_t0], s[\head]
    s_mul_i32 s[s_t0], s[s_t0], s[\blocks]
    s_add_u32 s[s_t0], s[s_t0], s[s_exp_block]
    copy_address v_addr, \exponents
    v_mov_b32 v[v_t0], s[s_t0]
    add_address v_addr, v_t0
    global_load_sbyte v[v_t0], v[v_addr:v_addr + 1], off
    s_waitcnt vmcnt(0)
    v_readfirstlane_b32 s[\dst], v[v_t0]
.endm

// s[dst] = 2^e as a float from the exponent in s[dst], for e in [-126, 127]. e = -127 (the quantizer's floor,
// for blocks of float32 subnormals) gives 0 instead of 2^-127: such a q or k block's scores are under 2^-100
// either way, and exp of them is 1 in float32.
.macro exponent_to_factor dst
    s_add_i32 s[\dst], s[\dst], 127
    s_lshl_b32 s[\dst], s[\dst], 23
.endm

// Branches to `label` when the tensor has no per-block exponents (address 0).
.macro if_exponents exponents, label
    s_or_b32 s[s_t0], s[\exponents], s[\exponents + 1]
    s_cmp_eq_u32 s[s_t0], 0
    s_cbranch_scc1 \label
.endm

// ---- the work of one KV tile, in pieces the loop orders for the ping-pong (fwd_tile_loop.inc) ---------------

// This tile's key block (64 keys lie in one block): the k factor, scale_qk and scale8 for its softmax, and
// the E8M0 scale of its V for its P.V
.macro tile_scales
    if_exponents s_k_exponents, .Lk_factor_done\@
    udiv s_exp_block, s_key0, s_k_block_tokens
    load_exponent s_k_factor, s_k_exponents, s_heads_kv, s_head_kv, s_k_blocks
    exponent_to_factor s_k_factor
.Lk_factor_done\@:
    v_mov_b32 v[v_t0], s[s_scale_q]
    v_mul_f32 v[v_t0], s[s_k_factor], v[v_t0]
    v_readfirstlane_b32 s[s_scale_qk], v[v_t0]
    v_mul_f32 v[v_t0], kCodeScaleBits, v[v_t0]
    v_readfirstlane_b32 s[s_scale8], v[v_t0]
    if_exponents s_v_exponents, .Lv_scale_done\@
    udiv s_exp_block, s_key0, s_v_block_tokens
    load_exponent s_t2, s_v_exponents, s_heads_kv, s_head_kv, s_v_blocks
    s_add_i32 s[s_t2], s[s_t2], 127
    v_mov_b32 v[v_vscale], s[s_t2]
.Lv_scale_done\@:
.endm

// A = K of tile n from its LDS buffer, S tiles T = 0, 1: lane (key 32 T + lane % 32), bytes 16 h + 32 i
.macro read_k
    v_add_u32 v[v_t0], s[s_buf], v[v_k_lds]
    .set T_, 0
    .rept 2
    .set i_, 0
    .rept 4
    ds_read_b128 v[v_k + 16 * T_ + 4 * i_:v_k + 16 * T_ + 4 * i_ + 3], v[v_t0] offset:kRowBytes * 32 * T_ + 32 * i_
    .set i_, i_ + 1
    .endr
    .set T_, T_ + 1
    .endr
    s_waitcnt lgkmcnt(0)
.endm

// A = V^T of tile n from its LDS buffer: VGPR w = 4 T + g of dim block c holds keys 32 T + 8 g + 4 h + e,
// e = 0..3, at dim 32 c + lane % 32. ds_read_b64_tr_b8 gives each lane of a 16-lane group one column (its
// dim) of the 8 x 16 byte tile its lanes address, row r read by lanes 2 r (bytes 0-7) and 2 r + 1 (8-15):
// rows r = 0..7 are keys 32 T + 8 g + 4 h + {0, 1, 2, 3, 8, 9, 10, 11}, i.e. VGPRs w and w + 1 (g even).
.macro read_v
    v_add_u32 v[v_t0], s[s_buf], v[v_v_lds]
    .set c_, 0
    .rept kHeadDimV / 32
    .set w_, 0
    .rept 4
    ds_read_b64_tr_b8 v[v_v + 8 * c_ + 2 * w_:v_v + 8 * c_ + 2 * w_ + 1], v[v_t0] offset:kRowBytes * (32 * (w_ / 2) + 16 * (w_ % 2)) + 32 * c_
    .set w_, w_ + 1
    .endr
    .set c_, c_ + 1
    .endr
    s_waitcnt lgkmcnt(0)
.endm

// S^T_T = K_T Q^T
.macro mma_s
    .set T_, 0
    .rept 2
    v_mfma_f32_32x32x64_f8f6f4 v[v_s + 16 * T_:v_s + 16 * T_ + 15], v[v_k + 16 * T_:v_k + 16 * T_ + 7], v[v_q:v_q + 7], 0
    v_mfma_f32_32x32x64_f8f6f4 v[v_s + 16 * T_:v_s + 16 * T_ + 15], v[v_k + 16 * T_ + 8:v_k + 16 * T_ + 15], v[v_q + 8:v_q + 15], v[v_s + 16 * T_:v_s + 16 * T_ + 15]
    .set T_, T_ + 1
    .endr
.endm

// O^T += 2^(V exponent) V^T P^T: the E8M0 block scale of the MFMA applies the tile's V exponent exactly; and
// the row sums of that P, afresh (unscaled: l is in P's units)
.macro mma_pv
    .set c_, 0
    .rept kHeadDimV / 32
    v_mfma_scale_f32_32x32x64_f8f6f4 v[v_o + 16 * c_:v_o + 16 * c_ + 15], v[v_v + 8 * c_:v_v + 8 * c_ + 7], v[v_p:v_p + 7], v[v_o + 16 * c_:v_o + 16 * c_ + 15], v[v_vscale], v[v_one_e8m0]
    .set c_, c_ + 1
    .endr
    v_mfma_f32_32x32x64_f8f6f4 v[v_sum:v_sum + 15], v[v_ones:v_ones + 7], v[v_p:v_p + 7], 0
.endm

// Masked; the online max in t units (S * scale_qk); the exp-free codes of P into B = P^T; l and O^T rescaled
.macro softmax_tile
    mask_scores 32
    online_max 32, s_scale_qk

    // row constant = (56 - c + 8 offset - 8 m_used) 2^-24 (one rounding, as fmaf(-8, m, K) scaled exactly)
    v_mul_f32 v[v_t0], kMinusEightBits, v[v_m_used]
    v_add_f32 v[v_row_constant], kRowBaseBits, v[v_t0]
    // y = fma(S, scale8, row constant), two registers per v_pk_fma_f32 (op_sel_hi:[1,0,0]: both halves take
    // the low halves of s[s_scale8:+1] and v[v_row_constant:+1]); register pairs into float16 subnormals,
    // clamped at 0
    .if (v_s % 2) || (s_scale8 % 2) || (v_row_constant % 2)
    .error "v_pk_fma_f32 takes even-aligned register pairs"
    .endif
    .set r_, 0
    .rept 16
    v_pk_fma_f32 v[v_s + r_:v_s + r_ + 1], v[v_s + r_:v_s + r_ + 1], s[s_scale8:s_scale8 + 1], v[v_row_constant:v_row_constant + 1] op_sel_hi:[1,0,0]
    .set r_, r_ + 2
    .endr
    .set r_, 0
    .rept 16
    v_cvt_pk_f16_f32 v[v_s + r_], v[v_s + r_], v[v_s + r_ + 1] clamp
    .set r_, r_ + 2
    .endr
    // VGPR w packs the codes of registers 4 w .. 4 w + 3: the low bytes of the halves of two conversions
    .set w_, 0
    .rept 8
    v_perm_b32 v[v_p + w_], v[v_s + 4 * w_ + 2], v[v_s + 4 * w_], s[s_code_bytes]
    .set w_, w_ + 1
    .endr

    // l = (l + the last P's row sums) * rescale. Both halves of a query's lanes hold its whole sum, and
    // fwd_epilogue adds the halves' l: each adds half (exact)
    v_fma_f32 v[v_t2], v[v_sum], 0.5, v[v_l]
    v_mul_f32 v[v_l], v[v_t2], v[v_t1]

    rescale_o
.endm

.text
.globl fwd_fp8_hd128
.p2align 8
.type fwd_fp8_hd128,@function
fwd_fp8_hd128:
    fwd_prologue

    // descale factors (per tensor or per (batch, kv head)); per-block exponents replace them: q's once
    // here (a block holds whole 32-query waves), k's and v's per KV tile in the loop
    load_descale s_q_factor, s_q_descale, s_q_descale_sb
    load_descale s_k_factor, s_k_descale, s_k_descale_sb
    load_descale s_out_scale, s_v_descale, s_v_descale_sb
    udiv s_heads_kv, s_hq, s_hpk
    if_exponents s_q_exponents, .Lq_factor_done
    s_min_u32 s[s_t2], s[s_q0], s[s_sq_last]    // a wave wholly past seqlen_q reads the last block
    udiv s_exp_block, s_t2, s_q_block_tokens
    load_exponent s_q_factor, s_q_exponents, s_hq, s_head, s_q_blocks
    exponent_to_factor s_q_factor
.Lq_factor_done:
    v_mov_b32 v[v_t0], s[s_scale]
    v_mul_f32 v[v_t0], s[s_q_factor], v[v_t0]
    v_readfirstlane_b32 s[s_scale_q], v[v_t0]
    v_mov_b32 v[v_vscale], 127
    v_mov_b32 v[v_one_e8m0], 127
    s_mov_b32 s[s_code_bytes], kCodeBytes
    .set i_, 0
    .rept 8
    v_mov_b32 v[v_ones + i_], kE4m3OnesX4
    .set i_, i_ + 1
    .endr

    // per-lane LDS offsets of the operands: K row lane % 32 at 16 bytes * half; V column lane % 32 at row 4 h
    v_lshlrev_b32 v[v_k_lds], 7, v[v_l32]
    v_lshlrev_b32 v[v_t0], 4, v[v_half]
    v_add_u32 v[v_k_lds], v[v_k_lds], v[v_t0]
    // V^T: lane L of 16-lane group G reads row r = (L % 16) / 2, key 4 h + r + 4 (r / 4), dims 16 (G % 2) + 8 (L % 2)
    v_bfe_u32 v[v_t1], v[v_lane], 1, 3                        // r
    v_lshrrev_b32 v[v_t2], 2, v[v_t1]
    v_lshl_add_u32 v[v_t1], v[v_t2], 2, v[v_t1]               // r + 4 (r / 4)
    v_lshl_add_u32 v[v_t1], v[v_half], 2, v[v_t1]             // + 4 h
    v_lshlrev_b32 v[v_v_lds], 7, v[v_t1]                       // key * kRowBytes
    v_and_b32 v[v_t1], 16, v[v_lane]                           // 16 (G % 2)
    v_add_u32 v[v_v_lds], v[v_v_lds], v[v_t1]
    v_and_b32 v[v_t1], 1, v[v_lane]
    v_lshl_add_u32 v[v_v_lds], v[v_t1], 3, v[v_v_lds]         // + 8 (L % 2)
    v_add_u32 v[v_v_lds], kVOffset, v[v_v_lds]

    // B = Q^T: lane (query q0 + lane % 32, clamped), K-step s: dims 64 s + 16 h .. + 15, then + 32
    query_row_address
    .set i_, 0
    .rept 4
    global_load_dwordx4 v[v_q + 4 * i_:v_q + 4 * i_ + 3], v[v_addr:v_addr + 1], off offset:32 * i_
    .set i_, i_ + 1
    .endr

    fwd_tile_loop
    v_fma_f32 v[v_l], v[v_sum], 0.5, v[v_l]      // the last P's row sums

    // the codes were 2^8 times p: lse = ln 2 (m_used - 8 + log2 l)
    v_subrev_f32 v[v_m_used], 0x41000000, v[v_m_used]
    fwd_epilogue
.Lfwd_fp8_hd128_end:
    .size fwd_fp8_hd128, .Lfwd_fp8_hd128_end - fwd_fp8_hd128

fwd_kernel_descriptor fwd_fp8_hd128, 256, 100, 49152
