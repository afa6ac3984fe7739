// quantize_d192: flashprefill_quantize at dim 192 on gfx950 (quantize.inc).
.set kDim, 192
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d192
