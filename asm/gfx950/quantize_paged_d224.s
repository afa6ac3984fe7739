// quantize_paged_d224: flashprefill_quantize_paged at dim 224 on gfx950 (quantize_paged.inc).
.set kDim, 224
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d224
