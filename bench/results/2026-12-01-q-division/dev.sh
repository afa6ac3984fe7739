#!/bin/bash
# session 18: the float16-score kernels on FA3's q codes (divided per item in the kernel) against q's codes
# pre-shrunk into the bound (2^9 at dim 128, 2^10 at 192: no division, the check only)
source bench/exp/setup.sh
L=$OUT/log.txt
for qs in 0 9; do
  timeout 200 python3 bench/exp/run.py --variants o=build/libflashprefill.so o2=build/libflashprefill.so --dts "fp8;fp8, fp16 scores" --shapes "4k b4;16k" --qshift $qs --rounds 6 --gap 0.1 > $OUT/hd128_q$qs.txt 2>&1; echo "hd128 q$qs rc=$?" >> $L
done
for qs in 0 10; do
  timeout 200 python3 bench/exp/run.py --variants o=build/libflashprefill.so o2=build/libflashprefill.so --dts "fp8;fp8, fp16 scores" --shapes "mla 4k b4;mla 16k" --qshift $qs --rounds 6 --gap 0.1 > $OUT/mla_q$qs.txt 2>&1; echo "mla q$qs rc=$?" >> $L
done
cat $L; grep -h -v "diff vs" $OUT/*.txt | grep -v "^\s*$"
