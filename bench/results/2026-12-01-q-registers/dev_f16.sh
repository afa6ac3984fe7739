#!/bin/bash
# session 19: bf16 dim_qk 192 with Q in registers (the library build): all kernel GPU tests, sanitizers; fp8 float16-score
# dim 192 with Q in registers too (var/all): its tests, bit-identity, A/B at the DeepSeek shapes
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 240 python3 -m pytest -q tests/test_kernel_gpu.py 2>&1 | tail -n 2 >> $L; echo "pytest base rc=$?" >> $L
for t in racecheck memcheck; do
  timeout 60 compute-sanitizer --tool $t --error-exitcode 3 python3 tools/one_launch.py --dtype bf16 --seq 700 --batch 2 --dim 192 --dim-v 128 --heads 4 --heads-kv 4 2>&1 | tail -1 | sed "s|^|$t bf16 192: |" >> $L
  timeout 60 compute-sanitizer --tool $t --error-exitcode 3 env FLASHPREFILL_LIBRARY=$PWD/bench/exp/var/all/libflashprefill.so python3 tools/one_launch.py --dtype fp8 --seq 700 --batch 2 --dim 192 --dim-v 128 --heads 4 --heads-kv 4 --scores fp16 2>&1 | tail -1 | sed "s|^|$t all fp8 f16 192: |" >> $L
done
FLASHPREFILL_LIBRARY=$PWD/bench/exp/var/all/libflashprefill.so timeout 150 python3 -m pytest -q tests/test_kernel_gpu.py -k "qk192 and (float16 or default_scores or prepared_v or fa3_codes)" 2>&1 | tail -n 2 >> $L; echo "pytest all rc=$?" >> $L
python3 bench/results/2026-12-01-q-registers/bitid.py fp8 build/libflashprefill.so bench/exp/var/all/libflashprefill.so >> $L 2>&1; echo "bitid rc=$?" >> $L
V="o=build/libflashprefill.so all=bench/exp/var/all/libflashprefill.so o2=build/libflashprefill.so all2=bench/exp/var/all/libflashprefill.so"
timeout 300 python3 bench/results/2026-11-30-dynamic/run.py --variants $V --dts "fp8;fp8, fp16 scores;fp8, fp16 scores, V prepared;bf16" --shapes "mla 4k b4;mla 16k;mla 32k" --rounds 8 --gap 0.1 --out $OUT/ab_b2b.json 2>&1 | grep -v Warn >> $L; echo "ab rc=$?" >> $L
grep -E "rc=|bitid|passed|failed|DIFFERS|ERROR SUMMARY|racecheck|memcheck" $L; grep -E "^mla" $L | grep -v "diff vs"; grep "diff vs" $L | grep -v "0.00e+00 nan=False [a-z0-9]* [a-z0-9, ]*: 0.00e+00 nan=False [a-z0-9]* [a-z0-9, ]*: 0.00e+00 nan=False$" | head
