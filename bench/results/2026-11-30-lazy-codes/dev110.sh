#!/bin/bash
# fp8 lazy codes (lazy_codes.cuh): base vs pairs-in-softmax vs lazy (raise target 120 / 112); fp8 GPU tests on lazy 120
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
V="base=build/var/base/libflashprefill.so pairs=build/var/pairs/libflashprefill.so l120=build/var/l120/libflashprefill.so l112=build/var/l112/libflashprefill.so"
timeout 200 python3 bench/exp/run.py --variants $V --dts "fp8" --shapes "16k;4k b4;32k;mla 16k;mla 4k b4" --rounds 8 --gap 0.1 --out $OUT/v110.json 2>&1 | grep -v Warn | tail -12 >> $L
timeout 240 python3 -m pytest -q tests/test_kernel_gpu.py tests/test_api_gpu.py -k "fp8" 2>&1 | grep -E "passed|failed|^FAILED|Error|assert" | cut -c1-300 | head -40 >> $L
cat $L
