// fwd_bf16_hd128: causal (or full) attention forward, bf16 in and out, head dim 128, gfx950 (MI355X).
//
// First version: correct, simple, slow. One wave64 per workgroup computes 32 query rows of one head against
// KV tiles of 32 keys, loading every MFMA operand straight from global memory (no LDS), with the 32 x 32 x 16
// bf16 MFMA. Not yet: LDS tiles, 8 waves in two ping-pong groups, ds_read_b64_tr_b16 for V.
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
// Contract.
//   Kernel arguments: fp_gfx950_fwd_kernarg (hip/fwd_kernarg.h), offsets karg_* below.
//   Grid: x = ceil(seqlen_q / 32) query blocks, y = heads_q, z = batch; workgroup = 64 lanes (one wave).
//   Entry: s[0:1] kernarg pointer; s2, s3, s4 workgroup id x, y, z; v0 workitem id (0..63).
//   LDS: none. Host guarantees: every argument validated (src/validate.c), strides < 2^32 bytes except batch.

.amdgcn_target "amdgcn-amd-amdhsa--gfx950"

// ---- kernel arguments (byte offsets; checked against hip/fwd_kernarg.h by a test) ----------------------
.set karg_q, 0
.set karg_k, 8
.set karg_v, 16
.set karg_out, 24
.set karg_lse, 32
.set karg_q_stride_seq, 40
.set karg_q_stride_head, 44
.set karg_q_stride_batch, 48
.set karg_k_stride_seq, 56
.set karg_k_stride_head, 60
.set karg_k_stride_batch, 64
.set karg_v_stride_seq, 72
.set karg_v_stride_head, 76
.set karg_v_stride_batch, 80
.set karg_out_stride_seq, 88
.set karg_out_stride_head, 92
.set karg_out_stride_batch, 96
.set karg_seqlen_q, 104
.set karg_seqlen_k, 108
.set karg_heads_q, 112
.set karg_heads_per_kv, 116
.set karg_causal, 120
.set karg_causal_offset, 124
.set karg_softmax_scale_log2, 128
.set karg_reserved, 132
.set karg_size, 136

// ---- tiles ----------------------------------------------------------------------------------------------
.set kBlockQ, 32        // queries per wave: the N of the MFMA
.set kBlockKey, 32      // keys per tile: the M of S^T
.set kHeadDim, 128
.set kBf16Bytes, 2
.if kHeadDim != 128 || kBlockQ != 32 || kBlockKey != 32
.error "the register map below is laid out for head dim 128 and 32 x 32 tiles"
.endif

// ---- SGPRs ------------------------------------------------------------------------------------------------
.set s_karg, 0          // s[0:1]
.set s_block, 2         // workgroup id x: query block
.set s_head, 3          // workgroup id y: query head
.set s_batch, 4         // workgroup id z
.set s_args, 8          // s[8:41]: kernel argument dword i in s[s_args + i]
.set s_q, s_args + karg_q / 4
.set s_k, s_args + karg_k / 4
.set s_v, s_args + karg_v / 4
.set s_out, s_args + karg_out / 4
.set s_lse, s_args + karg_lse / 4
.set s_q_ss, s_args + karg_q_stride_seq / 4
.set s_q_sh, s_args + karg_q_stride_head / 4
.set s_q_sb, s_args + karg_q_stride_batch / 4
.set s_k_ss, s_args + karg_k_stride_seq / 4
.set s_k_sh, s_args + karg_k_stride_head / 4
.set s_k_sb, s_args + karg_k_stride_batch / 4
.set s_v_ss, s_args + karg_v_stride_seq / 4
.set s_v_sh, s_args + karg_v_stride_head / 4
.set s_v_sb, s_args + karg_v_stride_batch / 4
.set s_o_ss, s_args + karg_out_stride_seq / 4
.set s_o_sh, s_args + karg_out_stride_head / 4
.set s_o_sb, s_args + karg_out_stride_batch / 4
.set s_sq, s_args + karg_seqlen_q / 4
.set s_sk, s_args + karg_seqlen_k / 4
.set s_hq, s_args + karg_heads_q / 4
.set s_hpk, s_args + karg_heads_per_kv / 4
.set s_causal, s_args + karg_causal / 4
.set s_coff, s_args + karg_causal_offset / 4
.set s_scale, s_args + karg_softmax_scale_log2 / 4
.set s_head_kv, 44
.set s_q0, 45           // first query of the block
.set s_key0, 46         // first key of the tile
.set s_n, 47            // tile index
.set s_n_end, 48        // tiles to visit
.set s_sk_last, 49      // seqlen_k - 1
.set s_sq_last, 50      // seqlen_q - 1
.set s_t0, 51
.set s_t1, 52
.set s_t2, 53
.set s_t3, 54
.set s_qbase, 56        // s[56:57] q + batch * stride_batch + head * stride_head, likewise:
.set s_kbase, 58
.set s_vbase, 60
.set s_obase, 62
.set s_exec_save, 64    // s[64:65]

// ---- VGPRs ------------------------------------------------------------------------------------------------
.set v_lane, 0          // workitem id 0..63
.set v_l32, 1           // lane % 32
.set v_half, 2          // lane / 32
.set v_neginf, 3        // -inf
.set v_zero, 4          // 0.0
.set v_m, 5             // running max of t (log2 units)
.set v_m_used, 6        // max the last tile's p were taken from (0 while every key was masked)
.set v_l, 7             // this lane's part of sum p (its 16 keys of each tile)
.set v_qabs, 8          // query index q0 + lane % 32
.set v_limit, 9         // last key this query may see
.set v_key4h, 10        // 4 * half: key offset of this lane's half in the D layout
.set v_bperm, 11        // byte address of the partner lane (lane ^ 32) for ds_bpermute
.set v_t0, 12
.set v_t1, 13
.set v_t2, 14
.set v_t3, 15
.set v_addr, 16         // v[16:17] a 64-bit address
.set v_kbase, 18        // v[18:19] K base + 16 bytes * half
.set v_vbase, 20        // v[20:21] V base + 2 bytes * (lane % 32)
.set v_obase, 22        // v[22:23]
.set v_q, 24            // v[24:55]  B = Q^T, K-step s in v[v_q + 4 s : + 3]
.set v_k, 56            // v[56:87]  A = K, K-step s
.set v_v, 88            // v[88:119] A = V^T, dim block c and K-step u in v[v_v + 4 (2 c + u) : + 3]
.set v_s, 120           // v[120:135] S^T, then t, then p
.set v_p, 136           // v[136:143] B = P^T, K-step u in v[v_p + 4 u : + 3]
.set v_o, 144           // v[144:207] O^T, dim block c in v[v_o + 16 c : + 15]
.set v_vrow, 208        // v[208:239] addresses of the 16 V rows of a tile, pair a = 8 u + 2 t + e
.set v_end, 240

// ---- macros -----------------------------------------------------------------------------------------------

// dst(64) = ptr(64) + batch * stride_batch(64) + head * stride_head(32)
.macro tensor_base dst, ptr, stride_batch, stride_head, head
    s_mul_i32 s[s_t0], s[s_batch], s[\stride_batch]
    s_mul_hi_u32 s[s_t1], s[s_batch], s[\stride_batch]
    s_mul_i32 s[s_t2], s[s_batch], s[\stride_batch + 1]
    s_add_u32 s[s_t1], s[s_t1], s[s_t2]
    s_mul_i32 s[s_t2], s[\head], s[\stride_head]
    s_mul_hi_u32 s[s_t3], s[\head], s[\stride_head]
    s_add_u32 s[\dst], s[\ptr], s[s_t0]
    s_addc_u32 s[\dst + 1], s[\ptr + 1], s[s_t1]
    s_add_u32 s[\dst], s[\dst], s[s_t2]
    s_addc_u32 s[\dst + 1], s[\dst + 1], s[s_t3]
.endm

// v[dst:dst+1] = v[base:base+1] + v[row] * s[stride]
.macro row_address dst, row, stride, base
    v_mad_u64_u32 v[\dst:\dst + 1], vcc, v[\row], s[\stride], v[\base:\base + 1]
.endm

// v[dst:dst+1] += v[add] (32-bit, unsigned)
.macro add_address dst, add
    v_add_co_u32 v[\dst], vcc, v[\dst], v[\add]
    v_addc_co_u32 v[\dst + 1], vcc, 0, v[\dst + 1], vcc
.endm

// 24 wait states: a VALU may read what a 32x32 MFMA wrote (16 passes) only after this
.macro wait_mfma_result
    s_nop 7
    s_nop 7
    s_nop 7
.endm

.text
.globl fwd_bf16_hd128
.p2align 8
.type fwd_bf16_hd128,@function
fwd_bf16_hd128:
    s_load_dwordx16 s[s_args:s_args + 15], s[s_karg:s_karg + 1], 0
    s_load_dwordx16 s[s_args + 16:s_args + 31], s[s_karg:s_karg + 1], 64
    s_load_dwordx2 s[s_args + 32:s_args + 33], s[s_karg:s_karg + 1], 128
    v_and_b32 v[v_l32], 31, v[v_lane]
    v_lshrrev_b32 v[v_half], 5, v[v_lane]
    v_lshlrev_b32 v[v_key4h], 2, v[v_half]
    v_xor_b32 v[v_bperm], 32, v[v_lane]
    v_lshlrev_b32 v[v_bperm], 2, v[v_bperm]
    v_mov_b32 v[v_neginf], 0xff800000
    v_mov_b32 v[v_zero], 0
    s_waitcnt lgkmcnt(0)

    // head_kv = head / heads_per_kv: a float estimate, then exact by one correction each way
    v_cvt_f32_u32 v[v_t0], s[s_head]
    v_cvt_f32_u32 v[v_t1], s[s_hpk]
    v_rcp_f32 v[v_t1], v[v_t1]
    v_mul_f32 v[v_t0], v[v_t0], v[v_t1]
    v_cvt_u32_f32 v[v_t0], v[v_t0]
    v_readfirstlane_b32 s[s_head_kv], v[v_t0]
    s_add_u32 s[s_t0], s[s_head_kv], 1
    s_mul_i32 s[s_t0], s[s_t0], s[s_hpk]
    s_cmp_le_u32 s[s_t0], s[s_head]
    s_cselect_b32 s[s_t1], 1, 0
    s_add_u32 s[s_head_kv], s[s_head_kv], s[s_t1]
    s_mul_i32 s[s_t0], s[s_head_kv], s[s_hpk]
    s_cmp_gt_u32 s[s_t0], s[s_head]
    s_cselect_b32 s[s_t1], 1, 0
    s_sub_u32 s[s_head_kv], s[s_head_kv], s[s_t1]

    tensor_base s_qbase, s_q, s_q_sb, s_q_sh, s_head
    tensor_base s_kbase, s_k, s_k_sb, s_k_sh, s_head_kv
    tensor_base s_vbase, s_v, s_v_sb, s_v_sh, s_head_kv
    tensor_base s_obase, s_out, s_o_sb, s_o_sh, s_head
    s_lshl_b32 s[s_q0], s[s_block], 5
    s_sub_u32 s[s_sk_last], s[s_sk], 1
    s_sub_u32 s[s_sq_last], s[s_sq], 1

    // per-lane bases: K + 16 bytes * half (dims 8 h ..), V + 2 bytes * (lane % 32) (dim lane % 32)
    v_lshlrev_b32 v[v_t0], 4, v[v_half]
    v_mov_b32 v[v_kbase], s[s_kbase]
    v_mov_b32 v[v_kbase + 1], s[s_kbase + 1]
    add_address v_kbase, v_t0
    v_lshlrev_b32 v[v_t0], 1, v[v_l32]
    v_mov_b32 v[v_vbase], s[s_vbase]
    v_mov_b32 v[v_vbase + 1], s[s_vbase + 1]
    add_address v_vbase, v_t0
    v_mov_b32 v[v_obase], s[s_obase]
    v_mov_b32 v[v_obase + 1], s[s_obase + 1]

    // B = Q^T: lane (query q0 + lane % 32, clamped into the tensor), dims 16 s + 8 h .. + 7 of K-step s
    v_add_u32 v[v_qabs], s[s_q0], v[v_l32]
    v_min_u32 v[v_t0], s[s_sq_last], v[v_qabs]
    v_mov_b32 v[v_addr], s[s_qbase]
    v_mov_b32 v[v_addr + 1], s[s_qbase + 1]
    row_address v_addr, v_t0, s_q_ss, v_addr
    v_lshlrev_b32 v[v_t0], 4, v[v_half]
    add_address v_addr, v_t0
    .set step_, 0
    .rept kHeadDim / 16
    global_load_dwordx4 v[v_q + 4 * step_:v_q + 4 * step_ + 3], v[v_addr:v_addr + 1], off offset:32 * step_
    .set step_, step_ + 1
    .endr

    // O = 0, m = -inf, l = 0
    .set i_, 0
    .rept 64
    v_mov_b32 v[v_o + i_], 0
    .set i_, i_ + 1
    .endr
    v_mov_b32 v[v_m], v[v_neginf]
    v_mov_b32 v[v_m_used], 0
    v_mov_b32 v[v_l], 0

    // tiles to visit: all keys, or (causal) up to the block's last query's limit; per lane the last key
    s_add_u32 s[s_t0], s[s_sk], kBlockKey - 1
    s_lshr_b32 s[s_n_end], s[s_t0], 5
    v_mov_b32 v[v_limit], s[s_sk_last]
    s_cmp_eq_u32 s[s_causal], 0
    s_cbranch_scc1 .Lrange_done
    s_add_u32 s[s_t0], s[s_q0], s[s_coff]
    s_add_u32 s[s_t0], s[s_t0], kBlockQ + kBlockKey - 1
    s_lshr_b32 s[s_t0], s[s_t0], 5
    s_min_u32 s[s_n_end], s[s_n_end], s[s_t0]
    v_add_u32 v[v_t0], s[s_coff], v[v_qabs]
    v_min_i32 v[v_limit], v[v_limit], v[v_t0]
.Lrange_done:
    s_mov_b32 s[s_n], 0
    s_mov_b32 s[s_key0], 0

.Ltile:
    // A = K: lane (key key0 + lane % 32, clamped), dims 16 s + 8 h .. + 7 of K-step s
    v_add_u32 v[v_t0], s[s_key0], v[v_l32]
    v_min_u32 v[v_t0], s[s_sk_last], v[v_t0]
    row_address v_addr, v_t0, s_k_ss, v_kbase
    .set step_, 0
    .rept kHeadDim / 16
    global_load_dwordx4 v[v_k + 4 * step_:v_k + 4 * step_ + 3], v[v_addr:v_addr + 1], off offset:32 * step_
    .set step_, step_ + 1
    .endr

    // A = V^T: the 16 key rows 16 u + 8 (t / 2) + 2 (t % 2) + e + 4 h (clamped), row pair a = 8 u + 2 t + e
    v_add_u32 v[v_t1], s[s_key0], v[v_key4h]
    .set a_, 0
    .rept 16
    v_add_u32 v[v_t0], 16 * (a_ / 8) + 8 * ((a_ % 8) / 4) + 2 * ((a_ % 4) / 2) + a_ % 2, v[v_t1]
    v_min_u32 v[v_t0], s[s_sk_last], v[v_t0]
    row_address v_vrow + 2 * a_, v_t0, s_v_ss, v_vbase
    .set a_, a_ + 1
    .endr
    // element pair t of dim block c, K-step u: keys of row pairs 8 u + 2 t (low half), + 1 (high half)
    .set c_, 0
    .rept kHeadDim / 32
    .set u_, 0
    .rept 2
    .set t_, 0
    .rept 4
    global_load_short_d16 v[v_v + 4 * (2 * c_ + u_) + t_], v[v_vrow + 2 * (8 * u_ + 2 * t_):v_vrow + 2 * (8 * u_ + 2 * t_) + 1], off offset:64 * c_
    global_load_short_d16_hi v[v_v + 4 * (2 * c_ + u_) + t_], v[v_vrow + 2 * (8 * u_ + 2 * t_ + 1):v_vrow + 2 * (8 * u_ + 2 * t_ + 1) + 1], off offset:64 * c_
    .set t_, t_ + 1
    .endr
    .set u_, u_ + 1
    .endr
    .set c_, c_ + 1
    .endr
    s_waitcnt vmcnt(0)

    // S^T = K Q^T
    v_mfma_f32_32x32x16_bf16 v[v_s:v_s + 15], v[v_k:v_k + 3], v[v_q:v_q + 3], 0
    .set step_, 1
    .rept kHeadDim / 16 - 1
    v_mfma_f32_32x32x16_bf16 v[v_s:v_s + 15], v[v_k + 4 * step_:v_k + 4 * step_ + 3], v[v_q + 4 * step_:v_q + 4 * step_ + 3], v[v_s:v_s + 15]
    .set step_, step_ + 1
    .endr
    wait_mfma_result

    // t = S * scale_log2; -inf where key0 + 4 h + (8 (r / 4) + r % 4) > limit, i.e. where the offset > room
    v_add_u32 v[v_t0], s[s_key0], v[v_key4h]
    v_sub_u32 v[v_t2], v[v_limit], v[v_t0]
    .set r_, 0
    .rept 16
    v_mul_f32 v[v_s + r_], s[s_scale], v[v_s + r_]
    v_cmp_gt_i32 vcc, 8 * (r_ / 4) + r_ % 4, v[v_t2]
    v_cndmask_b32 v[v_s + r_], v[v_s + r_], v[v_neginf], vcc
    .set r_, r_ + 1
    .endr

    // tile max over this lane's 16 keys and its partner's (lane ^ 32)
    v_max_f32 v[v_t0], v[v_s], v[v_s + 1]
    .set r_, 2
    .rept 14
    v_max_f32 v[v_t0], v[v_t0], v[v_s + r_]
    .set r_, r_ + 1
    .endr
    ds_bpermute_b32 v[v_t1], v[v_bperm], v[v_t0]
    s_waitcnt lgkmcnt(0)
    v_max_f32 v[v_t0], v[v_t0], v[v_t1]
    // m_new = max(m, tile max); m_used = m_new, or 0 while m_new = -inf; rescale = 2^(m - m_used)
    v_max_f32 v[v_t0], v[v_m], v[v_t0]
    v_cmp_eq_f32 vcc, v[v_neginf], v[v_t0]
    v_cndmask_b32 v[v_m_used], v[v_t0], v[v_zero], vcc
    v_sub_f32 v[v_t1], v[v_m], v[v_m_used]
    v_exp_f32 v[v_t1], v[v_t1]
    v_mov_b32 v[v_m], v[v_t0]

    // p = 2^(t - m_used); l = l * rescale + sum p
    .set r_, 0
    .rept 16
    v_sub_f32 v[v_s + r_], v[v_s + r_], v[v_m_used]
    v_exp_f32 v[v_s + r_], v[v_s + r_]
    .set r_, r_ + 1
    .endr
    v_add_f32 v[v_t2], v[v_s], v[v_s + 1]
    .set r_, 2
    .rept 14
    v_add_f32 v[v_t2], v[v_t2], v[v_s + r_]
    .set r_, r_ + 1
    .endr
    v_fma_f32 v[v_l], v[v_l], v[v_t1], v[v_t2]

    // O^T *= rescale
    .set i_, 0
    .rept 64
    v_mul_f32 v[v_o + i_], v[v_o + i_], v[v_t1]
    .set i_, i_ + 1
    .endr

    // B = P^T: K-step u, element pair t = registers 8 u + 2 t, + 1
    .set u_, 0
    .rept 2
    .set t_, 0
    .rept 4
    v_cvt_pk_bf16_f32 v[v_p + 4 * u_ + t_], v[v_s + 8 * u_ + 2 * t_], v[v_s + 8 * u_ + 2 * t_ + 1]
    .set t_, t_ + 1
    .endr
    .set u_, u_ + 1
    .endr
    s_nop 4

    // O^T += V^T P^T
    .set c_, 0
    .rept kHeadDim / 32
    .set u_, 0
    .rept 2
    v_mfma_f32_32x32x16_bf16 v[v_o + 16 * c_:v_o + 16 * c_ + 15], v[v_v + 4 * (2 * c_ + u_):v_v + 4 * (2 * c_ + u_) + 3], v[v_p + 4 * u_:v_p + 4 * u_ + 3], v[v_o + 16 * c_:v_o + 16 * c_ + 15]
    .set u_, u_ + 1
    .endr
    .set c_, c_ + 1
    .endr
    wait_mfma_result

    s_add_u32 s[s_key0], s[s_key0], kBlockKey
    s_add_u32 s[s_n], s[s_n], 1
    s_cmp_lt_u32 s[s_n], s[s_n_end]
    s_cbranch_scc1 .Ltile

    // l: the whole row's sum; stores only for queries < seqlen_q
    ds_bpermute_b32 v[v_t0], v[v_bperm], v[v_l]
    s_waitcnt lgkmcnt(0)
    v_add_f32 v[v_l], v[v_l], v[v_t0]
    v_rcp_f32 v[v_t3], v[v_l]
    v_cmp_gt_i32 vcc, s[s_sq], v[v_qabs]
    s_and_saveexec_b64 s[s_exec_save:s_exec_save + 1], vcc
    s_cbranch_execz .Ldone

    // O row: out + query * stride_seq + dims 32 c + 8 g + 4 h .. + 3 (registers 4 g .. 4 g + 3 of block c)
    row_address v_addr, v_qabs, s_o_ss, v_obase
    v_lshlrev_b32 v[v_t0], 3, v[v_half]
    add_address v_addr, v_t0
    .set c_, 0
    .rept kHeadDim / 32
    .set g_, 0
    .rept 4
    v_mul_f32 v[v_s], v[v_o + 16 * c_ + 4 * g_], v[v_t3]
    v_mul_f32 v[v_s + 1], v[v_o + 16 * c_ + 4 * g_ + 1], v[v_t3]
    v_mul_f32 v[v_s + 2], v[v_o + 16 * c_ + 4 * g_ + 2], v[v_t3]
    v_mul_f32 v[v_s + 3], v[v_o + 16 * c_ + 4 * g_ + 3], v[v_t3]
    v_cvt_pk_bf16_f32 v[v_p], v[v_s], v[v_s + 1]
    v_cvt_pk_bf16_f32 v[v_p + 1], v[v_s + 2], v[v_s + 3]
    global_store_dwordx2 v[v_addr:v_addr + 1], v[v_p:v_p + 1], off offset:64 * c_ + 16 * g_
    .set g_, g_ + 1
    .endr
    .set c_, c_ + 1
    .endr

    // lse = ln 2 (m_used + log2 l), one lane per query, if asked for
    s_or_b32 s[s_t0], s[s_lse], s[s_lse + 1]
    s_cmp_eq_u32 s[s_t0], 0
    s_cbranch_scc1 .Ldone
    v_cmp_eq_u32 vcc, 0, v[v_half]
    s_and_b64 exec, exec, vcc
    s_mul_i32 s[s_t0], s[s_batch], s[s_hq]
    s_add_u32 s[s_t0], s[s_t0], s[s_head]
    s_mul_i32 s[s_t0], s[s_t0], s[s_sq]
    v_add_u32 v[v_t0], s[s_t0], v[v_qabs]
    v_lshlrev_b32 v[v_t0], 2, v[v_t0]
    v_mov_b32 v[v_addr], s[s_lse]
    v_mov_b32 v[v_addr + 1], s[s_lse + 1]
    add_address v_addr, v_t0
    v_log_f32 v[v_t1], v[v_l]
    v_add_f32 v[v_t1], v[v_t1], v[v_m_used]
    v_mul_f32 v[v_t1], 0x3f317218, v[v_t1]
    global_store_dword v[v_addr:v_addr + 1], v[v_t1], off
.Ldone:
    s_endpgm
.Lfwd_bf16_hd128_end:
    .size fwd_bf16_hd128, .Lfwd_bf16_hd128_end - fwd_bf16_hd128

.rodata
.p2align 6
.amdhsa_kernel fwd_bf16_hd128
    .amdhsa_user_sgpr_kernarg_segment_ptr 1
    .amdhsa_system_sgpr_workgroup_id_x 1
    .amdhsa_system_sgpr_workgroup_id_y 1
    .amdhsa_system_sgpr_workgroup_id_z 1
    .amdhsa_system_vgpr_workitem_id 0
    .amdhsa_kernarg_size karg_size
    .amdhsa_group_segment_fixed_size 0
    .amdhsa_next_free_vgpr .amdgcn.next_free_vgpr
    .amdhsa_next_free_sgpr .amdgcn.next_free_sgpr
    .amdhsa_accum_offset ((.amdgcn.next_free_vgpr + 3) / 4) * 4
.end_amdhsa_kernel

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: fwd_bf16_hd128
    .symbol: fwd_bf16_hd128.kd
    .kernarg_segment_size: 136
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .max_flat_workgroup_size: 64
    .sgpr_count: 66
    .vgpr_count: 240
    .agpr_count: 0
    .args:
      - { .size: 136, .offset: 0, .value_kind: by_value }
...
.end_amdgpu_metadata
