#!/bin/bash
# V wait: a non-blocking test first (may be hoisted), the blocking try_wait only if V was not in yet (at the softmax's end)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
V="base=build/var/base/libflashprefill.so vtest=build/var/vtest/libflashprefill.so base2=build/var/base/libflashprefill.so"
timeout 250 python3 bench/exp/run.py --variants $V --dts "bf16;fp8" --shapes "mla 4k b4;mla 16k;16k;4k b4" --rounds 8 --gap 0.1 --out $OUT/v113.json 2>&1 | grep -v Warn | grep -v "diff vs" | tail -12 >> $L
FLASHPREFILL_LIBRARY=build/var/vtest/libflashprefill.so timeout 250 python3 -m pytest -q tests/test_kernel_gpu.py tests/test_api_gpu.py 2>&1 | grep -E "passed|failed|^FAILED" | cut -c1-200 | head -20 >> $L
cat $L
