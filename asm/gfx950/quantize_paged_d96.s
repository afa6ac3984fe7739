// quantize_paged_d96: flashprefill_quantize_paged at dim 96 on gfx950 (quantize_paged.inc).
.set kDim, 96
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d96
