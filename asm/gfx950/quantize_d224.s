// quantize_d224: flashprefill_quantize at dim 224 on gfx950 (quantize.inc).
.set kDim, 224
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d224
