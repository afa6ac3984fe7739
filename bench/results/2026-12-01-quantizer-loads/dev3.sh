#!/bin/bash
# session 16, call 3: quantizer loads: staged (cp.async ring) vs direct (one set in registers) vs direct + one set ahead
source bench/exp/setup.sh
L=$OUT/log.txt
for v in d1 d2; do FLASHPREFILL_LIBRARY=$PWD/build/var/$v/libflashprefill.so timeout 100 python3 -m pytest -q -x tests/test_quantize_gpu.py 2>&1 | tail -1 | sed "s/^/$v: /" >> $L; done
timeout 300 python3 bench/exp/quant_prof.py $OUT/quant_prof.json old=$PWD/build/var/old/libflashprefill.so staged=$PWD/build/libflashprefill.so d1=$PWD/build/var/d1/libflashprefill.so d2=$PWD/build/var/d2/libflashprefill.so 2>&1 | grep -v -i warn | sed 's/, void fp::/; /g;s/(anonymous namespace):://g;s/unnamed>:://g;s/__nv_bfloat16/bf16/g' | cut -c1-150 >> $L
cat $L
