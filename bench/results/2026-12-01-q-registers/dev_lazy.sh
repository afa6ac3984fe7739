#!/bin/bash
# session 19: bf16 at dim_qk 192 with the lazy row max (as dim 128), now that Q sits in registers
source bench/exp/setup.sh
L=$OUT/log.txt
FLASHPREFILL_LIBRARY=$PWD/bench/exp/var/lazy/libflashprefill.so timeout 100 python3 -m pytest -q tests/test_kernel_gpu.py -k "bf16 and qk192" 2>&1 | tail -n 2 >> $L; echo "pytest lazy rc=$?" >> $L
V="o=build/libflashprefill.so lazy=bench/exp/var/lazy/libflashprefill.so o2=build/libflashprefill.so lazy2=bench/exp/var/lazy/libflashprefill.so"
timeout 200 python3 bench/results/2026-11-30-dynamic/run.py --variants $V --dts "bf16" --shapes "mla 4k b4;mla 16k;mla 32k" --rounds 8 --gap 0.1 --out $OUT/ab.json 2>&1 | grep -v Warn >> $L; echo "ab rc=$?" >> $L
cat $L | grep -v "diff vs"; grep "diff vs" $L | head -3
