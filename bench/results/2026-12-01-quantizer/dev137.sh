#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
L=$OUT/log.txt
for lib in build/var/s1w8c4/libflashprefill.so; do
  FLASHPREFILL_LIBRARY=$PWD/$lib timeout 100 python3 -m pytest -q -x tests/test_quantize_gpu.py 2>&1 | tail -1 | sed "s#^#$lib: #" >> $L
done
timeout 200 python3 bench/exp/quant_prof.py $OUT/quant_prof.json s2c3=$PWD/build/libflashprefill.so s1c4=$PWD/build/var/s1w8c4/libflashprefill.so 2>&1 | grep -v -i warn | sed 's/, void fp::/; /g' | cut -c1-150 >> $L
cat $L
