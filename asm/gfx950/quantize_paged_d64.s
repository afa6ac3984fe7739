// quantize_paged_d64: flashprefill_quantize_paged at dim 64 on gfx950 (quantize_paged.inc).
.set kDim, 64
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d64
