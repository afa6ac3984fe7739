#!/bin/bash
# session 16, call 6: the failing float16-score test's message; racecheck on small launches
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 200 python3 -m pytest -q tests/test_kernel_gpu.py -k "float16 or fa3_codes or f16" --tb=line 2>&1 | grep -E "^/|Error|assert|passed|failed" | cut -c1-400 | head -30 >> $L
for d in "--dim 128 --heads 4 --heads-kv 2" "--dim 192 --dim-v 128 --heads 4 --heads-kv 4"; do
  timeout 100 compute-sanitizer --tool racecheck python3 tools/one_launch.py --dtype fp8 --seq 300 --batch 1 $d --scores fp16 2>&1 | tail -3 | tr '\n' ' ' >> $L; echo >> $L
done
cat $L
