#!/bin/bash
# session 17: ncu (full set, source counters) of our bf16 kernel at mla 4k x 4 after the 16-byte O store
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 300 ncu --clock-control none -k regex:fwd_kernel -c 1 --set full --import-source no -o /tmp/ours_bf16 \
  python3 bench/exp/run.py --variants o16=build/libflashprefill.so --once o16:bf16 --shape 4,4096 --heads-dim 16,16,192 > $OUT/ncu_run.txt 2>&1
echo "ncu rc=$?" >> $L
ncu --import /tmp/ours_bf16.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/src_ours_bf16_4_4096.csv.gz
ncu --import /tmp/ours_bf16.ncu-rep --page details > $OUT/ncu_ours_bf16_4_4096.txt 2>&1
python3 bench/results/2026-11-30-mla-4k-profile/classes.py $OUT/src_ours_bf16_4_4096.csv.gz bench/results/2026-11-30-mla-4k-profile/src_FA3_bf16_4_4096.csv.gz bench/results/2026-11-30-mla-4k-profile/src_ours_bf16_4_4096.csv.gz >> $L 2>&1
grep -E "Duration|Elapsed Cycles|SM Frequency|Tensor" $OUT/ncu_ours_bf16_4_4096.txt | head -8 >> $L
tail -5 $OUT/ncu_run.txt >> $L
cat $L
