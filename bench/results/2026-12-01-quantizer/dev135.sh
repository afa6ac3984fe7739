#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python || exit
timeout 200 python3 -m pytest -q tests/test_arrays.py tests/test_api.py tests/test_quantize_gpu.py 2>&1 | tail -4
timeout 100 python3 bench/exp/host_parts.py 2>&1 | tail -20
timeout 60 python3 bench/exp/host_split.py 2>&1 | tail -8
