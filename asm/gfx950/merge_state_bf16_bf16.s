// merge_state_bf16_bf16: flashprefill_merge_state from bf16 parts to a bf16 out on gfx950 (merge_state.inc).
.set kInFp32, 0
.set kOutFp32, 0
.include "merge_state.inc"
merge_state_kernel merge_state_bf16_bf16
