#!/bin/bash
# session 18: K ring of three beside V's two (fp8 hd128, 192-key tiles): GPU tests on build/ (k3), then A/B
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 200 python3 -m pytest -q -x tests/test_kernel_gpu.py tests/test_api_gpu.py tests/test_quantize_gpu.py > /tmp/t.log 2>&1; echo "tests rc=$?" >> $L
tail -3 /tmp/t.log >> $L
timeout 300 python3 bench/exp/run.py --variants base=bench/exp/var/base/libflashprefill.so k3=bench/exp/var/k3/libflashprefill.so base2=bench/exp/var/base/libflashprefill.so k3b=bench/exp/var/k3/libflashprefill.so --dts "fp8;fp8, fp16 scores" --shapes "4k b4;16k;32k;32/32 16k" --rounds 6 --gap 0.1 --out $OUT/ab_k3.json > $OUT/ab_k3.txt 2>&1; echo "ab rc=$?" >> $L
cat $L; grep -v "diff vs" $OUT/ab_k3.txt; grep "diff vs" $OUT/ab_k3.txt | head -8
