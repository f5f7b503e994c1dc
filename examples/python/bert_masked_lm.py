#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A Hugging Face BERT directory loaded from Python and used for masked-token
prediction: the Python form of examples/bert_masked_lm.cpp.

    PYTHONPATH=build/python python3 examples/python/bert_masked_lm.py \\
        [HF_DIR] [--expected EXPECTED.safetensors] [--save SAVE_DIR]

The defaults are the fixture tests/data/hf_bert_tiny (a tiny randomly
initialised BertForPreTraining saved by Hugging Face transformers, vocabulary
of 30 ids, no tokenizer) and its logits hf_bert_tiny_expected.safetensors. The
program exits non-zero unless the logits equal Hugging Face's within 1e-4, the
predicted token is the argmax of the softmax, and (with --save) the model saved
with save_pretrained loads back with identical weights and predictions.
"""
import argparse
import os
import sys
import tempfile

import remora
from remora import nn

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("hf_dir", nargs="?", default=os.path.join(ROOT, "tests", "data", "hf_bert_tiny"))
    p.add_argument("--expected", default=os.path.join(ROOT, "tests", "data", "hf_bert_tiny_expected.safetensors"))
    p.add_argument("--save", default=None, help="save_pretrained here and reload (default: a temporary directory)")
    a = p.parse_args()
    failures = []

    bert = nn.BertForMaskedLM.from_pretrained(a.hf_dir).eval()  # eval: no dropout
    c = bert.config
    print("loaded %s: %d layers, hidden %d, vocabulary %d" % (a.hf_dir, c.num_hidden_layers, c.hidden_size,
                                                               c.vocab_size))
    expected = remora.load_file(a.expected)
    ids = expected["input_ids"]
    with remora.no_grad():
        # 1. The same numbers as Hugging Face on the unmasked input.
        err = (bert(ids).mlm_logits - expected["mlm_logits"]).abs().max().item()
        print("max |remora - HF| over the logits: %.2e" % err)
        if not err < 1e-4:
            failures.append("the logits differ from Hugging Face's")

        # 2. Mask position 4 of each sequence and predict it; id 1 stands in for [MASK].
        pos, mask_id = 4, 1
        masked = ids.clone()
        masked[:, pos] = mask_id

        def predict(model):
            logits = model(masked, attention_mask=remora.ones_like(masked)).mlm_logits[:, pos]  # [B, V]
            return logits.argmax(-1).tolist(), logits.softmax(-1).tolist()

        pred, probs = predict(bert)
        for b, (p_id, pr) in enumerate(zip(pred, probs)):
            print("sequence %d: predicted id %d (p = %.3f) for the masked id %d"
                  % (b, p_id, pr[p_id], ids[b, pos].item()))
            if pr[p_id] != max(pr):
                failures.append("the prediction is not the argmax of the probabilities")

        # 3. save_pretrained and load back: identical weights and predictions.
        with tempfile.TemporaryDirectory() as tmp:
            out_dir = a.save or os.path.join(tmp, "saved")
            bert.save_pretrained(out_dir)
            back = nn.BertForMaskedLM.from_pretrained(out_dir).eval()
            sa, sb = bert.state_dict(), back.state_dict()
            if list(sa) != list(sb) or not all(sa[k].equal(sb[k]) for k in sa):
                failures.append("the weights changed in the save / load round trip")
            if predict(back)[0] != pred:
                failures.append("the reloaded model predicts other tokens")
            print("saved to %s and reloaded: identical weights and predictions" % out_dir)
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    if failures:
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
