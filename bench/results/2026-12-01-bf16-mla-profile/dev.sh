#!/bin/bash
# session 19: ncu of bf16 at the DeepSeek shape, 16k (Q in registers, 12c6266's kernels) beside FA3 bf16
source bench/exp/setup.sh
L=$OUT/log.txt
run() {  # name, once-spec, kernel regex
  timeout 130 ncu --clock-control none -k regex:$3 -c 1 --set full --import-source no -o /tmp/$1 \
    python3 bench/results/2026-11-30-dynamic/run.py --variants o=build/libflashprefill.so --once "$2" --shape 1,16384 --heads-dim 16,16,192 > /tmp/ncu_run_$1.txt 2>&1
  echo "ncu $1 rc=$?" >> $L
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/src_$1.csv.gz
  ncu --import /tmp/$1.ncu-rep --page details > $OUT/details_$1.txt 2>&1
  grep -E "Duration|Elapsed Cycles|SM Frequency|Issue Slots Busy|highest-utilized|L1/TEX Cache Throughput|Shared Memory|Bank" $OUT/details_$1.txt | head -12 >> $L
}
run mla16k_bf16 "o:bf16" fwd_kernel
run mla16k_fa3_bf16 "fa3:bf16" device_kernel
cat $L
