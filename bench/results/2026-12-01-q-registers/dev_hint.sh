#!/bin/bash
# session 19: mbarrier try_wait with a suspend-time hint (10 ms, as CUTLASS passes): waiting threads sleep (NANOSLEEP)
# instead of spinning (ncu at mla 16k bf16: our BRA + SYNCS + YIELD 51 a tile against FA3's 9)
source bench/exp/setup.sh
L=$OUT/log.txt
FLASHPREFILL_LIBRARY=$PWD/bench/exp/var/hint/libflashprefill.so timeout 60 python3 -m pytest -q -x tests/test_kernel_gpu.py -k "test_bf16 or fp8_float16_scores" 2>&1 | tail -n 1 >> $L; echo "pytest hint rc=$?" >> $L
V="o=build/libflashprefill.so hint=bench/exp/var/hint/libflashprefill.so o2=build/libflashprefill.so hint2=bench/exp/var/hint/libflashprefill.so"
timeout 150 python3 bench/results/2026-11-30-dynamic/run.py --variants $V --dts "bf16;fp8;fp8, fp16 scores" --shapes "mla 4k b4;mla 16k;16k" --rounds 6 --gap 0.1 --out $OUT/ab.json 2>&1 | grep -v Warn >> $L; echo "ab rc=$?" >> $L
cat $L | grep -v "diff vs"; grep "diff vs" $L | grep -v "0.00e+00 nan=False [a-z0-9]* [a-z0-9, ]*: 0.00e+00 nan=False [a-z0-9]* [a-z0-9, ]*: 0.00e+00 nan=False$" | head -3
