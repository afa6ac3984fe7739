#!/bin/bash
# integer row max (VIMNMX3 on the scores' bits, float fallback for negative rows): tests on imax, the new test on nofb (must fail), A/B vs base
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
FLASHPREFILL_LIBRARY=build/var/nofb/libflashprefill.so timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_kernel_gpu.py -k all_below_zero 2>&1 | tail -3 | sed 's/^/nofb: /' >> $L
FLASHPREFILL_LIBRARY=build/var/imax/libflashprefill.so timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernel_gpu.py 2>&1 | tail -4 | sed 's/^/imax: /' >> $L
cat $L
V="base=build/var/base/libflashprefill.so imax=build/var/imax/libflashprefill.so base2=build/var/base/libflashprefill.so"
timeout 330 python3 bench/exp/run.py --variants $V --dts "bf16;fp8" --shapes "16k;4k b4;32k;mla 16k;mla 4k b4;mla 32k" --rounds 8 --gap 0.1 --out $OUT/v119.json 2>&1 | grep -v Warn | tail -40 >> $L
cat $L
