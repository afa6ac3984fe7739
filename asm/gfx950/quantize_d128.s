// quantize_d128: flashprefill_quantize at dim 128 on gfx950 (quantize.inc).
.set kDim, 128
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d128
