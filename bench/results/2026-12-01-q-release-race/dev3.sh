#!/bin/bash
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 300 python3 bench/exp/race2.py $PWD/build/libflashprefill.so $PWD/bench/exp/var/onelane/libflashprefill.so $PWD/bench/exp/var/olqlate/libflashprefill.so $PWD/bench/exp/var/nopp/libflashprefill.so 2>&1 | grep -v Warn >> $L; echo "race2 rc=$?" >> $L
cat $L
