# SPDX-License-Identifier: BSD-3-Clause
"""The learned REM parameters of an RSA checkpoint, per attention layer (docs/math.md#recurrence-encoding-matrices-rem):
regular heads λ = tanh(η), cyclic pairs γ = σ(ν) and θ, and the gates σ(μ) (the
weight of the REM part against softmax attention in each REM head).

  /usr/bin/python3 tools/experiments/rem_params.py out/regular_protocol/parity_rsa_s1/last.safetensors
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from torch_ref import safetensors_io  # noqa: E402

tensors, _ = safetensors_io.load(sys.argv[1])
sig = lambda x: 1 / (1 + math.exp(-x))
layers = sorted({k.split(".rem.")[0] for k in tensors if ".rem." in k})
for name in layers:
    get = lambda p: tensors[name + ".rem." + p].double().flatten().tolist() if name + ".rem." + p in tensors else []
    print(json.dumps({
        "layer": name,
        "lambda": [round(math.tanh(e), 5) for e in get("eta")],
        "gamma": [round(sig(v), 4) for v in get("nu")],
        "theta": [round(t, 4) for t in get("theta")],
        "gate_sigma_mu": [round(sig(m), 3) for m in get("mu")],
    }))
