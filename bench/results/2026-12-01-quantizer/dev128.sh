#!/bin/bash
# session 15: quantizer with 8/16 lanes a row and FFMA butterflies: bit-exact tests, A/B against the old build
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
timeout 240 python3 -m pytest -q tests/test_quantize_gpu.py tests/test_kernel_gpu.py -k "quantize or long_flat" 2>&1 | tail -8 >> $L
echo "--- A/B" >> $L
timeout 200 python3 bench/exp/quant_ab.py $OUT/quant_ab.json old=$PWD/build/var/qold/libflashprefill.so new=$PWD/build/libflashprefill.so >> $L 2>&1
cat $L
