#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A current PyTorch 2.x (CPU) in a virtual environment outside the repository:
# the benchmark peer (never a dependency of the build or the tests).
#
#   bash tools/bench/torch2_env.sh          # creates/updates it, prints its python
#   $(bash tools/bench/torch2_env.sh) tools/bench/bench_xl_train.py ...   # use it
#
# Location: $REMORA_TORCH2_VENV (default ~/.cache/remora/torch2). The CPU wheel
# comes from PyTorch's own index when this machine reaches it; otherwise from
# PyPI, whose Linux wheel brings the CUDA libraries with it (~3 GB): it is
# installed once and reused.
set -euo pipefail
venv=${REMORA_TORCH2_VENV:-$HOME/.cache/remora/torch2}
py=$venv/bin/python
if [ ! -x "$py" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$py" -c 'import torch, sys; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)' 2>/dev/null; then
  "$py" -m pip install -q --upgrade pip >&2
  "$py" -m pip install -q --retries 0 --timeout 10 torch numpy --index-url https://download.pytorch.org/whl/cpu >&2 ||
    "$py" -m pip install -q torch numpy >&2
fi
"$py" -c 'import torch; assert int(torch.__version__.split(".")[0]) >= 2, torch.__version__' >&2
echo "$py"
