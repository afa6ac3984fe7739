#!/bin/bash
# session 16, call 4: quantizer with loads one row ahead, sign bits in the widening, max.NaN amax
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 200 python3 -m pytest -q -x tests/test_quantize_gpu.py 2>&1 | tail -3 >> $L
timeout 60 compute-sanitizer --tool memcheck python3 bench/exp/q_one.py small 2>&1 | tail -1 >> $L
timeout 300 python3 bench/exp/quant_prof.py $OUT/quant_prof.json old=$PWD/build/var/old/libflashprefill.so d2=$PWD/build/var/d2/libflashprefill.so new=$PWD/build/libflashprefill.so 2>&1 | grep -v -i warn | sed 's/, void fp::/; /g;s/(anonymous namespace):://g;s/unnamed>:://g;s/__nv_bfloat16/bf16/g' | cut -c1-150 >> $L
cat $L
