# sourced by the device scripts: the peers' wheels that match this python, on PYTHONPATH with the binding
PYV=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fa3_fwd-*.whl .whl/nvidia_cudnn_frontend-*-$PYV-*.whl || exit
export PYTHONPATH=/tmp/site:$PWD/python
export PYTHONUNBUFFERED=1
