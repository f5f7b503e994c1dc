# SPDX-License-Identifier: BSD-3-Clause
"""Writes the word-level tokenizer goldens (tests/test_text.cpp).

1. A small corpus in WikiText's file layout (tests/data/wikitext/wiki.{train,
   valid,test}.tokens: " = Heading = " lines, blank lines, words and
   punctuation separated by spaces, rare words already replaced by <unk>),
   made from the start of data/tinyshakespeare.txt.
2. The official Transformer-XL vocabulary code (pytorch/utils/vocabulary.py of
   github.com/kimiyoung/transformer-xl, a copy outside this repository) run
   on it with the settings of its data_utils.py: WikiText (special <eos>,
   case kept) and PTB (special <eos>, lower-cased), plus min_freq / max_size.

    python3 tools/goldens/make_word_goldens.py /path/to/transformer-xl/pytorch/utils/vocabulary.py

Only the official file's Vocab class is used; torch, which it imports for
tensors, is replaced by a stub (the goldens are plain id lists).
"""
import collections
import importlib.util
import json
import os
import re
import sys
import types

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..")
OUT = os.path.join(ROOT, "tests", "data", "wikitext")


def make_corpus():
    with open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")[:3000]
    paras, cur = [], []
    for line in lines:
        if not line.strip():
            if cur:
                paras.append(cur)
            cur = []
        else:
            cur.append(line)
    if cur:
        paras.append(cur)
    tok = lambda s: re.findall(r"[A-Za-z]+(?:'[a-z]+)?|[0-9]+|[^\sA-Za-z0-9]", s)
    counts = collections.Counter(w for p in paras for l in p for w in tok(l))
    out = []
    for i, p in enumerate(paras):
        if i % 25 == 0:
            out += [" ", " = Part %d = " % (i // 25 + 1), " "]
        speaker, body = p[0].rstrip(":"), p[1:]
        words = [w if counts[w] > 1 else "<unk>" for l in body for w in tok(l)]
        words = ["@-@" if w == "-" else w for w in words]
        out.append(" " + speaker + " : " + " ".join(words) + " ")
    n = len(out)
    splits = {"train": out[: n * 8 // 10], "valid": out[n * 8 // 10: n * 9 // 10], "test": out[n * 9 // 10:]}
    # As in WikiText, every word of valid and test occurs in train (else it is <unk>).
    seen = set(w for l in splits["train"] for w in l.split())
    for name in ("valid", "test"):
        splits[name] = [" ".join(w if w in seen or w in ("", "=") else "<unk>" for w in l.split(" ")) for l in splits[name]]
    os.makedirs(OUT, exist_ok=True)
    for name, ls in splits.items():
        with open(os.path.join(OUT, "wiki.%s.tokens" % name), "w", encoding="utf-8") as f:
            f.write("\n".join(ls) + "\n")


def official_vocab(path):
    torch = types.ModuleType("torch")
    torch.LongTensor = list
    torch.cat = lambda xs: [i for x in xs for i in x]
    sys.modules["torch"] = torch
    spec = importlib.util.spec_from_file_location("official_vocabulary", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Vocab


def main():
    make_corpus()
    Vocab = official_vocab(sys.argv[1])
    train, valid = (os.path.join(OUT, "wiki.%s.tokens" % s) for s in ("train", "valid"))
    golden = {}
    settings = {
        "wikitext": dict(special=["<eos>"], lower_case=False),
        "ptb": dict(special=["<eos>"], lower_case=True),
        "cut": dict(special=["<eos>", "<unk>"], lower_case=False, min_freq=3, max_size=120),
    }
    for name, kw in settings.items():
        v = Vocab(**kw)
        v.count_file(train)
        v.build_vocab()
        golden[name] = {"options": kw, "tokens": v.idx2sym,
                        "valid_ids": v.encode_file(valid, ordered=True)}
    with open(os.path.join(OUT, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
