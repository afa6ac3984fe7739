// quantize_paged_d128: flashprefill_quantize_paged at dim 128 on gfx950 (quantize_paged.inc).
.set kDim, 128
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d128
