#!/bin/bash
# session 17: what the O store costs (timing-only build storing one word a row instead of 16), back to back vs FA3
source bench/exp/setup.sh
L=$OUT/log.txt
V="base=build/libflashprefill.so nostore=bench/exp/var/nostore/libflashprefill.so base2=build/libflashprefill.so"
timeout 400 python3 bench/exp/run.py --variants $V --dts "bf16;fp8" --shapes "4k b4;mla 4k b4;mla 16k" --rounds 6 --gap 0.1 --out $OUT/v_nostore.json 2>&1 | grep -v Warn | tail -30 >> $L
cat $L
