// quantize_paged_d256: flashprefill_quantize_paged at dim 256 on gfx950 (quantize_paged.inc).
.set kDim, 256
.include "quantize_rows.inc"
.include "quantize_paged.inc"
quantize_paged_kernel quantize_paged_d256
