// quantize_d160: flashprefill_quantize at dim 160 on gfx950 (quantize.inc).
.set kDim, 160
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d160
