#!/bin/bash
# epilogue: bf16 row sums quad-reduced before the last P.V wait (qsum) vs bbb4215 (new)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
V="new=build/var/new/libflashprefill.so qsum=build/var/qsum/libflashprefill.so new2=build/var/new/libflashprefill.so"
timeout 200 python3 bench/exp/run.py --variants $V --dts "bf16" --shapes "mla 4k b4;4k b4;mla 16k;16k" --rounds 12 --gap 0.1 --out $OUT/v115.json 2>&1 | grep -v Warn | grep -v "diff vs" | tail -8 >> $L
FLASHPREFILL_LIBRARY=build/var/qsum/libflashprefill.so timeout 200 python3 -m pytest -q tests/test_kernel_gpu.py tests/test_api_gpu.py -k "bf16 or fp16 or float16" 2>&1 | grep -E "passed|failed|^FAILED" | cut -c1-200 | head -20 >> $L
cat $L
