#!/bin/bash
# session 18: ncu of the float16-score kernel (v as is, and prepared) and FA3 fp8 at mla 4k x 4
source bench/exp/setup.sh
L=$OUT/log.txt
run() {  # name, once-spec, kernel regex
  timeout 200 ncu --clock-control none -k regex:$3 -c 1 --set full --import-source no -o /tmp/$1 \
    python3 bench/exp/run.py --variants o=build/libflashprefill.so --once "$2" --shape 4,4096 --heads-dim 16,16,192 > /tmp/ncu_run_$1.txt 2>&1; tail -2 /tmp/ncu_run_$1.txt >> $L
  echo "ncu $1 rc=$?" >> $L
  ncu --import /tmp/$1.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/src_$1.csv.gz
  ncu --import /tmp/$1.ncu-rep --page details > /tmp/details_$1.txt 2>&1
  grep -E "Duration|Elapsed Cycles|SM Frequency|highest-utilized|Issue Slots Busy|L1/TEX Cache Throughput" /tmp/details_$1.txt | head -8 >> $L
}
run mla4k_plain "o:fp8, fp16 scores" fwd_kernel
run mla4k_prepared "o:fp8, fp16 scores, V prepared" fwd_kernel
run mla4k_fa3 "fa3:fp8" "device_kernel"
cat $L
