#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Fine-tuning throughput, tokenisation included: `remora train` beside HF transformers.

  /path/to/venv/bin/python tools/bench/bench_finetune.py --remora build/cli/remora --threads 2

Both fine-tune the same BERT (4 layers, d 256, 4 heads, inner 1024; --layers etc. change
it) for sequence classification on the same labelled TSV, with the same WordPiece
vocabulary, batch, threads, AdamW and dropout 0.1, padding each batch to its longest
row. Timed from the start of the process or loop to the last step, so both include
reading and tokenising the texts and building the model:

- Remora: `remora train` of a labelled config (data.tokenizer wordpiece), the whole
  command's wall time (its one evaluation batch and checkpoint writes included);
- HF: BertForSequenceClassification (eager), a loop that tokenises each batch with
  BertTokenizerFast (padding, truncation to seq_len), forward, backward, AdamW step.

Prints examples/s for each and their ratio, from one run. Needs torch and
transformers (a virtual environment; not a dependency of Remora).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import Recorder, add_record_args  # noqa: E402


def read_tsv(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            cells = line.rstrip("\n").split("\t")
            if len(cells) == len(header):
                rows.append(dict(zip(header, cells)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--remora", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--inner", type=int, default=1024)
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "labelled", "sst_tiny"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "data", "mlm", "vocab.txt"))
    add_record_args(ap, "finetune")
    a = ap.parse_args()
    rec = Recorder("finetune", a)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast
    torch.set_num_threads(a.threads)
    n_vocab = sum(1 for _ in open(a.vocab, encoding="utf-8"))

    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "seed": 1, "device": "cpu",
            "model": {"type": "bert", "n_layer": a.layers, "d_model": a.d, "n_head": a.heads, "d_inner": a.inner,
                      "dropout": 0.1, "dropatt": 0.1, "attention": {"type": "softmax"}},
            "data": {"type": "labelled", "path": a.data, "text_a": "sentence", "label": "label",
                     "tokenizer": "wordpiece", "vocab": a.vocab, "seq_len": a.seq_len,
                     "batch_size": a.batch, "eval_batch_size": a.batch},
            "train": {"steps": a.steps, "eval_every": 0, "eval_batches": 1, "log_every": a.steps,
                      "threads": a.threads,
                      "optimizer": {"type": "adamw", "lr": 2e-5, "weight_decay": 0.01}},
        }
        path = os.path.join(tmp, "finetune.json")
        json.dump(cfg, open(path, "w"))
        t0 = time.perf_counter()
        r = subprocess.run([a.remora, "train", path, "--out", os.path.join(tmp, "run")], capture_output=True, text=True)
        remora_s = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit("remora train failed:\n" + r.stderr)
        with open(os.path.join(tmp, "run", "metrics.jsonl")) as f:
            train_lines = [json.loads(x) for x in f if '"train"' in x]
        # One training window (log_every = steps): its tokens, padding excluded.
        remora_tokens = train_lines[-1]["tokens_per_s"] * train_lines[-1]["elapsed"]

    # The HF tokenizer from a folder holding the vocabulary: transformers 5 ignores
    # BertTokenizerFast(vocab_file=...) and maps every word to [UNK]. The vocabulary's
    # size is checked here, and the tokens both sides trained on below.
    hf_dir = tempfile.mkdtemp()
    shutil.copy(a.vocab, os.path.join(hf_dir, "vocab.txt"))
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f)
    if len(BertTokenizerFast.from_pretrained(hf_dir)) != n_vocab:
        sys.exit(f"HF tokenizer: not the {n_vocab} tokens of {a.vocab}")

    t0 = time.perf_counter()
    rows = read_tsv(os.path.join(a.data, "train.tsv"))
    tok = BertTokenizerFast.from_pretrained(hf_dir)
    hf_tokens = 0
    torch.manual_seed(1)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=n_vocab, hidden_size=a.d, num_hidden_layers=a.layers, num_attention_heads=a.heads,
        intermediate_size=a.inner, max_position_embeddings=max(512, a.seq_len), num_labels=2,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    labels_of = {}
    for s in range(a.steps):
        batch = [rows[(s * a.batch + i) % len(rows)] for i in range(a.batch)]
        enc = tok([b["sentence"] for b in batch], padding=True, truncation=True, max_length=a.seq_len,
                  return_tensors="pt")
        y = torch.tensor([labels_of.setdefault(b["label"], len(labels_of)) for b in batch])
        hf_tokens += int(enc["attention_mask"].sum())
        opt.zero_grad()
        loss = model(**enc, labels=y).loss
        loss.backward()
        opt.step()
    hf_s = time.perf_counter() - t0

    n = a.steps * a.batch
    shutil.rmtree(hf_dir)
    # The same rows, each the same number of times when the steps cover whole epochs:
    # then both sides must have seen the same number of tokens.
    if n % len(rows) == 0 and abs(remora_tokens - hf_tokens) > 0.01 * hf_tokens:
        sys.exit(f"Remora trained on {remora_tokens:.0f} tokens, HF on {hf_tokens}: not the same tokenisation")
    print(f"fine-tuning BERT L{a.layers} d{a.d} H{a.heads} inner{a.inner}, batch {a.batch}, {a.steps} steps, "
          f"{a.threads} threads, data {os.path.relpath(a.data, ROOT)} (tokenisation included), "
          f"{hf_tokens / n:.1f} tokens per example")
    print(f"  remora train          {remora_s:7.2f} s  {n / remora_s:8.1f} examples/s")
    print(f"  HF transformers eager {hf_s:7.2f} s  {n / hf_s:8.1f} examples/s  (torch {torch.__version__}, "
          f"transformers {__import__('transformers').__version__})")
    print(f"  remora / HF: {hf_s / remora_s:.2f}x")
    rec.peers = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
    shape = dict(layers=a.layers, d=a.d, heads=a.heads, inner=a.inner, batch=a.batch, steps=a.steps,
                 threads=a.threads, data=os.path.relpath(a.data, ROOT), tokens_per_example=round(hf_tokens / n, 2))
    rec.row(side="Remora", seconds=round(remora_s, 2), examples_per_s=round(n / remora_s, 1), **shape)
    rec.row(side="HF transformers eager", seconds=round(hf_s, 2), examples_per_s=round(n / hf_s, 1), **shape)
    rec.write()


if __name__ == "__main__":
    main()
