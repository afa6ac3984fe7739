#!/bin/bash
# session 19: accuracy with the ideal-e4m3-P row (hd128, mla); A/A high-count rounds at the DeepSeek shapes
# (back to back and per call); sustained power at the mla shapes
source bench/exp/setup.sh
L=$OUT/log.txt
echo "commit $(cat bench/exp/COMMIT)" >> $L
timeout 200 python3 tools/accuracy.py --out $OUT >> $L 2>&1; echo "acc rc=$?" >> $L
timeout 200 python3 tools/accuracy.py --out $OUT --shape mla >> $L 2>&1; echo "acc mla rc=$?" >> $L
V="o=build/libflashprefill.so o2=build/libflashprefill.so"
timeout 200 python3 bench/results/2026-11-30-dynamic/run.py --variants $V --dts "bf16;fp8;fp8, fp16 scores" --shapes "mla 4k b4;mla 16k;mla 32k" --rounds 16 --gap 0.1 --out $OUT/aa_b2b.json 2>&1 | grep -v Warn >> $L; echo "aa b2b rc=$?" >> $L
timeout 200 python3 bench/results/2026-11-30-dynamic/run.py --variants $V --dts "bf16;fp8;fp8, fp16 scores" --shapes "mla 4k b4;mla 16k;mla 32k" --rounds 16 --gap 0.1 --per-call --out $OUT/aa_call.json 2>&1 | grep -v Warn >> $L; echo "aa call rc=$?" >> $L
timeout 200 python3 tools/power.py --out $OUT --shapes mla --peers "flashprefill fp8, fp16 scores" "flashprefill fp8, fp16 scores, V prepared" "FA3 fp8" "flashprefill bf16" "FA3 bf16" >> $L 2>&1; echo "power rc=$?" >> $L
grep -E "rc=|floor|ideal|FA3 fp8|fp8, fp16 scores  |flashprefill fp8 " $L | grep -v "diff vs" | head -60
grep -E "^mla" $L | grep -v "diff vs"
cat $OUT/power.md 2>/dev/null | head -30
