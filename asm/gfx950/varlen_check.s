// varlen_check: the check of a varlen or paged flashprefill_forward call's device arrays on gfx950, the Hopper plan
// kernel's checks (cuda/varlen_plan.cu) in the same order with the same verdict, launched before the forward kernel
// on its stream (hip/varlen_check_launch.c). One wave, a lane per sequence, 64 sequences a step:
//   1. cu_seqlens_q, cu_seqlens_k, seqused_k, the lengths against max_seqlen_q / _k; each sequence's offsets and key
//      count copied into the workspace as they are read;
//   2. with a paged cache, the page ids of each sequence found valid so far (its own lane, kPagesAtOnce loads in
//      flight, unsigned against num_pages), the lowest bad one its fault;
//   3. the first step holding a fault ends the scan, its lowest faulty lane the verdict (the least sequence, as the
//      Hopper kernel's least b * 8 + error): the workspace header {error, sequence, value, 0}. On a fault the copies
//      become all zero (every sequence empty, so the forward kernel, which reads the copies, reads nothing of the
//      call's arrays) and every element of out and lse becomes NaN.
// A plain kernel, never run on an MI355X.

.amdgcn_target "amdgcn-amd-amdhsa--gfx950"

.set kDimV, 128                               // the gfx950 forward kernels' dim_v
.set kPieceShift, 4                           // 16-byte pieces of an out row
.set kPiecesPerHead, kDimV * 2 >> kPieceShift // 16: lanes per (row, head) of bf16 out
.set kHeadsPerStore, 64 / kPiecesPerHead      // 4
.set kBf16NanPair, 0x7fc07fc0
.set kNanBits, 0x7fc00000
.set kPagesAtOnce, 16                         // page-id loads a lane has in flight
// fp_varlen_error (src/launch_common.h; tests/test_gfx950_static.py holds them equal)
.set kVarlenCuSeqlensQ, 1
.set kVarlenSeqlenQ, 2
.set kVarlenCuSeqlensK, 3
.set kVarlenSeqlenK, 4
.set kVarlenSequsedK, 5
.set kVarlenBlockTable, 6

// ---- kernel arguments (byte offsets; hip/varlen_check_kernarg.h, checked by tests/test_gfx950_static.py) --------
.set karg_cu_seqlens_q, 0
.set karg_cu_seqlens_k, 8
.set karg_seqused_k, 16
.set karg_block_table, 24
.set karg_header, 32
.set karg_copy_q, 40
.set karg_copy_k, 48
.set karg_copy_used, 56
.set karg_out, 64
.set karg_lse, 72
.set karg_out_stride_seq, 80
.set karg_out_stride_head, 84
.set karg_batch, 88
.set karg_total_q, 92
.set karg_total_k, 96
.set karg_max_seqlen_q, 100
.set karg_max_seqlen_k, 104
.set karg_block_table_stride, 108
.set karg_page_size_log2, 112
.set karg_num_pages, 116
.set karg_heads_q, 120
.set karg_size, 128

// ---- SGPRs ------------------------------------------------------------------------------------------------------
.equiv s_karg, 0          // s[0:1]
.equiv s_args, 4          // s[4:35]: kernel argument dword i in s[s_args + i]
.equiv s_cu_q, s_args + karg_cu_seqlens_q / 4
.equiv s_cu_k, s_args + karg_cu_seqlens_k / 4
.equiv s_used, s_args + karg_seqused_k / 4
.equiv s_table, s_args + karg_block_table / 4
.equiv s_header, s_args + karg_header / 4
.equiv s_copy_q, s_args + karg_copy_q / 4
.equiv s_copy_k, s_args + karg_copy_k / 4
.equiv s_copy_used, s_args + karg_copy_used / 4
.equiv s_out, s_args + karg_out / 4
.equiv s_lse, s_args + karg_lse / 4
.equiv s_out_ss, s_args + karg_out_stride_seq / 4
.equiv s_out_sh, s_args + karg_out_stride_head / 4
.equiv s_batch, s_args + karg_batch / 4
.equiv s_total_q, s_args + karg_total_q / 4
.equiv s_total_k, s_args + karg_total_k / 4
.equiv s_max_q, s_args + karg_max_seqlen_q / 4
.equiv s_max_k, s_args + karg_max_seqlen_k / 4
.equiv s_bts, s_args + karg_block_table_stride / 4
.equiv s_page_log2, s_args + karg_page_size_log2 / 4
.equiv s_num_pages, s_args + karg_num_pages / 4
.equiv s_heads, s_args + karg_heads_q / 4
.equiv s_base, 36         // the first sequence of a step; later the first row of lse of a step
.equiv s_fault_b, 37      // the first sequence at fault (batch: none)
.equiv s_fault_code, 38
.equiv s_fault_value, 39
.equiv s_t0, 40
.equiv s_t1, 41
.equiv s_mask, 42         // s[42:43]
.equiv s_exec, 44         // s[44:45] EXEC before a masked part
.equiv s_row, 46          // s[46:47] a table row's or an out row's address
.equiv s_exec_pages, 48   // s[48:49] the step's lanes, across the page loop
.equiv s_count, 50        // poisoning lse: its elements
.equiv s_j, 54            // the first page of a page step; poisoning out: the first head of a store
.equiv s_rows, 51         // the keys a paged sequence's table row holds: block_table_stride << page_size_log2
.equiv s_step, 52         // bytes between two heads of a store's four
.equiv s_bts_bytes, 53    // block_table_stride * 4
.equiv s_carry, 56        // s[56:57] v_mad_u64_u32's carry-out, unused
.equiv s_page_mask, 58    // s[58:59]
.set s_end, 60

// ---- VGPRs ------------------------------------------------------------------------------------------------------
.equiv v_lane, 1
.equiv v_b, 2
.equiv v_off, 3           // 4 b: sequence b's offset in the int32 arrays
.equiv v_q0, 4
.equiv v_q1, 5
.equiv v_k0, 6
.equiv v_k1, 7
.equiv v_used, 8
.equiv v_rows, 9          // the keys sequence b holds: k1 - k0, or s_rows
.equiv v_seqlen_k, 10
.equiv v_code, 11         // its fault (0: none) and the value at fault
.equiv v_value, 12
.equiv v_t0, 13
.equiv v_page, 14
.equiv v_head, 15         // poisoning: the lane's head within a store's four, its byte offset in out's row
.equiv v_poff, 16
.equiv v_nan, 20          // v[20:23] bf16 NaNs
.equiv v_word, 24         // v[24:27] the header, and the zeros of the copies
.equiv v_count, 28        // paged: the pages of the lane's sequence (0 where it is at fault)
.equiv v_last, 29         // count - 1
.equiv v_found, 30        // 1 once a bad page is found, v_bad_page its id
.equiv v_bad_page, 31
.equiv v_j, 32            // s_j
.equiv v_row, 34          // v[34:35] the sequence's row of block_table
.equiv v_pages, 36        // v[36:51] kPagesAtOnce page ids
.equiv v_paddr, 52        // v[52:83] their addresses
.set v_end, 84

.include "scalar_address.inc"

// v[code], v[value] = code, v[value_reg] where VCC, right after the compare that wrote VCC
.macro fault_where code, value_reg
    s_nop 1                                     // gfx940+: a VALU write of VCC, 2 wait states before a VALU reads it
    fault_where_now \code, \value_reg
.endm
.macro fault_where_now code, value_reg
    v_cndmask_b32 v[v_code], v[v_code], \code, vcc
    v_cndmask_b32 v[v_value], v[v_value], v[\value_reg], vcc
.endm

// v[code], v[value] = code, v[value_reg] where s[mask] | VCC (a VOPC result in s[mask], the other just in VCC)
.macro fault_where_either mask, code, value_reg
    s_or_b64 vcc, vcc, s[\mask:\mask + 1]
    s_nop 0                                     // the compare's VCC: 2 wait states, the s_or_b64 one of them
    fault_where_now \code, \value_reg
.endm

.text
.globl varlen_check
.p2align 8
.type varlen_check, @function
varlen_check:
    s_load_dwordx16 s[s_args:s_args + 15], s[s_karg:s_karg + 1], 0
    s_load_dwordx16 s[s_args + 16:s_args + 31], s[s_karg:s_karg + 1], 64
    v_and_b32 v[v_lane], 63, v0
    s_waitcnt lgkmcnt(0)
    s_lshl_b32 s[s_rows], s[s_bts], s[s_page_log2]
    s_lshl_b32 s[s_bts_bytes], s[s_bts], 2
    s_mov_b32 s[s_fault_b], s[s_batch]
    s_mov_b32 s[s_fault_code], 0
    s_mov_b32 s[s_fault_value], 0
    s_mov_b32 s[s_base], 0

// ---- 1. each sequence's offsets, lengths and pages -------------------------------------------------------------
.Lsequences:
    v_add_u32 v[v_b], s[s_base], v[v_lane]
    v_cmp_gt_i32 vcc, s[s_batch], v[v_b]
    s_and_saveexec_b64 s[s_exec:s_exec + 1], vcc
    v_lshlrev_b32 v[v_off], 2, v[v_b]
    global_load_dword v[v_q0], v[v_off], s[s_cu_q:s_cu_q + 1]
    global_load_dword v[v_q1], v[v_off], s[s_cu_q:s_cu_q + 1] offset:4
    v_mov_b32 v[v_k0], 0
    v_mov_b32 v[v_k1], s[s_rows]
    s_cmp_eq_u64 s[s_cu_k:s_cu_k + 1], 0
    s_cbranch_scc1 .Lk_issued
    global_load_dword v[v_k0], v[v_off], s[s_cu_k:s_cu_k + 1]
    global_load_dword v[v_k1], v[v_off], s[s_cu_k:s_cu_k + 1] offset:4
.Lk_issued:
    s_cmp_eq_u64 s[s_used:s_used + 1], 0
    s_cbranch_scc1 .Lused_issued
    global_load_dword v[v_used], v[v_off], s[s_used:s_used + 1]
.Lused_issued:
    s_waitcnt vmcnt(0)
    v_sub_u32 v[v_rows], v[v_k1], v[v_k0]
    v_mov_b32 v[v_seqlen_k], v[v_rows]
    s_cmp_eq_u64 s[s_used:s_used + 1], 0
    s_cbranch_scc1 .Lseqlen_k_known
    v_mov_b32 v[v_seqlen_k], v[v_used]
.Lseqlen_k_known:
    // the copies, as read (overwritten with zeros if any sequence is at fault)
    global_store_dword v[v_off], v[v_q0], s[s_copy_q:s_copy_q + 1]
    global_store_dword v[v_off], v[v_q1], s[s_copy_q:s_copy_q + 1] offset:4
    global_store_dword v[v_off], v[v_seqlen_k], s[s_copy_used:s_copy_used + 1]
    s_cmp_eq_u64 s[s_cu_k:s_cu_k + 1], 0
    s_cbranch_scc1 .Lk_copied
    global_store_dword v[v_off], v[v_k0], s[s_copy_k:s_copy_k + 1]
    global_store_dword v[v_off], v[v_k1], s[s_copy_k:s_copy_k + 1] offset:4
.Lk_copied:
    // the faults from the last checked to the first, so that the first one found wins (the Hopper order)
    v_mov_b32 v[v_code], 0
    v_mov_b32 v[v_value], 0
    v_cmp_lt_i32 vcc, s[s_max_k], v[v_seqlen_k]
    fault_where kVarlenSeqlenK, v_seqlen_k
    s_cmp_eq_u64 s[s_used:s_used + 1], 0
    s_cbranch_scc1 .Lused_checked
    v_cmp_gt_u32 vcc, v[v_seqlen_k], v[v_rows]  // unsigned: a negative length too
    fault_where kVarlenSequsedK, v_seqlen_k
.Lused_checked:
    s_cmp_eq_u64 s[s_cu_k:s_cu_k + 1], 0
    s_cbranch_scc1 .Lk_checked
    v_cmp_lt_i32 vcc, s[s_total_k], v[v_k1]
    fault_where kVarlenCuSeqlensK, v_k1
    v_cmp_gt_i32 s[s_mask:s_mask + 1], 0, v[v_k0]
    v_cmp_lt_i32 vcc, v[v_k1], v[v_k0]
    fault_where_either s_mask, kVarlenCuSeqlensK, v_k0
.Lk_checked:
    v_sub_u32 v[v_t0], v[v_q1], v[v_q0]
    v_cmp_lt_i32 vcc, s[s_max_q], v[v_t0]
    fault_where kVarlenSeqlenQ, v_t0
    v_cmp_lt_i32 vcc, s[s_total_q], v[v_q1]
    fault_where kVarlenCuSeqlensQ, v_q1
    v_cmp_gt_i32 s[s_mask:s_mask + 1], 0, v[v_q0]
    v_cmp_lt_i32 vcc, v[v_q1], v[v_q0]
    fault_where_either s_mask, kVarlenCuSeqlensQ, v_q0
    // a paged cache: each lane's own sequence's page ids, if it is valid so far
    s_cmp_eq_u64 s[s_table:s_table + 1], 0
    s_cbranch_scc1 .Lpages_checked
    s_lshl_b32 s[s_t0], 1, s[s_page_log2]
    s_sub_u32 s[s_t0], s[s_t0], 1
    v_add_u32 v[v_count], s[s_t0], v[v_seqlen_k]
    v_lshrrev_b32 v[v_count], s[s_page_log2], v[v_count]  // ceil(keys / page_size), keys within the row: checked
    v_cmp_eq_u32 vcc, 0, v[v_code]
    s_nop 1
    v_cndmask_b32 v[v_count], 0, v[v_count], vcc
    v_add_u32 v[v_last], -1, v[v_count]
    v_mov_b32 v[v_t0], s[s_bts_bytes]
    v_mad_u64_u32 v[v_row:v_row + 1], s[s_carry:s_carry + 1], v[v_b], v[v_t0], s[s_table:s_table + 1]
    v_mov_b32 v[v_found], 0
    v_mov_b32 v[v_bad_page], 0
    s_mov_b32 s[s_j], 0
    s_mov_b64 s[s_exec_pages:s_exec_pages + 1], exec
.Lpage_step:
    v_cmp_lt_u32 vcc, s[s_j], v[v_count]        // pages left
    v_cmp_eq_u32 s[s_page_mask:s_page_mask + 1], 0, v[v_found]
    s_and_b64 vcc, vcc, s[s_page_mask:s_page_mask + 1]
    s_and_b64 exec, s[s_exec_pages:s_exec_pages + 1], vcc
    s_cbranch_execz .Lpages_done
    v_mov_b32 v[v_j], s[s_j]
    // entries min(j + i, count - 1): never past the sequence's pages, so never past the table
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    v_add_u32 v[v_t0], \i, v[v_j]
    v_min_u32 v[v_t0], v[v_t0], v[v_last]
    v_lshlrev_b32 v[v_t0], 2, v[v_t0]
    v_mad_u64_u32 v[v_paddr + 2 * \i:v_paddr + 2 * \i + 1], s[s_carry:s_carry + 1], v[v_t0], 1, v[v_row:v_row + 1]
    global_load_dword v[v_pages + \i], v[v_paddr + 2 * \i:v_paddr + 2 * \i + 1], off
    .endr
    s_waitcnt vmcnt(0)
    // the lowest bad one among them (from the last down, so that the lowest is written last)
    .irp i, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0
    v_cmp_le_u32 s[s_page_mask:s_page_mask + 1], s[s_num_pages], v[v_pages + \i]  // unsigned: a negative id too
    v_add_u32 v[v_t0], \i, v[v_j]
    v_cmp_lt_u32 vcc, v[v_t0], v[v_count]
    s_and_b64 vcc, vcc, s[s_page_mask:s_page_mask + 1]
    s_nop 0                                     // the compare's VCC: 2 wait states, the s_and_b64 one of them
    v_cndmask_b32 v[v_found], v[v_found], 1, vcc
    v_cndmask_b32 v[v_bad_page], v[v_bad_page], v[v_pages + \i], vcc
    .endr
    s_add_u32 s[s_j], s[s_j], kPagesAtOnce
    s_branch .Lpage_step
.Lpages_done:
    s_mov_b64 exec, s[s_exec_pages:s_exec_pages + 1]
    v_cmp_ne_u32 vcc, 0, v[v_found]             // found only where the sequence had no other fault
    fault_where kVarlenBlockTable, v_bad_page
.Lpages_checked:
    // the first lane at fault, if any, ends the scan
    v_cmp_ne_u32 vcc, 0, v[v_code]
    s_mov_b64 exec, s[s_exec:s_exec + 1]
    s_cmp_eq_u64 vcc, 0
    s_cbranch_scc1 .Lstep_valid
    s_ff1_i32_b64 s[s_t0], vcc
    s_add_u32 s[s_fault_b], s[s_base], s[s_t0]
    v_readlane_b32 s[s_fault_code], v[v_code], s[s_t0]
    v_readlane_b32 s[s_fault_value], v[v_value], s[s_t0]
    s_branch .Lverdict
.Lstep_valid:
    s_add_u32 s[s_base], s[s_base], 64
    s_cmp_lt_u32 s[s_base], s[s_batch]
    s_cbranch_scc1 .Lsequences

// ---- 2. the verdict ------------------------------------------------------------------------------------------
.Lverdict:
    v_mov_b32 v[v_word], s[s_fault_code]
    v_mov_b32 v[v_word + 1], s[s_fault_b]
    v_mov_b32 v[v_word + 2], s[s_fault_value]
    v_mov_b32 v[v_word + 3], 0
    s_cmp_lt_u32 s[s_fault_b], s[s_batch]
    s_cbranch_scc1 .Lfault
    v_mov_b32 v[v_word + 1], 0                  // valid: {0, 0, 0, 0}
    v_mov_b32 v[v_word + 2], 0
.Lfault:
    v_cmp_eq_u32 vcc, 0, v[v_lane]
    s_and_saveexec_b64 s[s_exec:s_exec + 1], vcc
    v_mov_b32 v[v_t0], 0
    global_store_dwordx4 v[v_t0], v[v_word:v_word + 3], s[s_header:s_header + 1]
    s_mov_b64 exec, s[s_exec:s_exec + 1]
    s_cmp_lt_u32 s[s_fault_b], s[s_batch]
    s_cbranch_scc1 .Lempty_copies
    s_endpgm

// every sequence empty for the forward kernel: the copies all zero (batch + 1 offsets, batch lengths)
.Lempty_copies:
    v_mov_b32 v[v_word], 0
    s_mov_b32 s[s_base], 0
.Lzero_step:
    v_add_u32 v[v_b], s[s_base], v[v_lane]
    v_cmp_ge_i32 vcc, s[s_batch], v[v_b]        // b <= batch: the offsets' last entry too
    s_and_saveexec_b64 s[s_exec:s_exec + 1], vcc
    v_lshlrev_b32 v[v_off], 2, v[v_b]
    global_store_dword v[v_off], v[v_word], s[s_copy_q:s_copy_q + 1]
    s_cmp_eq_u64 s[s_cu_k:s_cu_k + 1], 0
    s_cbranch_scc1 .Lk_zeroed
    global_store_dword v[v_off], v[v_word], s[s_copy_k:s_copy_k + 1]
.Lk_zeroed:
    v_cmp_gt_i32 vcc, s[s_batch], v[v_b]
    s_and_b64 exec, exec, vcc
    global_store_dword v[v_off], v[v_word], s[s_copy_used:s_copy_used + 1]
    s_mov_b64 exec, s[s_exec:s_exec + 1]
    s_add_u32 s[s_base], s[s_base], 64
    s_cmp_le_u32 s[s_base], s[s_batch]
    s_cbranch_scc1 .Lzero_step

// out NaN: every row, kHeadsPerStore heads a store (lane: head lane / kPiecesPerHead, its piece lane % it)
    .irp i, 0, 1, 2, 3
    v_mov_b32 v[v_nan + \i], kBf16NanPair
    .endr
    v_lshrrev_b32 v[v_head], kPieceShift, v[v_lane]
    v_and_b32 v[v_t0], kPiecesPerHead - 1, v[v_lane]
    v_lshlrev_b32 v[v_t0], kPieceShift, v[v_t0]
    v_mul_lo_u32 v[v_poff], v[v_head], s[s_out_sh]
    v_add_u32 v[v_poff], v[v_poff], v[v_t0]     // the lane's offset in a row at the store's first head 0
    s_mul_i32 s[s_step], s[s_out_sh], kHeadsPerStore
    s_mov_b64 s[s_row:s_row + 1], s[s_out:s_out + 1]
    s_mov_b32 s[s_base], 0
.Lpoison_row:
    v_mov_b32 v[v_t0], v[v_poff]
    s_mov_b32 s[s_j], 0
.Lpoison_heads:
    s_sub_u32 s[s_t0], s[s_heads], s[s_j]
    v_cmp_gt_u32 vcc, s[s_t0], v[v_head]
    s_and_saveexec_b64 s[s_exec:s_exec + 1], vcc
    global_store_dwordx4 v[v_t0], v[v_nan:v_nan + 3], s[s_row:s_row + 1]
    s_mov_b64 exec, s[s_exec:s_exec + 1]
    v_add_u32 v[v_t0], s[s_step], v[v_t0]
    s_add_u32 s[s_j], s[s_j], kHeadsPerStore
    s_cmp_lt_u32 s[s_j], s[s_heads]
    s_cbranch_scc1 .Lpoison_heads
    s_add_u32 s[s_row], s[s_row], s[s_out_ss]
    s_addc_u32 s[s_row + 1], s[s_row + 1], 0
    s_add_u32 s[s_base], s[s_base], 1
    s_cmp_lt_u32 s[s_base], s[s_total_q]
    s_cbranch_scc1 .Lpoison_row
// lse NaN: heads_q total_q floats, 64 a step
    s_cmp_eq_u64 s[s_lse:s_lse + 1], 0
    s_cbranch_scc1 .Ldone
    v_mov_b32 v[v_word], kNanBits
    v_lshlrev_b32 v[v_off], 2, v[v_lane]
    s_mul_i32 s[s_count], s[s_heads], s[s_total_q]
    s_mov_b64 s[s_row:s_row + 1], s[s_lse:s_lse + 1]
    s_mov_b32 s[s_base], 0
.Lpoison_lse:
    s_sub_u32 s[s_t0], s[s_count], s[s_base]
    v_cmp_gt_u32 vcc, s[s_t0], v[v_lane]
    s_and_saveexec_b64 s[s_exec:s_exec + 1], vcc
    global_store_dword v[v_off], v[v_word], s[s_row:s_row + 1]
    s_mov_b64 exec, s[s_exec:s_exec + 1]
    s_add_u32 s[s_row], s[s_row], 256
    s_addc_u32 s[s_row + 1], s[s_row + 1], 0
    s_add_u32 s[s_base], s[s_base], 64
    s_cmp_lt_u32 s[s_base], s[s_count]
    s_cbranch_scc1 .Lpoison_lse
.Ldone:
    s_endpgm
.size varlen_check, . - varlen_check

.rodata
.p2align 6
.amdhsa_kernel varlen_check
    .amdhsa_user_sgpr_kernarg_segment_ptr 1
    .amdhsa_system_sgpr_workgroup_id_x 1
    .amdhsa_system_vgpr_workitem_id 0
    .amdhsa_kernarg_size karg_size
    .amdhsa_group_segment_fixed_size 0
    .amdhsa_next_free_vgpr ((v_end + 7) / 8) * 8
    .amdhsa_next_free_sgpr .amdgcn.next_free_sgpr
    .amdhsa_accum_offset ((v_end + 7) / 8) * 8
.end_amdhsa_kernel

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: varlen_check
    .symbol: varlen_check.kd
    .kernarg_segment_size: 128
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .max_flat_workgroup_size: 64
    .sgpr_count: 60
    .vgpr_count: 84
    .agpr_count: 0
    .args:
      - { .size: 128, .offset: 0, .value_kind: by_value }
...
.end_amdgpu_metadata
