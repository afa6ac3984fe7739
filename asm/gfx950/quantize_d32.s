// quantize_d32: flashprefill_quantize at dim 32 on gfx950 (quantize.inc).
.set kDim, 32
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d32
