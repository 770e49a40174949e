#!/usr/bin/env bash
# Installs the Python packages the package's tests and main job need, where
# missing: PyTorch (pinned to the GPU machine's 2.11.0), pytest, numpy, and
# SpikingJelly 2.0.0 (pure Python, no dependencies: only for the
# compatibility tests; flexsn never needs it at run time), and snnTorch,
# Norse and NIR for the adapters' tests, torchvision for SpikingJelly's
# model zoo.
set -euo pipefail
PY=${PYTHON:-python3}
want=()
$PY -c 'import torch' 2>/dev/null || want+=(torch==2.11.0)
$PY -c 'import pytest' 2>/dev/null || want+=(pytest)
$PY -c 'import numpy' 2>/dev/null || want+=(numpy)
if ((${#want[@]})); then
  echo "== pip install ${want[*]}"
  $PY -m pip install -q "${want[@]}"
fi
if ! $PY -c 'import spikingjelly' 2>/dev/null; then
  $PY -m pip install -q --no-deps spikingjelly==2.0.0 loguru
fi
# SpikingJelly 0.0.0.0.14 (the older neuronal_charge / fire / reset API) in
# a venv of its own over these packages, for the conversion test of that API.
LEGACY=${FLEXSN_BUILD_DIR:-build}/venv-sj14
if [ ! -x "$LEGACY/bin/python" ]; then
  mkdir -p "$(dirname "$LEGACY")"
  $PY -m venv --system-site-packages "$LEGACY"
  "$LEGACY/bin/python" -m pip install -q --no-deps spikingjelly==0.0.0.0.14
fi
# torchvision (pinned to torch 2.11.0's) and Pillow: SpikingJelly's model zoo
# imports them; only the conversion tests build those models.
if ! $PY -c 'import torchvision, PIL' 2>/dev/null; then
  $PY -m pip install -q --no-deps torchvision==0.26.0 pillow
fi
# snnTorch, Norse and NIR: only for the adapters' equivalence tests (flexsn
# needs them at run time only where a user calls those adapters).
if ! $PY -c 'import snntorch, norse, nir, nirtorch, h5py' 2>/dev/null; then
  $PY -m pip install -q --no-deps snntorch==1.0.0 norse==1.1.0 nir==1.0.8 nirtorch==2.6 h5py
fi
