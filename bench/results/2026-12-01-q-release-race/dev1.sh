#!/bin/bash
# session 20 call 1: the open determinism check (determ3) and four bf16 variants at the DeepSeek shape
source bench/exp/setup.sh
L=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >> $L
timeout 150 python3 bench/results/2026-12-01-q-registers/determ3.py $PWD/build/libflashprefill.so $PWD/bench/exp/var/turn/libflashprefill.so 2>&1 | grep -v Warn >> $L; echo "determ3 rc=$?" >> $L
for v in turn onelane rescale; do
FLASHPREFILL_LIBRARY=$PWD/bench/exp/var/$v/libflashprefill.so timeout 60 python3 -m pytest -q -x tests/test_kernel_gpu.py -k "test_bf16" 2>&1 | tail -n 1 >> $L; echo "pytest $v rc=$?" >> $L
done
V="base=build/libflashprefill.so rescale=bench/exp/var/rescale/libflashprefill.so turn=bench/exp/var/turn/libflashprefill.so nopp=bench/exp/var/nopp/libflashprefill.so onelane=bench/exp/var/onelane/libflashprefill.so base2=build/libflashprefill.so"
timeout 200 python3 bench/exp/run.py --variants $V --dts "bf16" --shapes "mla 4k b4;mla 16k;mla 32k" --rounds 6 --gap 0.1 --out $OUT/ab.json 2>&1 | grep -v Warn >> $L; echo "ab rc=$?" >> $L
cat $L | grep -v "diff vs"; grep "diff vs" $L | head -8
