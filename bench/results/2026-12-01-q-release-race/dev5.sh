#!/bin/bash
# session 20: the fix (62122fe) under the two timing amplifiers, sanitizers, and its cost against e960409's library
source bench/exp/setup.sh
L=$OUT/log.txt
CASES=4 CALLS=8 timeout 150 python3 bench/exp/race2.py $PWD/build/libflashprefill.so $PWD/bench/exp/var/fixol/libflashprefill.so $PWD/bench/exp/var/fixnopp/libflashprefill.so 2>&1 | grep -v Warn > $OUT/race.txt; echo "race2 rc=$?" >> $L
grep -c "blocks differing 0 $" $OUT/race.txt >> $L; grep -v "blocks differing 0 $" $OUT/race.txt >> $L
for t in racecheck memcheck synccheck; do
  for a in "--dtype bf16 --dim 192 --dim-v 128" "--dtype bf16 --dim 128 --dim-v 128"; do
    timeout 25 compute-sanitizer --tool $t --error-exitcode 3 python3 tools/one_launch.py $a --seq 700 --batch 2 --heads 4 --heads-kv 4 2>&1 | tail -1 | sed "s|^|$t $a: |" >> $L
  done
done
V="old=bench/exp/var/old/libflashprefill.so new=build/libflashprefill.so old2=bench/exp/var/old/libflashprefill.so new2=build/libflashprefill.so"
timeout 200 python3 bench/exp/run.py --variants $V --dts "bf16;fp8;fp8, fp16 scores" --shapes "mla 4k b4;mla 16k;mla 32k;16k;4k b4" --rounds 6 --gap 0.1 --out $OUT/ab.json 2>&1 | grep -v Warn >> $L; echo "ab rc=$?" >> $L
cat $L | grep -v "diff vs"; grep "diff vs" $L | grep -v "old2 [a-z0-9, ]*: 0.00e+00 nan=False new2 [a-z0-9, ]*: 0.00e+00 nan=False$" | head -5
