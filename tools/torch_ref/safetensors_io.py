# SPDX-License-Identifier: BSD-3-Clause
"""safetensors without the safetensors package (docs/math.md#checkpoints-the-safetensors-format), shared by the tools/ scripts.

File = u64 little-endian header length N, N bytes of JSON header (padded with spaces
so the data starts 8-byte aligned), then the tensors' little-endian bytes, contiguous
from offset 0 in header order. Only F32, F64 and I64 are written.
"""
import json
import os
import struct

import torch

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
FROM_CODE = {v: k for k, v in DTYPES.items()}


def save(path, tensors, metadata=None):
    """tensors: {name: tensor} or [(name, tensor)] (bool is stored as I64);
    metadata: {str: str}, written first under "__metadata__". The file is written
    to path + ".tmp", fsynced and renamed, so a reader never sees half a file."""
    items = tensors.items() if isinstance(tensors, dict) else tensors
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in items:
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bool:
            t = t.to(torch.int64)
        raw = t.numpy().tobytes()  # x86-64 is little-endian
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path):
    """Returns ({name: tensor}, metadata) for F32/F64/I64 files."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base, out = 8 + n, {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        if not (0 <= b <= end <= len(data) - base):
            raise ValueError(f"{path}: tensor {name!r}: data_offsets out of range")
        t = torch.frombuffer(bytearray(data[base + b:base + end]), dtype=FROM_CODE[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out, meta
