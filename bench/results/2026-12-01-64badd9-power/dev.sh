#!/bin/bash
# session 18: make demo's GPU path at the new default, and the sustained run (tools/power.py) at 16k
source bench/exp/setup.sh
L=$OUT/log.txt
timeout 120 python3 tools/demo.py > $OUT/demo.txt 2>&1; echo "demo rc=$?" >> $L
timeout 300 python3 tools/power.py --out $OUT > $OUT/power_run.txt 2>&1; echo "power rc=$?" >> $L
cat $L; cat $OUT/demo.txt; cat $OUT/power.md 2>/dev/null | head -40
