// quantize: flashprefill_quantize on gfx950 (include/flashprefill.h; the Hopper kernel is cuda/quantize.cu), dim 128
// or 192. One wave per workgroup, one workgroup per block of tokens of one head: grid x = blocks, y = heads,
// z = batch. The host launches it twice (hip/quantize_launch.c):
//   phase 0: the block's own exponent, the smallest e with max |y| <= code_max 2^e, clamped to [-127, 127]; 0 where
//            the block holds inf or NaN; kZeroBlock (-128) where it is all zeros;
//   phase 1: the block's final exponent from its head's (the span floor, the zero blocks' exponent; every workgroup
//            of a head computes the same largest exponent, whether a block it reads is already final or not), then
//            the codes, transforming each row again.
// y = H diag(signs) (x - subtract[b, h]) per token row, in float32 with the butterflies of the numpy model
// (flashprefill.prepare.transform) in its order, so the codes and exponents are flashprefill.fp8.quantize_blocks'
// bit for bit. Rows run one at a time through the wave (lane l holds elements 2l, 2l + 1 of the first 128 and
// element 128 + l of the next 64): a plain kernel, never run on an MI355X.

.amdgcn_target "amdgcn-amd-amdhsa--gfx950"

// ---- kernel arguments (byte offsets; hip/quantize_kernarg.h, checked by tests/test_gfx950_static.py) --------------
.set karg_x, 0
.set karg_codes, 8
.set karg_exponents, 16
.set karg_signs, 24
.set karg_subtract, 32
.set karg_x_stride_batch, 40
.set karg_codes_stride_batch, 48
.set karg_x_stride_seq, 56
.set karg_x_stride_head, 60
.set karg_codes_stride_seq, 64
.set karg_codes_stride_head, 68
.set karg_seqlen, 72
.set karg_heads, 76
.set karg_block_tokens, 80
.set karg_blocks, 84
.set karg_dim, 88
.set karg_x_fp32, 92
.set karg_code_max_exponent, 96
.set karg_code_max_mantissa, 100
.set karg_phase, 104
.set karg_reserved, 108
.set karg_size, 112

.set kZeroBlock, -128         // phase 0's mark of an all-zero block
.set kExponentSpan, 64        // flashprefill.fp8.EXPONENT_SPAN
.set kNoExponent, -1000       // below every exponent: the largest of a head with no counted block
.set kInvSqrt128Bits, 0x3db504f3  // float32(1 / sqrt(128))
.set kInvSqrt64Bits, 0x3e000000   // float32(1 / sqrt(64)) = 0.125
.set kTwoPow64Bits, 0x5f800000    // 2^64: takes a float32 subnormal to a normal value exactly

// ---- SGPRs ------------------------------------------------------------------------------------------------------
.equiv s_karg, 0          // s[0:1]
.equiv s_block, 2         // workgroup id x
.equiv s_head, 3          // workgroup id y
.equiv s_batch, 4         // workgroup id z
.equiv s_args, 8          // s[8:35]: kernel argument dword i in s[s_args + i]
.equiv s_x, s_args + karg_x / 4
.equiv s_codes, s_args + karg_codes / 4
.equiv s_exponents, s_args + karg_exponents / 4
.equiv s_signs, s_args + karg_signs / 4
.equiv s_subtract, s_args + karg_subtract / 4
.equiv s_x_sb, s_args + karg_x_stride_batch / 4
.equiv s_c_sb, s_args + karg_codes_stride_batch / 4
.equiv s_x_ss, s_args + karg_x_stride_seq / 4
.equiv s_x_sh, s_args + karg_x_stride_head / 4
.equiv s_c_ss, s_args + karg_codes_stride_seq / 4
.equiv s_c_sh, s_args + karg_codes_stride_head / 4
.equiv s_seqlen, s_args + karg_seqlen / 4
.equiv s_heads, s_args + karg_heads / 4
.equiv s_block_tokens, s_args + karg_block_tokens / 4
.equiv s_blocks, s_args + karg_blocks / 4
.equiv s_dim, s_args + karg_dim / 4
.equiv s_x_fp32, s_args + karg_x_fp32 / 4
.equiv s_cm_exponent, s_args + karg_code_max_exponent / 4
.equiv s_cm_mantissa, s_args + karg_code_max_mantissa / 4
.equiv s_phase, s_args + karg_phase / 4
.equiv s_xbase, 36        // s[36:37] x + batch * x_stride_batch + head * x_stride_head
.equiv s_cbase, 38        // s[38:39] the same for codes
.equiv s_token, 40        // the row being transformed
.equiv s_token_end, 41    // one past the block's last row
.equiv s_t0, 42
.equiv s_t1, 43
.equiv s_row, 44          // s[44:45] a row's address
.equiv s_eaddr, 46        // s[46:47] the exponents of this (batch, head)
.equiv s_scale, 48        // phase 1: 2^-e as float32 bits
.equiv s_mask, 50         // s[50:51]
.equiv s_mask2, 52        // s[52:53]
.equiv s_exec_save, 54    // s[54:55]
.equiv s_c7ffff, 56       // 0x7ffff (VOP3 takes no literal on gfx9)
.equiv s_chunk, 57        // phase 1: the first block of the lanes' chunk
.equiv s_t2, 58
.equiv s_t3, 59

// ---- VGPRs ------------------------------------------------------------------------------------------------------
.equiv v_lane, 0          // 0..63
.equiv v_y, 2             // v[2:4] the row's slots: elements 2 lane, 2 lane + 1, 128 + lane
.equiv v_sign, 6          // v[6:8] signs of the slots (1.0 without a rotation)
.equiv v_shift, 10        // v[10:12] what is subtracted from them (0.0 without)
.equiv v_addr, 14         // v[14:15] a 64-bit address
.equiv v_off, 16          // v[16:17] byte offsets of slot 0 and slot 2 in a row of x
.equiv v_coff, 18         // v[18:19] byte offsets of slot 0 and slot 2 in a row of codes
.equiv v_amax, 20         // phase 0: the largest finite |y| (float32 bits) this lane has seen
.equiv v_bad, 21          // phase 0: 1 where this lane has seen inf or NaN
.equiv v_other, 22        // a partner lane's value
.equiv v_t0, 24
.equiv v_t1, 25
.equiv v_t2, 26
.equiv v_t3, 27
.equiv v_t4, 28
.equiv v_t5, 29
.equiv v_t6, 30
.equiv v_t7, 31
.equiv v_code, 32         // v[32:34] the slots' e4m3 codes
.equiv v_c7f, 35          // 0x7f, the NaN code
.set v_end, 36

// v[addr:addr + 1] = s[base:base + 1] + v[offset] (unsigned 32-bit offset)
.macro address_of base, offset
    v_add_co_u32 v[v_addr], vcc, s[\base], v[\offset]
    v_mov_b32 v[v_addr + 1], s[\base + 1]
    v_addc_co_u32 v[v_addr + 1], vcc, 0, v[v_addr + 1], vcc
.endm

// s[dst:dst + 1] = s[base:base + 1] + s[a] * s[b] (unsigned 32 x 32 -> 64 bits)
.macro add_product dst, base, a, b
    s_mul_i32 s[s_t0], s[\a], s[\b]
    s_mul_hi_u32 s[s_t1], s[\a], s[\b]
    s_add_u32 s[\dst], s[\base], s[s_t0]
    s_addc_u32 s[\dst + 1], s[\base + 1], s[s_t1]
.endm

// s[dst:dst + 1] = s[base:base + 1] + s[a:a + 1] * s[b] (64 x 32 -> 64 bits)
.macro add_product64 dst, base, a, b
    s_mul_i32 s[s_t0], s[\a], s[\b]
    s_mul_hi_u32 s[s_t1], s[\a], s[\b]
    s_add_u32 s[\dst], s[\base], s[s_t0]
    s_addc_u32 s[\dst + 1], s[\base + 1], s[s_t1]
    s_mul_i32 s[s_t0], s[\a + 1], s[\b]
    s_add_u32 s[\dst + 1], s[\dst + 1], s[s_t0]
.endm

// v[dst:dst + 2] = the slots' elements of a float vector at s[base:base + 1] (slot 2 at dim 192 only; the others are
// left as they are); v_t4 and v_t5 hold the byte offsets of elements 2 lane and 128 + lane. Waits for the loads.
.macro load_slot_floats dst, base
    address_of \base, v_t4
    global_load_dwordx2 v[\dst:\dst + 1], v[v_addr:v_addr + 1], off
    s_cmp_eq_u32 s[s_dim], 192
    s_cbranch_scc0 .Lslot_floats\@
    address_of \base, v_t5
    global_load_dword v[\dst + 2], v[v_addr:v_addr + 1], off
.Lslot_floats\@:
    s_waitcnt vmcnt(0)
.endm

// One butterfly stage across lanes at lane distance d (h = d times the slots per lane) on v[slot]: the lane whose
// bit d is clear keeps mine + other, the other other - mine (x_i + x_{i+h}, x_i - x_{i+h}).
.macro butterfly_across slot, d
    v_xor_b32 v[v_t0], \d, v[v_lane]
    v_lshlrev_b32 v[v_t0], 2, v[v_t0]
    ds_bpermute_b32 v[v_other], v[v_t0], v[\slot]
    v_and_b32 v[v_t1], \d, v[v_lane]
    v_cmp_ne_u32 vcc, 0, v[v_t1]
    s_waitcnt lgkmcnt(0)
    v_add_f32 v[v_t2], v[\slot], v[v_other]
    v_sub_f32 v[v_t3], v[v_other], v[\slot]
    v_cndmask_b32 v[\slot], v[v_t2], v[v_t3], vcc
.endm

// Loads row s_token of x into the slots (slot 2 at dim 192 only) and transforms it.
.macro load_and_transform_row
    v_mov_b32 v[v_y + 2], 0                             // stays 0 at dim 128
    add_product s_row, s_xbase, s_token, s_x_ss
    s_cmp_eq_u32 s[s_x_fp32], 0
    s_cbranch_scc1 .Lload_bf16\@
    address_of s_row, v_off
    global_load_dwordx2 v[v_y:v_y + 1], v[v_addr:v_addr + 1], off
    s_cmp_eq_u32 s[s_dim], 192
    s_cbranch_scc0 .Lloaded\@
    address_of s_row, (v_off + 1)
    global_load_dword v[v_y + 2], v[v_addr:v_addr + 1], off
    s_branch .Lloaded\@
.Lload_bf16\@:
    address_of s_row, v_off
    global_load_dword v[v_y], v[v_addr:v_addr + 1], off
    s_cmp_eq_u32 s[s_dim], 192
    s_cbranch_scc0 .Lwidened\@
    address_of s_row, (v_off + 1)
    global_load_ushort v[v_y + 2], v[v_addr:v_addr + 1], off
    s_waitcnt vmcnt(0)
    v_lshlrev_b32 v[v_y + 2], 16, v[v_y + 2]
.Lwidened\@:
    s_waitcnt vmcnt(0)
    v_and_b32 v[v_y + 1], 0xffff0000, v[v_y]
    v_lshlrev_b32 v[v_y], 16, v[v_y]
.Lloaded\@:
    s_waitcnt vmcnt(0)
    .irp j, 0, 1, 2
    v_sub_f32 v[v_y + \j], v[v_y + \j], v[v_shift + \j]
    v_mul_f32 v[v_y + \j], v[v_y + \j], v[v_sign + \j]
    .endr
    s_cmp_eq_u64 s[s_signs:s_signs + 1], 0
    s_cbranch_scc1 .Ltransformed\@
    // the first 128: h = 1 within the lane, then h = 2 .. 64 across lanes 1 .. 32 apart
    v_add_f32 v[v_t2], v[v_y], v[v_y + 1]
    v_sub_f32 v[v_y + 1], v[v_y], v[v_y + 1]
    v_mov_b32 v[v_y], v[v_t2]
    .irp d, 1, 2, 4, 8, 16, 32
    butterfly_across v_y, \d
    butterfly_across (v_y + 1), \d
    .endr
    v_mul_f32 v[v_y], kInvSqrt128Bits, v[v_y]
    v_mul_f32 v[v_y + 1], kInvSqrt128Bits, v[v_y + 1]
    s_cmp_eq_u32 s[s_dim], 192
    s_cbranch_scc0 .Ltransformed\@
    // the next 64: h = 1 .. 32 across lanes
    .irp d, 1, 2, 4, 8, 16, 32
    butterfly_across (v_y + 2), \d
    .endr
    v_mul_f32 v[v_y + 2], kInvSqrt64Bits, v[v_y + 2]
.Ltransformed\@:
.endm

// v[dst] = the e4m3 code of the float32 in v[src] (flashprefill.fp8.e4m3_encode: round to nearest even, subnormals
// exact, magnitudes above 448 and infinities to 448, NaN to 0x7f). Clobbers v_t0 .. v_t7 and vcc, s_mask, s_mask2.
.macro e4m3_code dst, src
    v_lshrrev_b32 v[v_t0], 31, v[\src]
    v_lshlrev_b32 v[v_t0], 7, v[v_t0]                  // sign
    v_and_b32 v[v_t1], 0x7fffffff, v[\src]              // magnitude
    v_lshrrev_b32 v[v_t2], 23, v[v_t1]                  // its float32 exponent field
    // normal: rebias 127 -> 7, round 23 -> 3 mantissa bits, ties to even; a carry moves into the exponent
    v_subrev_u32 v[v_t3], 0x3c000000, v[v_t1]           // magnitude - (120 << 23)
    v_bfe_u32 v[v_t4], v[v_t3], 20, 1
    v_add3_u32 v[v_t3], v[v_t3], s[s_c7ffff], v[v_t4]
    v_lshrrev_b32 v[v_t3], 20, v[v_t3]
    v_min_u32 v[v_t3], 0x7e, v[v_t3]
    // subnormal: round(significand >> shift), shift = min(141 - max(exponent, 1), 31)
    v_and_b32 v[v_t4], 0x7fffff, v[v_t1]
    v_or_b32 v[v_t5], 0x800000, v[v_t4]
    v_cmp_ne_u32 vcc, 0, v[v_t2]
    v_cndmask_b32 v[v_t4], v[v_t4], v[v_t5], vcc        // significand
    v_max_u32 v[v_t5], 1, v[v_t2]
    v_sub_u32 v[v_t5], 141, v[v_t5]
    v_min_u32 v[v_t5], 31, v[v_t5]                      // shift
    v_lshrrev_b32 v[v_t6], v[v_t5], v[v_t4]             // quotient
    v_lshlrev_b32 v[v_t7], v[v_t5], 1
    v_add_u32 v[v_t7], -1, v[v_t7]
    v_and_b32 v[v_t4], v[v_t7], v[v_t4]                 // remainder
    v_add_u32 v[v_t5], -1, v[v_t5]
    v_lshlrev_b32 v[v_t5], v[v_t5], 1                   // half
    v_cmp_gt_u32 s[s_mask:s_mask + 1], v[v_t4], v[v_t5]
    v_cmp_eq_u32 s[s_mask2:s_mask2 + 1], v[v_t4], v[v_t5]
    v_and_b32 v[v_t7], 1, v[v_t6]
    v_cmp_ne_u32 vcc, 0, v[v_t7]
    s_and_b64 vcc, vcc, s[s_mask2:s_mask2 + 1]
    s_or_b64 vcc, vcc, s[s_mask:s_mask + 1]
    v_cndmask_b32 v[v_t7], 0, 1, vcc
    v_add_u32 v[v_t6], v[v_t6], v[v_t7]
    // normal from float32 exponent 121 (2^-6) on
    v_cmp_le_u32 vcc, 121, v[v_t2]
    v_cndmask_b32 v[\dst], v[v_t6], v[v_t3], vcc
    v_or_b32 v[\dst], v[\dst], v[v_t0]
    v_cmp_lt_u32 vcc, 0x7f800000, v[v_t1]
    v_cndmask_b32 v[\dst], v[\dst], v[v_c7f], vcc
.endm

// The largest of v[value] over the wave into every lane (signed or unsigned `max`); clobbers v_t0, v_other.
.macro wave_max value, max
    .irp d, 1, 2, 4, 8, 16, 32
    v_xor_b32 v[v_t0], \d, v[v_lane]
    v_lshlrev_b32 v[v_t0], 2, v[v_t0]
    ds_bpermute_b32 v[v_other], v[v_t0], v[\value]
    s_waitcnt lgkmcnt(0)
    \max v[\value], v[\value], v[v_other]
    .endr
.endm

.text
.globl quantize
.p2align 8
.type quantize, @function
quantize:
    s_load_dwordx16 s[s_args:s_args + 15], s[s_karg:s_karg + 1], 0
    s_load_dwordx8 s[s_args + 16:s_args + 23], s[s_karg:s_karg + 1], 64
    s_load_dwordx4 s[s_args + 24:s_args + 27], s[s_karg:s_karg + 1], 96
    v_and_b32 v[v_lane], 63, v0
    s_mov_b32 s[s_c7ffff], 0x7ffff
    v_mov_b32 v[v_c7f], 0x7f
    s_waitcnt lgkmcnt(0)
    // row bases of this (batch, head)
    add_product64 s_xbase, s_x, s_x_sb, s_batch
    add_product s_xbase, s_xbase, s_head, s_x_sh
    add_product64 s_cbase, s_codes, s_c_sb, s_batch
    add_product s_cbase, s_cbase, s_head, s_c_sh
    // byte offsets of slot 0 (elements 2 lane, 2 lane + 1) and slot 2 (element 128 + lane)
    s_cmp_eq_u32 s[s_x_fp32], 0
    s_cselect_b32 s[s_t0], 1, 2                         // log2 of the element's bytes
    v_lshlrev_b32 v[v_off], 1, v[v_lane]
    v_lshlrev_b32 v[v_off], s[s_t0], v[v_off]
    v_add_u32 v[v_off + 1], 128, v[v_lane]
    v_lshlrev_b32 v[v_off + 1], s[s_t0], v[v_off + 1]
    v_lshlrev_b32 v[v_coff], 1, v[v_lane]
    v_add_u32 v[v_coff + 1], 128, v[v_lane]
    // signs and subtracted means of the slots
    .irp j, 0, 1, 2
    v_mov_b32 v[v_sign + \j], 1.0
    v_mov_b32 v[v_shift + \j], 0
    .endr
    v_lshlrev_b32 v[v_t4], 3, v[v_lane]                 // 4 bytes x element 2 lane
    v_add_u32 v[v_t5], 128, v[v_lane]
    v_lshlrev_b32 v[v_t5], 2, v[v_t5]                   // 4 bytes x element 128 + lane
    s_cmp_eq_u64 s[s_signs:s_signs + 1], 0
    s_cbranch_scc1 .Lno_signs
    load_slot_floats v_sign, s_signs
.Lno_signs:
    s_mul_i32 s[s_t2], s[s_batch], s[s_heads]
    s_add_u32 s[s_t2], s[s_t2], s[s_head]               // this (batch, head)'s index
    s_cmp_eq_u64 s[s_subtract:s_subtract + 1], 0
    s_cbranch_scc1 .Lno_subtract
    s_lshl_b32 s[s_t3], s[s_dim], 2                     // bytes of one (batch, head)'s vector
    add_product s_row, s_subtract, s_t2, s_t3
    load_slot_floats v_shift, s_row
.Lno_subtract:
    // the block's rows and this (batch, head)'s exponents
    s_mul_i32 s[s_token], s[s_block], s[s_block_tokens]
    s_add_u32 s[s_token_end], s[s_token], s[s_block_tokens]
    s_min_u32 s[s_token_end], s[s_token_end], s[s_seqlen]
    add_product s_eaddr, s_exponents, s_t2, s_blocks
    s_cmp_eq_u32 s[s_phase], 0
    s_cbranch_scc0 .Lphase1

// ---- phase 0: the block's own exponent -----------------------------------------------------------------------
    v_mov_b32 v[v_amax], 0
    v_mov_b32 v[v_bad], 0
.Lamax_row:
    load_and_transform_row
    .irp j, 0, 1, 2
    v_and_b32 v[v_t4], 0x7fffffff, v[v_y + \j]
    v_cmp_gt_u32 vcc, 0x7f800000, v[v_t4]               // finite
    v_cndmask_b32 v[v_t5], 1, 0, vcc
    v_or_b32 v[v_bad], v[v_bad], v[v_t5]
    v_cndmask_b32 v[v_t4], 0, v[v_t4], vcc
    v_max_u32 v[v_amax], v[v_amax], v[v_t4]
    .endr
    s_add_u32 s[s_token], s[s_token], 1
    s_cmp_lt_u32 s[s_token], s[s_token_end]
    s_cbranch_scc1 .Lamax_row
    wave_max v_amax, v_max_u32
    wave_max v_bad, v_max_u32
    // amax = f 2^k and code_max = g 2^c, f and g in [0.5, 1): amax <= code_max 2^e  <=>  e >= k - c + (f > g)
    v_lshrrev_b32 v[v_t1], 23, v[v_amax]                // exponent field (0: a float32 subnormal)
    v_cmp_eq_u32 vcc, 0, v[v_t1]
    v_mul_f32 v[v_t2], kTwoPow64Bits, v[v_amax]         // a subnormal made normal, exactly
    v_cndmask_b32 v[v_t2], v[v_amax], v[v_t2], vcc
    v_cndmask_b32 v[v_t3], 0, 64, vcc
    v_lshrrev_b32 v[v_t1], 23, v[v_t2]
    v_sub_u32 v[v_t1], v[v_t1], v[v_t3]
    v_subrev_u32 v[v_t1], 126, v[v_t1]                  // k
    v_subrev_u32 v[v_t1], s[s_cm_exponent], v[v_t1]     // k - c
    v_and_b32 v[v_t2], 0x7fffff, v[v_t2]
    v_cmp_lt_u32 vcc, s[s_cm_mantissa], v[v_t2]         // f > g
    v_cndmask_b32 v[v_t3], 0, 1, vcc
    v_add_u32 v[v_t1], v[v_t1], v[v_t3]
    v_max_i32 v[v_t1], -127, v[v_t1]
    v_min_i32 v[v_t1], 127, v[v_t1]
    v_cmp_eq_u32 vcc, 0, v[v_amax]
    v_mov_b32 v[v_t2], kZeroBlock
    v_cndmask_b32 v[v_t1], v[v_t1], v[v_t2], vcc
    v_cmp_ne_u32 vcc, 0, v[v_bad]
    v_cndmask_b32 v[v_t1], v[v_t1], 0, vcc
    v_mov_b32 v[v_t0], s[s_block]
    address_of s_eaddr, v_t0
    s_mov_b64 exec, 1
    global_store_byte v[v_addr:v_addr + 1], v[v_t1], off
    s_endpgm

// ---- phase 1: the final exponent, then the codes ------------------------------------------------------------------
.Lphase1:
    // the head's largest exponent over its blocks that are not all zero
    v_mov_b32 v[v_t6], kNoExponent
    s_mov_b32 s[s_chunk], 0
.Lchunk:
    v_add_u32 v[v_t5], s[s_chunk], v[v_lane]
    v_cmp_gt_i32 vcc, s[s_blocks], v[v_t5]
    s_and_saveexec_b64 s[s_exec_save:s_exec_save + 1], vcc
    address_of s_eaddr, v_t5
    global_load_sbyte v[v_t4], v[v_addr:v_addr + 1], off
    s_waitcnt vmcnt(0)
    v_cmp_ne_i32 vcc, kZeroBlock, v[v_t4]
    v_mov_b32 v[v_t3], kNoExponent
    v_cndmask_b32 v[v_t4], v[v_t3], v[v_t4], vcc
    v_max_i32 v[v_t6], v[v_t6], v[v_t4]
    s_mov_b64 exec, s[s_exec_save:s_exec_save + 1]
    s_add_u32 s[s_chunk], s[s_chunk], 64
    s_cmp_lt_u32 s[s_chunk], s[s_blocks]
    s_cbranch_scc1 .Lchunk
    wave_max v_t6, v_max_i32
    v_cmp_eq_i32 vcc, kNoExponent, v[v_t6]
    v_cndmask_b32 v[v_t6], v[v_t6], 0, vcc              // top
    // this block: a zero block takes top, the others at least top - kExponentSpan
    v_mov_b32 v[v_t0], s[s_block]
    address_of s_eaddr, v_t0
    global_load_sbyte v[v_t4], v[v_addr:v_addr + 1], off
    s_waitcnt vmcnt(0)
    v_subrev_u32 v[v_t5], kExponentSpan, v[v_t6]
    v_max_i32 v[v_t5], v[v_t4], v[v_t5]
    v_cmp_eq_i32 vcc, kZeroBlock, v[v_t4]
    v_cndmask_b32 v[v_t4], v[v_t5], v[v_t6], vcc        // final e
    s_mov_b64 s[s_exec_save:s_exec_save + 1], exec
    s_mov_b64 exec, 1
    global_store_byte v[v_addr:v_addr + 1], v[v_t4], off
    s_mov_b64 exec, s[s_exec_save:s_exec_save + 1]
    // 2^-e as float32: (127 - e) << 23, and 2^-127 (e = 127) the subnormal 0x00400000
    v_sub_u32 v[v_t5], 127, v[v_t4]
    v_lshlrev_b32 v[v_t5], 23, v[v_t5]
    v_cmp_eq_u32 vcc, 127, v[v_t4]
    v_mov_b32 v[v_t3], 0x400000
    v_cndmask_b32 v[v_t5], v[v_t5], v[v_t3], vcc
    v_readfirstlane_b32 s[s_scale], v[v_t5]
.Lcode_row:
    load_and_transform_row
    .irp j, 0, 1, 2
    v_mul_f32 v[v_y + \j], s[s_scale], v[v_y + \j]      // exact but for float32 subnormals (one rounding)
    e4m3_code (v_code + \j), (v_y + \j)
    .endr
    add_product s_row, s_cbase, s_token, s_c_ss
    v_lshlrev_b32 v[v_t0], 8, v[v_code + 1]
    v_or_b32 v[v_t0], v[v_t0], v[v_code]
    address_of s_row, v_coff
    global_store_short v[v_addr:v_addr + 1], v[v_t0], off
    s_cmp_eq_u32 s[s_dim], 192
    s_cbranch_scc0 .Lcoded
    address_of s_row, (v_coff + 1)
    global_store_byte v[v_addr:v_addr + 1], v[v_code + 2], off
.Lcoded:
    s_add_u32 s[s_token], s[s_token], 1
    s_cmp_lt_u32 s[s_token], s[s_token_end]
    s_cbranch_scc1 .Lcode_row
    s_endpgm
.size quantize, . - quantize

.rodata
.p2align 6
.amdhsa_kernel quantize
    .amdhsa_user_sgpr_kernarg_segment_ptr 1
    .amdhsa_system_sgpr_workgroup_id_x 1
    .amdhsa_system_sgpr_workgroup_id_y 1
    .amdhsa_system_sgpr_workgroup_id_z 1
    .amdhsa_system_vgpr_workitem_id 0
    .amdhsa_kernarg_size karg_size
    .amdhsa_group_segment_fixed_size 0
    .amdhsa_float_denorm_mode_32 3      // float32 subnormals kept, in and out (the model's IEEE arithmetic)
    .amdhsa_next_free_vgpr ((.amdgcn.next_free_vgpr + 7) / 8) * 8
    .amdhsa_next_free_sgpr .amdgcn.next_free_sgpr
    .amdhsa_accum_offset ((.amdgcn.next_free_vgpr + 7) / 8) * 8
.end_amdhsa_kernel

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: quantize
    .symbol: quantize.kd
    .kernarg_segment_size: 112
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .max_flat_workgroup_size: 64
    .sgpr_count: 60
    .vgpr_count: 36
    .agpr_count: 0
    .args:
      - { .size: 112, .offset: 0, .value_kind: by_value }
...
.end_amdgpu_metadata
