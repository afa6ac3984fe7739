#!/bin/bash
# V wait issued after the softmax's last results (mbarrier_wait_parity_after): base vs vafter, bf16; tests on vafter
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
V="base=build/var/base/libflashprefill.so vafter=build/var/vafter/libflashprefill.so base2=build/var/base/libflashprefill.so"
timeout 200 python3 bench/exp/run.py --variants $V --dts "bf16" --shapes "mla 4k b4;mla 16k;mla 32k;16k;4k b4" --rounds 8 --gap 0.1 --out $OUT/v112.json 2>&1 | grep -v Warn | tail -12 >> $L
FLASHPREFILL_LIBRARY=build/var/vafter/libflashprefill.so timeout 200 python3 -m pytest -q tests/test_kernel_gpu.py tests/test_api_gpu.py -k "bf16 or fp16 or float16" 2>&1 | grep -E "passed|failed|^FAILED" | cut -c1-200 | head -20 >> $L
cat $L
