#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A small PyTorch Transformer language model whose attention is Remora's RSA.

The model is plain PyTorch (embedding, pre-LN blocks, feed-forward, tied
output); only the attention layers are remora.torch.RSAAttention, a drop-in
for torch.nn.MultiheadAttention(batch_first=True) whose first heads mix in a
learned recurrence (REM) through a gate. PyTorch's autograd and optimizer
train everything; the attention's forward and backward run in Remora, with
the tensors shared through DLPack.

    PYTHONPATH=build/python python3 examples/python/torch_rsa_swap.py --steps 200
"""
import argparse
import os
import time

import torch

import remora
import remora.torch as rt

HERE = os.path.dirname(os.path.abspath(__file__))


class Block(torch.nn.Module):
    """Pre-LN Transformer block: x + attn(ln(x)), then x + ff(ln(x))."""

    def __init__(self, d, heads, spec, use_rsa):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        if use_rsa:
            self.attn = rt.RSAAttention(d, heads, spec)
        else:
            self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.ff(self.ln2(x))


class LM(torch.nn.Module):
    """Embedding (tokens + learned positions), blocks, tied output layer."""

    def __init__(self, vocab, d=64, heads=4, layers=2, seq_len=64, use_rsa=True):
        super().__init__()
        spec = remora.RemSpec(regular=1, cyclic=1)  # 3 of the 4 heads carry a REM
        self.emb = torch.nn.Embedding(vocab, d)
        torch.nn.init.normal_(self.emb.weight, std=0.02)  # tied output: small initial logits
        self.pos = torch.nn.Parameter(torch.zeros(seq_len, d))
        self.blocks = torch.nn.ModuleList(Block(d, heads, spec, use_rsa) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, ids):
        L = ids.shape[1]
        x = self.emb(ids) + self.pos[:L]
        mask = torch.ones(L, L, dtype=torch.bool, device=ids.device).triu(1)  # True = blocked
        for b in self.blocks:
            x = b(x, mask)
        return self.ln(x) @ self.emb.weight.t()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "data", "tinyshakespeare.txt"))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="Remora's CPU threads")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="PyTorch's threads (1: its OpenMP threads slow small models down on a busy machine)")
    p.add_argument("--torch-attention", action="store_true", help="torch.nn.MultiheadAttention instead (baseline)")
    a = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(a.torch_threads)
    remora.set_num_threads(a.threads)
    with open(a.data, encoding="utf-8") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([index[c] for c in text], dtype=torch.int64)
    split = int(0.9 * len(data))
    train_ids, valid_ids = data[:split], data[split:]

    model = LM(len(vocab), seq_len=a.seq_len, use_rsa=not a.torch_attention)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    kind = "torch.nn.MultiheadAttention" if a.torch_attention else "remora.torch.RSAAttention"
    print("LM with %s: %d parameters" % (kind, sum(p.numel() for p in model.parameters())))

    def batch(ids):
        start = torch.randint(0, len(ids) - a.seq_len - 1, (a.batch,))
        x = torch.stack([ids[s: s + a.seq_len] for s in start])
        y = torch.stack([ids[s + 1: s + a.seq_len + 1] for s in start])
        return x, y

    t0 = time.time()
    for step in range(1, a.steps + 1):
        x, y = batch(train_ids)
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, len(vocab)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 20 == 0 or step == 1:
            print("step %4d  loss %.4f  (%.1f s)" % (step, loss.item(), time.time() - t0), flush=True)
    model.eval()
    with torch.no_grad():
        x, y = batch(valid_ids)
        v = torch.nn.functional.cross_entropy(model(x).reshape(-1, len(vocab)), y.reshape(-1))
    print("valid loss %.4f after %d steps (%.1f s)" % (v.item(), a.steps, time.time() - t0))


if __name__ == "__main__":
    main()
