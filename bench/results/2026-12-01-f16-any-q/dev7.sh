#!/bin/bash
# session 16, call 7: the float16-score tests three times (fresh seeds each)
source bench/exp/setup.sh
L=$OUT/log.txt
for i in 1 2 3; do
timeout 100 python3 -m pytest -q tests/test_kernel_gpu.py -k "float16 or fa3_codes" --tb=line 2>&1 | grep -E "^/|Error|passed|failed" | cut -c1-300 | head -8 >> $L
done
cat $L
