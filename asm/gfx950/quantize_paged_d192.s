// quantize_paged_d192: flashprefill_quantize_paged at dim 192 on gfx950 (quantize_paged.inc).
.set kDim, 192
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d192
