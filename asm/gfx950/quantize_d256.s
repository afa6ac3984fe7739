// quantize_d256: flashprefill_quantize at dim 256 on gfx950 (quantize.inc).
.set kDim, 256
.include "quantize_rows.inc"
.include "quantize.inc"
quantize_kernel quantize_d256
