#!/bin/bash
# session 17: the prepared encode flushed every 128 (64) tokens: GPU tests, timing of S (per set, HEAD) / A (flush, dim-fastest) / B (flush, group-fastest)
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 300 python3 -m pytest -q -x -m gpu tests/test_quantize_gpu.py > $OUT/pytest_quant.txt 2>&1; echo "quant gpu tests (B) rc=$?" >> $L
tail -1 $OUT/pytest_quant.txt >> $L
timeout 300 python3 bench/exp/quant_prof2.py $OUT/quant_prof.json S=$PWD/bench/exp/varS/libflashprefill.so A=$PWD/bench/exp/varA/libflashprefill.so B=$PWD/build/libflashprefill.so > $OUT/quant_prof.txt 2>&1; echo "quant_prof rc=$?" >> $L
cat > /tmp/san.py <<'PY'
import torch, flashprefill as fp
for dim in (64, 128, 192, 256):
    v = torch.randn(2, 300, 3, dim, device="cuda").to(torch.bfloat16)
    for block in (16, 112, 384):
        fp.quantize_fp8(v, block, layout="prepared")
torch.cuda.synchronize(); print("ok")
PY
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 /tmp/san.py > $OUT/san_$tool.txt 2>&1; echo "sanitizer $tool rc=$?" >> $L
  tail -1 $OUT/san_$tool.txt >> $L
done
cat $L
grep -E "v 384|quantize_qkv  " $OUT/quant_prof.txt
