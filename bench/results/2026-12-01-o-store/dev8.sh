#!/bin/bash
# session 17: the next item's Q and first K tile prefetched into L2 at an item's start: GPU tests, then back to back vs FA3 against the base build
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 200 python3 -m pytest -q -m gpu tests/test_kernel_gpu.py tests/test_api_gpu.py > $OUT/pytest.txt 2>&1; echo "kernel+api gpu tests rc=$?" >> $L
tail -2 $OUT/pytest.txt >> $L
V="base=bench/exp/var/base/libflashprefill.so pf=build/libflashprefill.so base2=bench/exp/var/base/libflashprefill.so pfb=build/libflashprefill.so"
timeout 330 python3 bench/exp/run.py --variants $V --dts "bf16;fp8" --shapes "mla 4k b4;4k b4;mla 16k" --rounds 6 --gap 0.1 --out $OUT/v_prefetch.json 2>&1 | grep -v Warn | tail -30 >> $L
cat $L
