#!/bin/bash
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 400 python3 bench/exp/race.py $PWD/build/libflashprefill.so $PWD/bench/exp/var/onelane/libflashprefill.so $PWD/bench/exp/var/nopp/libflashprefill.so $PWD/bench/exp/var/turn/libflashprefill.so 2>&1 | grep -v Warn >> $L; echo "race rc=$?" >> $L
cat $L
