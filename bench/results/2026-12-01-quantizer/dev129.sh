#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
timeout 200 python3 bench/exp/quant_prof.py $OUT/quant_prof.json old=$PWD/build/var/qold/libflashprefill.so new=$PWD/build/libflashprefill.so >> $L 2>&1
cat $L
