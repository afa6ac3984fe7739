#!/bin/bash
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
L=$OUT/log.txt
CASES=2 CALLS=8 timeout 300 python3 bench/exp/race2.py $PWD/build/libflashprefill.so $PWD/bench/exp/var/onelane/libflashprefill.so $PWD/bench/exp/var/olqdep/libflashprefill.so $PWD/bench/exp/var/olqfence/libflashprefill.so $PWD/bench/exp/var/olqfirst/libflashprefill.so 2>&1 | grep -v Warn >> $L; echo "race2 rc=$?" >> $L
cat $L | grep -v "blocks differing 0 $"
