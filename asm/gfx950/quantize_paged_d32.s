// quantize_paged_d32: flashprefill_quantize_paged at dim 32 on gfx950 (quantize_paged.inc).
.set kDim, 32
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d32
