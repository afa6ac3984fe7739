// merge_state_f32_f32: flashprefill_merge_state from f32 parts to a f32 out on gfx950 (merge_state.inc).
.set kInFp32, 1
.set kOutFp32, 1
.include "merge_state.inc"
merge_state_kernel merge_state_f32_f32
