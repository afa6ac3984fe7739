#!/bin/bash
# prepared-v kernels with the idle converter's registers given to the consumers (producer 24, consumers 240) and, at
# dim_qk 192, Q in registers: GPU tests of the prepared kernels, A/B vs a19571e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt

cat $L
V="base=build/libflashprefill.so regs=build/var/regs/libflashprefill.so base2=build/libflashprefill.so"
timeout 330 python3 bench/exp/run.py --variants $V --dts "fp8, V prepared" --shapes "16k;32k;mla 16k;mla 4k b4" --rounds 8 --gap 0.1 --out $OUT/v124.json 2>&1 | grep -v Warn | tail -14 >> $L
cat $L
