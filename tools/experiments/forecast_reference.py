#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The forecast task's data pipeline in NumPy, and two baselines on it.

    forecast_reference.py CONFIG [--horizon H] [--check REMORA_EVAL_JSON]

Reads CONFIG's CSV series (data.path, data.columns, data.time_column,
data.missing "interpolate", data.train_frac / valid_frac, data.scale,
data.subtract_last, data.context), builds the test windows exactly as
Remora's task does (docs/tasks.md: splits with data.context steps of history,
the training split's mean and deviation, windows every `horizon` steps) and
prints one JSON line with the test MSE and MAE of
  - "persistence": every forecast step repeats the context's last value;
  - "linear": one least-squares linear map from the (last-value-relative)
    context to the horizon, fitted on every training window, per column
    (NLinear, Zeng et al., 2023).
With --check, also the model's MSE / MAE from a `remora eval` JSON next to them.
"""
import argparse
import csv
import json
import os
import sys

import numpy as np


def load(cfg, root):
    d = cfg["data"]
    path = d["path"] if os.path.isabs(d["path"]) else os.path.join(root, d["path"])
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], [r for r in rows[1:] if r]
    cols = [c for c in d.get("columns", "").split(",") if c] or [h for h in header if h != d.get("time_column", "date")]
    idx = [header.index(c) for c in cols]
    missing = {"", "NA", "NaN", "nan", "null", "NULL"}
    x = np.array([[np.nan if r[i].strip() in missing else float(r[i]) for i in idx] for r in rows])
    for c in range(x.shape[1]):  # the straight line between neighbours, the nearest value at the ends
        bad = np.isnan(x[:, c])
        if bad.any():
            x[bad, c] = np.interp(np.flatnonzero(bad), np.flatnonzero(~bad), x[~bad, c])
    return x


def windows(s, context, horizon, stride):
    n = (len(s) - context - horizon) // stride + 1
    X = np.stack([s[i * stride:i * stride + context] for i in range(n)])
    Y = np.stack([s[i * stride + context:i * stride + context + horizon] for i in range(n)])
    return X, Y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--horizon", type=int)
    ap.add_argument("--check")
    a = ap.parse_args()
    root = os.path.dirname(os.path.abspath(__file__)) + "/../.."
    cfg = json.load(open(a.config))
    d = cfg["data"]
    L, H = d["context"], a.horizon or d["horizon"]
    x = load(cfg, root)
    n = len(x)
    ta = int(n * d.get("train_frac", 0.7))
    tb = ta + int(n * d.get("valid_frac", 0.1))
    train, test = x[:ta], x[tb - L:]
    if d.get("scale", True):
        mean, sd = train.mean(0), train.std(0)
        sd[sd == 0] = 1
        train, test = (train - mean) / sd, (test - mean) / sd
    rel = d.get("subtract_last", False)
    Xt, Yt = windows(test, L, H, H)
    out = {"horizon": H, "windows": len(Xt)}
    last = Xt[:, -1:, :]
    out["persistence"] = {"mse": float(((Yt - last) ** 2).mean()), "mae": float(np.abs(Yt - last).mean())}
    Xr, Yr = windows(train, L, H, 1)
    pred = np.empty_like(Yt)
    for c in range(x.shape[1]):
        base_r = Xr[:, -1:, c] if rel else 0
        base_t = Xt[:, -1:, c] if rel else 0
        A = np.hstack([Xr[:, :, c] - base_r, np.ones((len(Xr), 1))])
        W, *_ = np.linalg.lstsq(A, Yr[:, :, c] - base_r, rcond=None)
        pred[:, :, c] = np.hstack([Xt[:, :, c] - base_t, np.ones((len(Xt), 1))]) @ W + base_t
    out["linear"] = {"mse": float(((Yt - pred) ** 2).mean()), "mae": float(np.abs(Yt - pred).mean())}
    if a.check:
        m = json.load(open(a.check))
        out["model"] = {"mse": m["mse"], "mae": m["mae"], "tokens": m["tokens"]}
        if m["tokens"] != Yt.size:
            sys.exit("forecast_reference: the model was scored on %d values, the reference has %d" %
                     (m["tokens"], Yt.size))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
