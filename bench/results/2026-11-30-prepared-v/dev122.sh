#!/bin/bash
# prepared v (V^T loaded by TMA): GPU kernel tests, sanitizer on the prepared kernels, speed vs the default layout
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_kernel_gpu.py -x 2>&1 | tail -5 > /tmp/t.txt; cat /tmp/t.txt >> $L
cat $L
for args in "--dtype fp8" "--dtype fp8 --dim 192 --dim-v 128" "--dtype fp8 --block-tokens 128" "--dtype fp8 --scores fp16"; do
  for tool in racecheck memcheck; do
    [ $tool = memcheck ] && [ "$args" != "--dtype fp8" ] && continue
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 python3 tools/one_launch.py $args --v-layout prepared --seq 500 --heads 4 --heads-kv 2 > /tmp/san.txt 2>&1
    echo "$tool $args prepared: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.txt | head -1) | $(grep 'out finite' /tmp/san.txt | head -1)" >> $L
  done
done
cat $L
timeout 300 python3 bench/exp/run.py --variants new=build/libflashprefill.so --dts "fp8;fp8, V prepared;fp8 + prepare_v" --shapes "16k;4k b4;32k;mla 16k;mla 4k b4" --rounds 8 --gap 0.1 --out $OUT/v122.json 2>&1 | grep -v Warn | grep -v "diff vs" | tail -16 >> $L
cat $L
