#!/bin/bash
# L2 sections below 64 m-blocks: sec16 (from 16 m-blocks, 3 rounds a section), sec16r1 (1 round) vs bbb4215 (new)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
V="new=build/var/new/libflashprefill.so sec16=build/var/sec16/libflashprefill.so sec16r1=build/var/sec16r1/libflashprefill.so new2=build/var/new/libflashprefill.so"
timeout 300 python3 bench/exp/run.py --variants $V --dts "bf16;fp8" --shapes "mla 4k b4;4k b4" --rounds 12 --gap 0.1 --out $OUT/v116.json 2>&1 | grep -v Warn | tail -8 >> $L
cat $L
