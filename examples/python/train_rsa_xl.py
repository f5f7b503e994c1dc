#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Trains a tiny RSA Transformer-XL on the bundled tiny Shakespeare from Python.

Characters are the tokens; each step reads the next segment of every row of
the batch and carries the XL memory (and the REM state) across segments. The
training loop is Remora's Trainer, with the data source and a callback
written in Python:

    PYTHONPATH=build/python python3 examples/python/train_rsa_xl.py --steps 50
"""
import argparse
import os
import tempfile

import remora
from remora import nn, optim, train

HERE = os.path.dirname(os.path.abspath(__file__))


class CharStream(train.DataSource):
    """Batches of consecutive segments of a character stream: row b of the batch
    reads its own stretch of the text, segment after segment."""

    def __init__(self, model, ids, batch, seq_len):
        super().__init__()
        self.model, self.batch, self.seq_len = model, batch, seq_len
        n = len(ids) // batch
        self.rows = remora.tensor(ids[: n * batch]).reshape(batch, n)
        self.valid = remora.tensor(ids[-(batch * seq_len + 1):])
        self.pos = 0

    def train_loss(self, state):
        L = self.seq_len
        if (self.pos + 1) * L + 1 > self.rows.shape[1]:
            self.pos = 0
        x = self.rows[:, self.pos * L: (self.pos + 1) * L]
        y = self.rows[:, self.pos * L + 1: (self.pos + 1) * L + 1]
        self.pos += 1
        out = self.model(x, state if not state.empty() else None)
        state.mems = out.state.mems  # the memory for the next segment (detached by the model)
        state.rem_states = out.state.rem_states
        return train.StepLoss(nn.TransformerXL.loss(out.logits, y), tokens=x.numel())

    def evaluate(self, split, max_batches):
        L = self.seq_len
        x = self.valid[:-1].reshape(self.batch, L)
        y = self.valid[1:].reshape(self.batch, L)
        return nn.TransformerXL.loss(self.model(x).logits, y).item()

    def position(self):
        return self.pos

    def set_position(self, p):
        self.pos = p


class PrintLoss(train.Callback):
    """Prints the training loss every `every` steps and each evaluation."""

    def __init__(self, every):
        super().__init__()
        self.every = every

    def on_step_end(self, trainer, step, loss):
        if step % self.every == 0 or step == 1:
            print("step %4d  loss %.4f  lr %.2e" % (step, loss, trainer.lr), flush=True)

    def on_evaluate(self, trainer, step, evaluation):
        print("step %4d  valid loss %.4f" % (step, evaluation.loss), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "data", "tinyshakespeare.txt"))
    p.add_argument("--chars", type=int, default=200_000, help="characters of the corpus to use")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()

    remora.set_num_threads(a.threads)
    remora.manual_seed(0)
    with open(a.data, encoding="utf-8") as f:
        text = f.read()[: a.chars]
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = [index[c] for c in text]

    cfg = nn.XLConfig(n_token=len(vocab), n_layer=2, n_head=4, d_model=128, d_inner=256, dropout=0.0,
                      mem_len=a.seq_len, attention="rsa", rem=remora.RemSpec(regular=1, cyclic=1))
    model = nn.TransformerXL(cfg)
    print("RSA Transformer-XL: %d parameters, vocabulary %d characters" % (model.num_parameters(), len(vocab)))
    data = CharStream(model, ids, a.batch, a.seq_len)
    opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    out_dir = a.out or tempfile.mkdtemp(prefix="remora_rsa_xl_")
    opts = train.TrainerOptions(out_dir=out_dir, steps=a.steps, eval_every=a.steps, eval_batches=1,
                                log_every=10, lr=3e-3, clip=1.0, overwrite=True,
                                schedule=train.LRSchedule("warmup_cosine", warmup_steps=5, total_steps=a.steps))
    trainer = train.Trainer(model, opt, data, opts)
    trainer.add_callback(PrintLoss(10))
    result = trainer.fit()
    print("done: %d steps, best valid loss %.4f, checkpoints in %s" % (result.step, result.best, out_dir))


if __name__ == "__main__":
    main()
