#!/bin/bash
# session 17: GPU tests of the quantizer's prepared layout and the FA3-comparison refactor; quantizer timing; sanitizers
source bench/exp/setup.sh
L=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader >> $L
timeout 300 python3 -m pytest -q -x -m gpu tests/test_quantize_gpu.py tests/test_api_gpu.py > $OUT/pytest_quant.txt 2>&1; echo "quant+api gpu tests rc=$?" >> $L
tail -3 $OUT/pytest_quant.txt >> $L
timeout 200 python3 bench/exp/quant_prof2.py $OUT/quant_prof.json new=$PWD/build/libflashprefill.so > $OUT/quant_prof.txt 2>&1; echo "quant_prof rc=$?" >> $L
cat > /tmp/san.py <<'PY'
import torch, flashprefill as fp
for dim in (128, 192):
    v = torch.randn(2, 300, 3, dim, device="cuda").to(torch.bfloat16)
    for block in (16, 112, 384):
        fp.quantize_fp8(v, block, layout="prepared")
torch.cuda.synchronize(); print("ok")
PY
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 /tmp/san.py > $OUT/san_$tool.txt 2>&1; echo "sanitizer $tool rc=$?" >> $L
  tail -2 $OUT/san_$tool.txt >> $L
done
timeout 420 python3 -m pytest -q -m gpu tests/test_kernel_gpu.py > $OUT/pytest_kernel.txt 2>&1; echo "kernel gpu tests rc=$?" >> $L
tail -3 $OUT/pytest_kernel.txt >> $L
cat $L
grep -E "prepare|quantize_qkv" $OUT/quant_prof.txt
