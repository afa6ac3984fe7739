// quantize_paged_d160: flashprefill_quantize_paged at dim 160 on gfx950 (quantize_paged.inc).
.set kDim, 160
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d160
