// fwd_bf16_hd128: causal (or full) attention forward, bf16 in and out, head dim 128, gfx950 (MI355X).
//
// Each wave64 computes 32 query rows of one head against KV tiles of 32 keys with the 32 x 32 x 16 bf16
// MFMA; 8 waves per workgroup in two ping-pong groups share each K and V tile through LDS (fwd_tile_loop.inc).
// V^T reaches the P.V MFMA through ds_read_b64_tr_b16.
//
// Math per KV tile (keys key0 .. key0 + 31), in the transposed orientation so that a lane owns one query:
//   S^T = K Q^T                      8 MFMAs, A = K (keys x 16 dims), B = Q^T (16 dims x queries)
//   t = S^T * scale_log2, masked to -inf where key > limit(query)
//   m_new = max(m, max_keys t); p = 2^(t - m_new); l = l 2^(m - m_new) + sum p; O^T *= 2^(m - m_new)
//   O^T += V^T P^T                   8 MFMAs, A = V^T (32 dims x 16 keys), B = P^T (16 keys x queries)
// then O = O^T / l (rows < seqlen_q), lse = ln 2 (m + log2 l).
//
// MFMA v_mfma_f32_32x32x16_bf16 layouts (lane L, h = L / 32; element j of a lane's 8 bf16, 4 VGPRs):
//   A[i][k]: i = L % 32, k = 8 h + j        B[k][n]: n = L % 32, k = 8 h + j
//   D[i][n]: n = L % 32, i = 8 (r / 4) + 4 h + r % 4 for accumulator register r = 0..15
// So after S^T a lane holds query L % 32 and keys 8 (r / 4) + 4 h + r % 4. P^T goes into the next MFMA's B
// as it lies (element j = register 8 u + j of K-step u); the contraction index k = 8 h + j then names key
//   16 u + 8 (j / 4) + 4 h + j % 4,
// and the V^T operand is gathered in that same key order, so the two operands agree.
//
// Contract: fwd_contract.inc (arguments, grid, entry registers, no LDS); registers below.

.include "fwd_contract.inc"
.include "fwd_frame.inc"
.include "fwd_softmax.inc"
.include "fwd_tile_loop.inc"

.set kTileKeys, 32      // keys per loop iteration
.set kRowBytes, 256     // one K or V row in LDS: 128 bf16
.set kRowChunksLog2, 4  // 16 16-byte chunks per row
.set kTileKeysLog2, 5
.if kHeadDim != 128 || kBlockQ != 32 || kBlockKey != 32
.error "the register map below is laid out for head dim 128 and 32 x 32 tiles"
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

// ---- the work of one KV tile, in pieces the loop orders for the ping-pong (fwd_tile_loop.inc) ---------------

// A = K of tile n from its LDS buffer: lane (key lane % 32, dims 16 s + 8 h .. + 7 of K-step s)
.macro read_k
    v_add_u32 v[v_t0], s[s_buf], v[v_k_lds]
    .set step_, 0
    .rept kHeadDim / 16
    ds_read_b128 v[v_k + 4 * step_:v_k + 4 * step_ + 3], v[v_t0] offset:32 * step_
    .set step_, step_ + 1
    .endr
    s_waitcnt lgkmcnt(0)
.endm

// A = V^T of tile n from its LDS buffer: element pair t of dim block c, K-step u holds keys
// 16 u + 8 (t / 2) + 2 (t % 2) + e + 4 h, e = 0, 1, at dim 32 c + lane % 32. ds_read_b64_tr_b16 gives each
// lane of a 16-lane group one column (its dim) of the 4 x 16 tile its lanes address, row r read by lanes
// 4 r .. 4 r + 3: rows r = 0..3 are keys 16 u + 8 (t / 2) + 4 h + r, i.e. element pairs t and t + 1 (t even).
.macro read_v
    v_add_u32 v[v_t0], s[s_buf], v[v_v_lds]
    .set c_, 0
    .rept kHeadDim / 32
    .set u_, 0
    .rept 2
    .set t_, 0
    .rept 2
    ds_read_b64_tr_b16 v[v_v + 4 * (2 * c_ + u_) + 2 * t_:v_v + 4 * (2 * c_ + u_) + 2 * t_ + 1], v[v_t0] offset:kRowBytes * (16 * u_ + 8 * t_) + 64 * c_
    .set t_, t_ + 1
    .endr
    .set u_, u_ + 1
    .endr
    .set c_, c_ + 1
    .endr
    s_waitcnt lgkmcnt(0)
.endm

// no per-tile descales in bf16
.macro tile_scales
.endm

// S^T = K Q^T
.macro mma_s
    v_mfma_f32_32x32x16_bf16 v[v_s:v_s + 15], v[v_k:v_k + 3], v[v_q:v_q + 3], 0
    .set step_, 1
    .rept kHeadDim / 16 - 1
    v_mfma_f32_32x32x16_bf16 v[v_s:v_s + 15], v[v_k + 4 * step_:v_k + 4 * step_ + 3], v[v_q + 4 * step_:v_q + 4 * step_ + 3], v[v_s:v_s + 15]
    .set step_, step_ + 1
    .endr
.endm

// O^T += V^T P^T
.macro mma_pv
    .set c_, 0
    .rept kHeadDim / 32
    .set u_, 0
    .rept 2
    v_mfma_f32_32x32x16_bf16 v[v_o + 16 * c_:v_o + 16 * c_ + 15], v[v_v + 4 * (2 * c_ + u_):v_v + 4 * (2 * c_ + u_) + 3], v[v_p + 4 * u_:v_p + 4 * u_ + 3], v[v_o + 16 * c_:v_o + 16 * c_ + 15]
    .set u_, u_ + 1
    .endr
    .set c_, c_ + 1
    .endr
.endm

// t = S * scale_log2, masked; the online max; p = 2^(t - m_used); l = l * rescale + sum p; O^T *= rescale;
// B = P^T: K-step u, element pair t = registers 8 u + 2 t, + 1
.macro softmax_tile
    .set r_, 0
    .rept 16
    v_mul_f32 v[v_s + r_], s[s_scale], v[v_s + r_]
    .set r_, r_ + 1
    .endr
    mask_scores 16
    online_max 16
    // p = 2^(t - m_used): the subtraction two registers per v_pk_add_f32 (-m_used in v_t0, the low half of
    // the pair v_t0, v_t1 that op_sel_hi:[1,0] gives to both halves)
    .if (v_s % 2) || (v_t0 % 2) || (v_t2 % 2)
    .error "v_pk_add_f32 takes even-aligned register pairs"
    .endif
    v_sub_f32 v[v_t0], 0, v[v_m_used]
    .set r_, 0
    .rept 8
    v_pk_add_f32 v[v_s + r_:v_s + r_ + 1], v[v_s + r_:v_s + r_ + 1], v[v_t0:v_t0 + 1] op_sel_hi:[1,0]
    v_exp_f32 v[v_s + r_], v[v_s + r_]
    v_exp_f32 v[v_s + r_ + 1], v[v_s + r_ + 1]
    .set r_, r_ + 2
    .endr
    // this lane's row sum of p, in the pair v_t2, v_t3
    v_pk_add_f32 v[v_t2:v_t3], v[v_s:v_s + 1], v[v_s + 2:v_s + 3]
    .set r_, 4
    .rept 6
    v_pk_add_f32 v[v_t2:v_t3], v[v_t2:v_t3], v[v_s + r_:v_s + r_ + 1]
    .set r_, r_ + 2
    .endr
    v_add_f32 v[v_t2], v[v_t2], v[v_t3]
    v_fma_f32 v[v_l], v[v_l], v[v_t1], v[v_t2]
    rescale_o
    .set u_, 0
    .rept 2
    .set t_, 0
    .rept 4
    v_cvt_pk_bf16_f32 v[v_p + 4 * u_ + t_], v[v_s + 8 * u_ + 2 * t_], v[v_s + 8 * u_ + 2 * t_ + 1]
    .set t_, t_ + 1
    .endr
    .set u_, u_ + 1
    .endr
.endm

.text
.globl fwd_bf16_hd128
.p2align 8
.type fwd_bf16_hd128,@function
fwd_bf16_hd128:
    fwd_prologue

    // per-lane LDS offsets of the operands: K row lane % 32 at 16 bytes * half; V column lane % 32 at row 4 h
    v_lshlrev_b32 v[v_k_lds], 8, v[v_l32]
    v_lshlrev_b32 v[v_t0], 4, v[v_half]
    v_add_u32 v[v_k_lds], v[v_k_lds], v[v_t0]
    // V^T: lane L of 16-lane group G reads row r = (L % 16) / 4, key 4 h + r, dims 16 (G % 2) + 4 (L % 4)
    v_bfe_u32 v[v_t1], v[v_lane], 2, 2                        // r
    v_lshl_add_u32 v[v_t1], v[v_half], 2, v[v_t1]             // + 4 h
    v_lshlrev_b32 v[v_v_lds], 8, v[v_t1]                       // key * kRowBytes
    v_and_b32 v[v_t1], 16, v[v_lane]                           // 16 (G % 2) dims
    v_and_b32 v[v_t2], 3, v[v_lane]
    v_lshl_add_u32 v[v_t1], v[v_t2], 2, v[v_t1]               // + 4 (L % 4)
    v_lshl_add_u32 v[v_v_lds], v[v_t1], 1, v[v_v_lds]         // 2 bytes a dim
    v_add_u32 v[v_v_lds], kTileBytes, v[v_v_lds]

    // B = Q^T: lane (query q0 + lane % 32, clamped into the tensor), dims 16 s + 8 h .. + 7 of K-step s
    query_row_address
    .set step_, 0
    .rept kHeadDim / 16
    global_load_dwordx4 v[v_q + 4 * step_:v_q + 4 * step_ + 3], v[v_addr:v_addr + 1], off offset:32 * step_
    .set step_, step_ + 1
    .endr

    fwd_tile_loop
    fwd_epilogue
.Lfwd_bf16_hd128_end:
    .size fwd_bf16_hd128, .Lfwd_bf16_hd128_end - fwd_bf16_hd128

fwd_kernel_descriptor fwd_bf16_hd128, 220, 100, 49152
