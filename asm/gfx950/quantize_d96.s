// quantize_d96: flashprefill_quantize at dim 96 on gfx950 (quantize.inc).
.set kDim, 96
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d96
