#!/bin/bash
# session 16, call 5: float16 scores shrinking q's codes in the kernel: its tests, sanitizers, a 16k benchmark
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 240 python3 -m pytest -q -x tests/test_kernel_gpu.py -k "float16 or fa3_codes or f16" 2>&1 | tail -2 >> $L
for d in "--dim 128" "--dim 192 --dim-v 128 --heads 16 --heads-kv 16"; do
  for t in racecheck memcheck; do
    timeout 60 compute-sanitizer --tool $t python3 tools/one_launch.py --dtype fp8 --seq 700 --batch 2 $d --scores fp16 2>&1 | tail -2 | tr '\n' ' ' >> $L; echo >> $L
  done
done
timeout 200 python3 tools/bench.py --out /tmp/b --quick > /tmp/b.log 2>&1; echo "bench rc=$?" >> $L
cp /tmp/b/bench.json $OUT/ 2>/dev/null
python3 tools/bench_report.py /tmp/b/bench.json | sed -n '/Speed ratio/,$p' | head -8 >> $L
cat $L
