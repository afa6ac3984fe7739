#!/bin/bash
# session 19: bf16 at dim_qk 192 with Q's first 4 / 8 / all 12 K steps in registers (S from registers for those)
source bench/exp/setup.sh
L=$OUT/log.txt
python3 bench/results/2026-12-01-q-registers/bitid.py bf16 build/libflashprefill.so bench/exp/var/q4/libflashprefill.so bench/exp/var/q8/libflashprefill.so bench/exp/var/q12/libflashprefill.so >> $L 2>&1; echo "bitid rc=$?" >> $L
for n in 8 12; do
FLASHPREFILL_LIBRARY=$PWD/bench/exp/var/q$n/libflashprefill.so timeout 150 python3 -m pytest -q -x tests/test_kernel_gpu.py -k "bf16 and qk192" 2>&1 | tail -n 2 >> $L; echo "pytest q$n rc=$?" >> $L
done
V="o=build/libflashprefill.so q4=bench/exp/var/q4/libflashprefill.so q8=bench/exp/var/q8/libflashprefill.so q12=bench/exp/var/q12/libflashprefill.so o2=build/libflashprefill.so q12b=bench/exp/var/q12/libflashprefill.so"
timeout 300 python3 bench/results/2026-11-30-dynamic/run.py --variants $V --dts "bf16" --shapes "mla 4k b4;mla 16k;mla 32k" --rounds 8 --gap 0.1 --out $OUT/ab_b2b.json 2>&1 | grep -v Warn >> $L; echo "ab rc=$?" >> $L
grep -E "rc=|bitid|passed|failed|DIFFERS" $L; grep -E "^mla" $L | grep -v "diff vs"; grep "diff vs" $L | head -3
