#!/bin/bash
# session 15: the one-read quantizer (clusters of CTAs per block): bit-exact tests, sanitizer, kernel-time A/B
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
timeout 200 python3 -m pytest -q -x tests/test_quantize_gpu.py 2>&1 | tail -12 >> $L
cat > /tmp/san.py <<'PY'
import torch, flashprefill as fp
from flashprefill import prepare
for dim, block in ((128, 384), (192, 384), (128, 8), (64, 1100)):
    x = torch.randn(2, 700, 3, dim, device="cuda")
    x[0, 16:24, 0] *= 2.0**-100
    fp.quantize_fp8(x, block, signs=torch.from_numpy(prepare.rotation_signs(dim)).cuda())
torch.cuda.synchronize()
print("sanitized run done")
PY
for tool in memcheck racecheck; do timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 /tmp/san.py 2>&1 > /tmp/san_$tool.txt 2>&1; echo "$tool rc=$?" >> $L; tail -3 /tmp/san_$tool.txt >> $L; done
echo "--- kernel time" >> $L
timeout 150 python3 bench/exp/quant_prof.py $OUT/quant_prof.json old=$PWD/build/var/qold/libflashprefill.so v1=$PWD/build/var/qv1/libflashprefill.so new=$PWD/build/libflashprefill.so 2>&1 | grep -v Warn >> $L
cat $L
