#!/bin/bash
# L2 sections below 64 m-blocks (sec16) vs bbb4215 (new) on more shapes: 40/40 4k (the model's worst case), mla 2k b8, 32/32 4k b2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
V="new=build/var/new/libflashprefill.so sec16=build/var/sec16/libflashprefill.so new2=build/var/new/libflashprefill.so"
timeout 300 python3 bench/exp/run.py --variants $V --dts "bf16;fp8" --shapes "40/40 4k;mla 2k b8;32/32 4k b2;mla 4k b4" --rounds 10 --gap 0.1 --out $OUT/v117.json 2>&1 | grep -v Warn | grep -v "diff vs" | tail -8 >> $L
cat $L
