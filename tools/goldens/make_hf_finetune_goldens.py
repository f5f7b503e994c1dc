#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Goldens for fine-tuning from a HuggingFace BERT (tests/test_hf_finetune.cpp).

  /path/to/venv/bin/python tools/goldens/make_hf_finetune_goldens.py

Needs torch and transformers (a virtual environment; not a dependency of Remora).
Writes
  tests/data/hf_bert_cls_tiny/            config.json + model.safetensors, as
                                          BertForSequenceClassification.save_pretrained
                                          writes them (random weights, seed 0)
  tests/data/hf_bert_cls_tiny_golden.safetensors
      ids [S, B, L] i64, mask [S, B, L] i64 (1 = token), labels [S, B] i64: the
      batches of S = 20 training steps; eval_ids, eval_mask [B, L]: a batch
      scored before training; logits0 [B, 2]: its class logits at step 0;
      losses [S]: the training loss of each step (AdamW lr 1e-3, weight decay
      0.01, dropout off), all in f64.
"""
import json
import os

import torch
from safetensors.torch import save_file
from transformers import BertConfig, BertForSequenceClassification

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "hf_bert_cls_tiny")
STEPS, B, L, V = 20, 4, 12, 40


def batch(g):
    ids = torch.randint(5, V, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.long)
    for b in range(B):  # rows of different lengths: the tail is padding (id 0)
        n = int(torch.randint(4, L + 1, (1,), generator=g))
        mask[b, n:] = 0
        ids[b, n:] = 0
    ids[:, 0] = 2  # [CLS]
    return ids, mask


def main():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, num_labels=2, initializer_range=0.2)
    model = BertForSequenceClassification(cfg)
    model.save_pretrained(OUT, safe_serialization=True)
    g = torch.Generator().manual_seed(1)
    eval_ids, eval_mask = batch(g)
    steps = [batch(g) + (torch.randint(0, 2, (B,), generator=g),) for _ in range(STEPS)]
    model.train()  # dropout is 0: train mode computes the same as eval
    with torch.no_grad():
        logits0 = model(input_ids=eval_ids, attention_mask=eval_mask).logits
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, eps=1e-8)
    losses = []
    for ids, mask, labels in steps:
        opt.zero_grad()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    tensors = {
        "ids": torch.stack([s[0] for s in steps]), "mask": torch.stack([s[1] for s in steps]),
        "labels": torch.stack([s[2] for s in steps]), "eval_ids": eval_ids, "eval_mask": eval_mask,
        "logits0": logits0.double(), "losses": torch.tensor(losses, dtype=torch.float64),
    }
    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(ROOT, "tests", "data", "hf_bert_cls_tiny_golden.safetensors"),
              metadata={"transformers": __import__("transformers").__version__, "torch": torch.__version__})
    print(json.dumps({"losses": losses[:3] + ["..."] + losses[-2:]}))


if __name__ == "__main__":
    main()
