#!/bin/bash
# session 19: bf16 consumers pass the turn right after issuing S (before O's rescale and P.V)
source bench/exp/setup.sh
L=$OUT/log.txt
FLASHPREFILL_LIBRARY=$PWD/bench/exp/var/turn/libflashprefill.so timeout 100 python3 -m pytest -q tests/test_kernel_gpu.py -k "bf16" 2>&1 | tail -n 1 >> $L; echo "pytest turn rc=$?" >> $L
V="o=build/libflashprefill.so turn=bench/exp/var/turn/libflashprefill.so o2=build/libflashprefill.so turn2=bench/exp/var/turn/libflashprefill.so"
timeout 200 python3 bench/results/2026-11-30-dynamic/run.py --variants $V --dts "bf16" --shapes "mla 4k b4;mla 16k;mla 32k;16k" --rounds 8 --gap 0.1 --out $OUT/ab.json 2>&1 | grep -v Warn >> $L; echo "ab rc=$?" >> $L
cat $L | grep -v "diff vs"; grep "diff vs" $L | head -4
