#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Training from Python against the driver, in one run on one CPU (docs/python.md).

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/bench_python_train.py \\
        [--config configs/default.json] [--steps 60] [--threads 2] [--repeats 2]

Trains the config's character language model twice per repeat, each in a
process of its own and alternating, with the same thread count and steps:

  driver  build/cli/remora train CONFIG --set train.steps=N ... (the C++ task,
          data stream and Trainer);
  python  the same model (remora.nn.TransformerXL from the config's model
          keys), optimizer (remora.optim.AdamW with the config's settings),
          schedule and clip, on the same 90/5/5 character split and the same
          Transformer-XL ordered batches, built with NumPy, in
          remora.train.Trainer with a DataSource written in Python.

Both runs log every --log-every steps to metrics.jsonl; each logging window
after the first (the warm-up) gives one tokens/s figure, (steps in the window)
x batch x seq_len / (its elapsed seconds). The evaluation runs once, after the
last record, and is not timed. Prints each repeat's medians, then over all
windows of all repeats the median and the best window of each side and their
ratios python / driver (on a shared machine the best window is the least
disturbed one), and the median CPU seconds (user + system) of each side's
whole process, which other processes on the machine disturb less than
wall-clock time.
"""
import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from bench_common import Recorder, add_record_args  # noqa: E402


# ---- the Python side (run in a child process: --python-run) ----
def char_corpus(path):
    """The driver's character corpus (cli/data/text.cpp): 90/5/5 split by bytes;
    id 0 is the unknown byte, then the training split's distinct bytes in byte
    order from id 1."""
    import numpy as np

    raw = np.fromfile(path, dtype=np.uint8)
    n = raw.size
    a = n * 90 // 100
    b = a + n * 5 // 100
    symbols = np.unique(raw[:a])
    table = np.zeros(256, dtype=np.int64)
    table[symbols] = np.arange(1, symbols.size + 1)
    return symbols.size + 1, table[raw[:a]], table[raw[a:b]]


def python_run(args):
    import numpy as np

    import remora
    from remora import nn, optim, train

    with open(args.config) as f:
        cfg = json.load(f)
    m, d, t = cfg["model"], cfg["data"], cfg["train"]
    if m.get("type") != "transformer_xl" or d.get("type") != "char":
        sys.exit("bench_python_train.py: the config must be a transformer_xl character language model")
    remora.set_num_threads(args.threads)
    remora.manual_seed(cfg.get("seed", 1))

    n_token, train_ids, valid_ids = char_corpus(os.path.join(ROOT, d["path"]) if not os.path.isabs(d["path"])
                                                else d["path"])
    att = m.get("attention", {"type": "softmax"})
    xl = nn.XLConfig(n_token=n_token, n_layer=m.get("n_layer", 2), n_head=m.get("n_head", 4),
                     d_model=m.get("d_model", 128), d_inner=m.get("d_inner", 512), dropout=m.get("dropout", 0.1),
                     dropatt=m.get("dropatt", 0.0), mem_len=m.get("mem_len", 0), attention=att.get("type", "softmax"))
    if xl.attention == "rsa":
        rem = att.get("rem", {})
        xl.rem = remora.RemSpec(regular=rem.get("regular", 0), cyclic=rem.get("cyclic", 0))
        xl.gate = att.get("gate", "head")
    model = nn.TransformerXL(xl)

    B, T = d["batch_size"], d["seq_len"]

    class Stream(train.DataSource):
        """Transformer-XL ordered batches (the driver's LMStream): row r reads
        its own stretch of the training split, segment after segment."""

        def __init__(self):
            super().__init__()
            S = train_ids.size // B
            self.rows = train_ids[: B * S].reshape(B, S)
            self.segments = (S - 1) // T
            self.pos = 0
            self.loss = nn.TransformerXL.loss

        def train_loss(self, state):
            s = self.pos % self.segments
            self.pos += 1
            if s == 0:
                state.mems, state.rem_states = [], []
            x = remora.from_numpy(np.ascontiguousarray(self.rows[:, s * T:(s + 1) * T]))
            y = remora.from_numpy(np.ascontiguousarray(self.rows[:, s * T + 1:(s + 1) * T + 1]))
            out = model(x, state, y)
            state.mems, state.rem_states = out.state.mems, out.state.rem_states
            return train.StepLoss(self.loss(out.logits, y), B * T, B * T)

        def evaluate(self, split, max_batches):
            return 0.0

        def position(self):
            return self.pos

        def set_position(self, p):
            self.pos = p

    o = t.get("optimizer", {})
    opt = optim.AdamW(model.parameters(), lr=o.get("lr", 1e-3), betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)),
                      eps=o.get("eps", 1e-8), weight_decay=o.get("weight_decay", 0.0))
    s = t.get("schedule", {"type": "constant"})
    kind = {"constant": "constant", "cosine": "warmup_cosine", "linear": "warmup_linear"}[s.get("type", "constant")]
    opts = train.TrainerOptions(out_dir=args.out, steps=args.steps, eval_every=0, eval_batches=1,
                                log_every=args.log_every, lr=o.get("lr", 1e-3), clip=t.get("clip", 0.0),
                                overwrite=True,
                                schedule=train.LRSchedule(kind, warmup_steps=s.get("warmup", 0),
                                                          total_steps=args.steps,
                                                          min_lr_ratio=s.get("min_lr_ratio", 0.0)))
    trainer = train.Trainer(model, opt, Stream(), opts)
    trainer.add_callback(train.jsonl_sink(os.path.join(args.out, "metrics.jsonl")))
    trainer.fit()
    print("python: %d parameters, %d threads" % (model.num_parameters(), remora.get_num_threads()), file=sys.stderr)


# ---- the parent: run both, read their metrics ----
def window_rates(metrics_path, tokens_per_step):
    """tokens/s of each logging window after the first (the warm-up)."""
    recs = []
    with open(metrics_path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("split") == "train" and "elapsed" in r:
                recs.append(r)
    if len(recs) < 2:
        sys.exit("bench_python_train.py: %s has fewer than two training records; raise --steps" % metrics_path)
    return [(b["step"] - a["step"]) * tokens_per_step / (b["elapsed"] - a["elapsed"]) for a, b in zip(recs, recs[1:])]


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def run(cmd):
    """Runs cmd; returns the CPU seconds (user + system) it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit("bench_python_train.py: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:]))
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "default.json"))
    p.add_argument("--driver", default=os.path.join(ROOT, "build", "cli", "remora"))
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--python-run", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    add_record_args(p, "python_train")
    args = p.parse_args()
    if args.python_run:
        return python_run(args)
    rec = Recorder("python_train", args)

    with open(args.config) as f:
        cfg = json.load(f)
    tokens_per_step = cfg["data"]["batch_size"] * cfg["data"]["seq_len"]
    print("CPU: %s, %d cores visible; %d threads, %d steps of %d tokens (log every %d; the first window not timed)"
          % (cpu_name(), os.cpu_count(), args.threads, args.steps, tokens_per_step, args.log_every))
    rates = {"driver": [], "python": []}
    cpu = {"driver": [], "python": []}
    with tempfile.TemporaryDirectory(prefix="remora_bench_train_") as tmp:
        for r in range(args.repeats):
            d_out = os.path.join(tmp, "driver%d" % r)
            d_cpu = run([args.driver, "train", args.config, "--out", d_out, "--overwrite",
                 "--set", "train.steps=%d" % args.steps, "--set", "train.threads=%d" % args.threads,
                 "--set", "train.log_every=%d" % args.log_every, "--set", "train.eval_every=0",
                 "--set", "train.eval_batches=1"])
            d = window_rates(os.path.join(d_out, "metrics.jsonl"), tokens_per_step)
            p_out = os.path.join(tmp, "python%d" % r)
            p_cpu = run([sys.executable, os.path.abspath(__file__), "--python-run", "--config", args.config,
                 "--out", p_out, "--steps", str(args.steps), "--log-every", str(args.log_every),
                 "--threads", str(args.threads)])
            py = window_rates(os.path.join(p_out, "metrics.jsonl"), tokens_per_step)
            rates["driver"] += d
            rates["python"] += py
            cpu["driver"].append(d_cpu)
            cpu["python"].append(p_cpu)
            print("repeat %d: driver %8.0f tokens/s   python %8.0f tokens/s   (medians of %d windows); "
                  "CPU seconds of the process: driver %.2f, python %.2f"
                  % (r + 1, median(d), median(py), len(d), d_cpu, p_cpu), flush=True)
    dm, pm = median(rates["driver"]), median(rates["python"])
    db, pb = max(rates["driver"]), max(rates["python"])
    print("median window: driver %.0f tokens/s, python %.0f tokens/s, python / driver = %.3f" % (dm, pm, pm / dm))
    print("best window:   driver %.0f tokens/s, python %.0f tokens/s, python / driver = %.3f" % (db, pb, pb / db))
    dc, pc = median(cpu["driver"]), median(cpu["python"])
    print("median CPU seconds of a whole run (start-up, %d steps, one evaluation batch, checkpoints): "
          "driver %.2f, python %.2f, python / driver = %.3f" % (args.steps, dc, pc, pc / dc))
    shape = dict(config=os.path.relpath(args.config, ROOT), threads=args.threads, steps=args.steps,
                 repeats=args.repeats, windows=len(rates["driver"]))
    for side, key in (("driver", "driver"), ("Python", "python")):
        rec.row(side=side, median_tokens_per_s=round(median(rates[key]), 1),
                best_tokens_per_s=round(max(rates[key]), 1), median_cpu_s=round(median(cpu[key]), 2), **shape)
    rec.write()

if __name__ == "__main__":
    main()
