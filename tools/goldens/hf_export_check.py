#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""`remora export` of a BERT loads in HuggingFace transformers.

  python3 tools/goldens/hf_export_check.py --remora build/cli/remora

Trains a tiny softmax BERT (configs/bert.json, 3 steps) in a temporary folder,
exports it with `remora export`, loads the folder with transformers'
BertForMaskedLM.from_pretrained and checks that its MLM logits equal those of
`remora infer` on the same ids (to --tol, 1e-5). Exit 0 on success, 1 on a
mismatch, 77 (ctest's SKIP_RETURN_CODE) when torch, transformers or
safetensors cannot be imported (set REMORA_PYTHON to a Python that has them).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from safetensors.torch import load_file
    from transformers import BertForMaskedLM
except ImportError as e:  # not a dependency of Remora: the check needs them
    print(f"hf_export_check: skipped: {e} (install torch, transformers and safetensors to run it)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--remora", required=True, help="the remora driver")
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = json.load(open(os.path.join(ROOT, "configs", "bert.json")))
        cfg["data"]["path"] = os.path.join(ROOT, cfg["data"]["path"])
        cfg["train"].update({"steps": 3, "eval_every": 0})
        cfg_path = os.path.join(tmp, "bert.json")
        json.dump(cfg, open(cfg_path, "w"))
        run, out = os.path.join(tmp, "run"), os.path.join(tmp, "exported")

        def remora(*args):
            subprocess.run([a.remora, *args], check=True, stdout=subprocess.DEVNULL)

        remora("train", cfg_path, "--out", run)
        remora("export", "--checkpoint", os.path.join(run, "last.safetensors"), "--out", out)
        ids = [[5, 6, 7, 8, 9, 10, 11, 12], [12, 11, 10, 9, 8, 7, 6, 5]]
        ids_path, res = os.path.join(tmp, "ids.json"), os.path.join(tmp, "logits.safetensors")
        json.dump(ids, open(ids_path, "w"))
        remora("infer", "--checkpoint", os.path.join(out, "model.safetensors"), "--input", ids_path, "--output", res)
        model = BertForMaskedLM.from_pretrained(out)
        model.eval()
        with torch.no_grad():
            hf = model(input_ids=torch.tensor(ids)).logits
        ours = load_file(res)["logits"]
        err = (hf - ours).abs().max().item()
        print(f"hf_export_check: logits {tuple(hf.shape)}, max |transformers - remora| = {err:.3g} (tol {a.tol})")
        return 0 if hf.shape == ours.shape and err <= a.tol else 1


if __name__ == "__main__":
    sys.exit(main())
