# SPDX-License-Identifier: BSD-3-Clause
"""What a trained RelRNN does on the copy task: loads a Remora
checkpoint of configs/copy_official_T*.json (input onehot, official layout),
runs the independent per-example PyTorch transcription of the screening rule
(tools/torch_ref/relrnn.py) on fresh copy sequences and reports
  - the run's seed, the checkpoint's step and the run's relevant-set size rho,
  - the answer accuracy (a cross-check of Remora's own test accuracy),
  - how many of the 10 symbol states h_0..h_9 are still in the relevant set R
    when the delimiter arrives (step T + 9),
  - the attention mass the answer steps (T + 10 .. T + 19) put on symbol states,
    on the other R members, and on the short-term buffer S.

  /usr/bin/python3 tools/experiments/copy_probe.py out/copy_official/relrnn_T100_s1/last.safetensors 100 [n_seq]
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_ref import safetensors_io  # noqa: E402
from torch_ref.relrnn import RelRNNCell  # noqa: E402

path, T = sys.argv[1], int(sys.argv[2])
n_seq = int(sys.argv[3]) if len(sys.argv) > 3 else 50
tensors, meta = safetensors_io.load(path)
run_cfg = json.load(open(os.path.join(os.path.dirname(path), "config.json")))
cfg = run_cfg["model"]
H, nu, rho = cfg["d_model"], cfg["short_term"], cfg["relevant"]
W = {k: v.double() for k, v in tensors.items() if k.startswith(("rnn.", "decoder."))}
n_in = W["rnn.U.weight"].shape[1]
cell = RelRNNCell(n_in, H, nu, rho).double()
with torch.no_grad():
    for name, p in cell.named_parameters():
        p.copy_(W["rnn." + name])
dec_w, dec_b = W["decoder.weight"], W["decoder.bias"]

# copytask.py's layout: 10 symbols from 1..8, T - 1 blanks, the marker 9, 10 blanks.
g = torch.Generator().manual_seed(12345)
L = T + 20
ids = torch.zeros(n_seq, L, dtype=torch.int64)
sym = torch.randint(1, 9, (n_seq, 10), generator=g)
ids[:, :10] = sym
ids[:, T + 9] = 9
x = torch.nn.functional.one_hot(ids, n_in).double()
trace = {"record_alpha": True}
with torch.no_grad():
    out, _ = cell(x, trace=trace)
    pred = (out[:, -10:] @ dec_w.t() + dec_b).argmax(-1)
acc = (pred == sym).double().mean().item()

times = trace["slot_time"]  # [L, B, K] after step t
in_R_at_marker = ((times[T + 9, :, nu:] >= 0) & (times[T + 9, :, nu:] < 10)).sum(-1).double()
mass_sym, mass_Rother, mass_S = [], [], []
for b, t, ts, a in trace["reads"]:
    if t < T + 10:
        continue
    # mem = S (the last nu states: times >= t - nu) + R members
    ms = sum(ai for ti, ai in zip(ts, a) if 0 <= ti < 10)
    mS = sum(ai for ti, ai in zip(ts, a) if ti >= t - nu)
    mass_sym.append(ms)
    mass_S.append(mS)
    mass_Rother.append(1 - ms - mS)
mean = lambda v: sum(v) / max(1, len(v))
print(json.dumps({
    "checkpoint": path, "seed": run_cfg.get("seed"), "step": int(meta.get("step", -1)), "T": T, "relevant": rho, "sequences": n_seq,
    "accuracy": round(acc, 4),
    "symbol_states_in_R_at_marker_mean": round(in_R_at_marker.mean().item(), 2),
    "symbol_states_in_R_at_marker_min_max": [int(in_R_at_marker.min()), int(in_R_at_marker.max())],
    "answer_attention_on_symbol_states": round(mean(mass_sym), 4),
    "answer_attention_on_other_R": round(mean(mass_Rother), 4),
    "answer_attention_on_S": round(mean(mass_S), 4),
    "admissions": trace["admissions"], "replacements": trace["replacements"], "rejections": trace["rejections"],
}))
