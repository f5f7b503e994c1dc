# SPDX-License-Identifier: BSD-3-Clause
"""The learned REM parameters of an RSA checkpoint, per attention layer (docs/math.md#recurrence-encoding-matrices-rem):
regular heads λ = tanh(η), cyclic pairs γ = σ(ν) and θ, and the gates σ(μ) (the
weight of the REM part against softmax attention in each REM head). One JSON line per
layer. Reads the safetensors file directly (no PyTorch needed).

  /usr/bin/python3 tools/experiments/rem_params.py out/regular_protocol/parity_rsa_s1/last.safetensors
"""
import json
import math
import struct
import sys

FORMATS = {"F32": ("f", 4), "F64": ("d", 8)}


def load_floats(path, keep):
    """{name: [float, ...]} of the F32 / F64 tensors of a safetensors file whose name passes keep(name)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        if not keep(name) or e["dtype"] not in FORMATS:
            continue
        code, size = FORMATS[e["dtype"]]
        b, end = e["data_offsets"]
        raw = data[8 + n + b:8 + n + end]
        out[name] = list(struct.unpack("<%d%s" % (len(raw) // size, code), raw))
    return out


def rem_params(path):
    """One dict per attention layer with REM heads: layer, lambda, gamma, theta, gate_sigma_mu."""
    tensors = load_floats(path, lambda k: ".rem." in k)
    sig = lambda x: 1 / (1 + math.exp(-x))
    rows = []
    for name in sorted({k.split(".rem.")[0] for k in tensors}):
        get = lambda p: tensors.get(name + ".rem." + p, [])
        rows.append({
            "layer": name,
            "lambda": [round(math.tanh(e), 5) for e in get("eta")],
            "gamma": [round(sig(v), 4) for v in get("nu")],
            "theta": [round(t, 4) for t in get("theta")],
            "gate_sigma_mu": [round(sig(m), 3) for m in get("mu")],
        })
    return rows


if __name__ == "__main__":
    for row in rem_params(sys.argv[1]):
        print(json.dumps(row))
