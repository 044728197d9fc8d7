#!/bin/bash
# The device checks on a machine with an NVIDIA GPU (docs/building.md, Devices and dtypes), run
# with that machine's own Python, whose torch has CUDA (the Makefile's venv holds the pinned CPU
# wheel).  From the repository's root:  bash tests/gpu.sh   (PY=... for another interpreter)
# Where that machine has no package index, the kit's pinned test wheels (pytest, pluggy,
# iniconfig, pytest-xdist, execnet, copydetect) can be carried in .whl/: they are installed first.
set -u
PY=${PY:-python3}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/kit-gpu-site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/kit-gpu-site
fi
$PY - <<'PY' || exit 4
import sys, torch
if not torch.cuda.is_available():
    sys.exit("no CUDA here: the device checks need a GPU")
print("torch", torch.__version__, "on", torch.cuda.get_device_name())
PY
exec $PY -m pytest -q -p no:cacheprovider -n 8 -rs \
  tests/test_device.py \
  tests/test_hostile.py::test_a_gpu_machines_filter_lets_unix_sockets_alone_through "$@"
