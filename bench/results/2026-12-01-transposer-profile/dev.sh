#!/bin/bash
# session 18: ncu of the float16-score kernel at 16k (32/8, hd128) with v as is (in-kernel transpose) and prepared
source bench/exp/setup.sh
L=$OUT/log.txt
for name in plain prepared; do
  dt="fp8, fp16 scores"; [ $name = prepared ] && dt="fp8, fp16 scores, V prepared"
  timeout 200 ncu --clock-control none -k regex:fwd_kernel -c 1 --set full --import-source no -o /tmp/$name \
    python3 bench/exp/run.py --variants o=build/libflashprefill.so --once "o:$dt" --shape 1,16384 --heads-dim 32,8,128 > $OUT/ncu_run_$name.txt 2>&1
  echo "ncu $name rc=$?" >> $L
  ncu --import /tmp/$name.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/src_$name.csv.gz
  ncu --import /tmp/$name.ncu-rep --page details > $OUT/details_$name.txt 2>&1
  grep -E "Duration|Elapsed Cycles|SM Frequency|Tensor|Shared|Bank" $OUT/details_$name.txt | head -14 >> $L
done
cat $L
