#!/bin/bash
# lazy codes accuracy: per_block384 err/floor and tools/accuracy.py for base / l120 / l112
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
for n in base l120 l112; do
  FLASHPREFILL_LIBRARY=build/var/$n/libflashprefill.so TAG=$n timeout 100 python3 bench/exp/perblock_ratio.py 2>&1 | grep -v Warn | tail -8 >> $L
done
for n in base l120 l112; do
  mkdir -p $OUT/acc_$n
  FLASHPREFILL_LIBRARY=build/var/$n/libflashprefill.so timeout 120 python3 tools/accuracy.py --out $OUT/acc_$n 2>&1 | grep -v Warn | tail -25 > $OUT/acc_$n/table.txt
done
cat $L; for n in base l120 l112; do echo "== $n"; grep -i "flashprefill\|floor\|FA3" $OUT/acc_$n/table.txt | head -20; done
