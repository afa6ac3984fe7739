// quantize_d64: flashprefill_quantize at dim 64 on gfx950 (quantize.inc).
.set kDim, 64
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d64
