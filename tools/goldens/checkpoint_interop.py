#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Remora <-> PyTorch checkpoint interop (tools/torch_ref/mem_transformer.py).

Run with Debian's python3-torch (1.13, no `safetensors` package: the format is
read and written by hand here, docs/math.md#checkpoints-the-safetensors-format):

  /usr/bin/python3 tools/goldens/checkpoint_interop.py check CHECKPOINT --ids IDS --logits INFER.safetensors
      (a) Remora -> PyTorch. Loads the weights of a Remora checkpoint (a file
      that `remora train` wrote) into MemTransformerLM (the "optimizer.*" and
      "state.*" tensors are ignored; the "config" metadata, the resolved config,
      gives the model), runs it in float32 on IDS (a JSON array of ids or an
      array of equally long arrays) and checks that its logits equal the
      "logits" that `remora infer CONFIG --checkpoint CHECKPOINT --input IDS
      --output INFER.safetensors` wrote, to --tol (1e-4).

  /usr/bin/python3 tools/goldens/checkpoint_interop.py export OUT.safetensors --config CONFIG.json
          [--seed S] [--init-std X] [--ids IDS --expected EXPECTED.safetensors]
      (b) PyTorch -> Remora. Builds a PyTorch-initialised MemTransformerLM for a
      Remora config (the vocabulary size comes from the config's data: 256 for
      "bytes", the training split's distinct bytes + 1 for "char") and writes
      its state dict as BARE WEIGHTS: the official tensor names and
      {"format": "pt"} metadata, exactly what safetensors.torch.save_file would
      write. `remora eval / infer / generate --checkpoint OUT.safetensors`
      accept such a file (cli/experiment.h: a file without
      "format": "remora-checkpoint" is weights only, with the vocabulary of the
      config's data; `train --resume` refuses it, having no optimizer state).
      With --ids, also writes PyTorch's logits on those ids (and the ids, and
      the config as "remora_config" metadata) to EXPECTED.safetensors.

  /usr/bin/python3 tools/goldens/checkpoint_interop.py selftest --remora build/cli/remora
      Both directions end to end in a temporary folder: trains a tiny RSA-XL for
      a few steps, runs `remora infer`, checks (a); exports a PyTorch model,
      runs `remora infer` and `remora eval` on it, checks (b). Exit 0 on
      success, 1 on a mismatch, 77 (ctest's SKIP_RETURN_CODE) when torch cannot
      be imported. ctest runs this (test checkpoint_interop).

  /usr/bin/python3 tools/goldens/checkpoint_interop.py fixtures
      Rewrites tests/data/torch_xl_weights.safetensors and
      tests/data/torch_xl_expected.safetensors (deterministic): the PyTorch ->
      Remora fixture that tests/test_driver.cpp loads through the driver, so
      that direction is tested without torch.

Why bare weights instead of having this script fake the Remora checkpoint
metadata (step, rng_seed, rng_offset, data_position): a PyTorch model has no
Remora training state, and invented values would let `train --resume` start
from a state that never existed. Weights-only files are what other tools
produce, so the driver takes them for everything except resuming.
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/, which holds torch_ref/
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from torch_ref.safetensors_io import load as read_safetensors  # noqa: E402
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402


def import_torch():
    try:
        import torch  # noqa: F401
    except Exception as e:  # pragma: no cover
        return None, f"{sys.executable} cannot import torch ({type(e).__name__}: {e})"
    sys.path.insert(0, HERE)
    return torch, ""


# ---------------------------------------------------------------- safetensors

_DT = {"F32": ("<f4", 4), "F64": ("<f8", 8), "I64": ("<i8", 8)}


# ---------------------------------------------------------------- configs

# Remora's defaults (cli/config.h) for the keys a config may leave out.
MODEL_DEFAULTS = {"n_layer": 2, "d_model": 128, "n_head": 4, "d_head": 0, "d_inner": 512,
                  "pre_ln": False, "mem_len": 0, "clamp_len": 0, "same_length": False}
REM_KEYS = ("regular", "cyclic", "dilated_regular", "dilated_cyclic", "dilations", "max_distance")


def model_kwargs(model_cfg, n_token):
    """MemTransformerLM keyword arguments for a Remora config's "model" section."""
    m = dict(MODEL_DEFAULTS)
    m.update(model_cfg)
    if m.get("type", "transformer_xl") != "transformer_xl":
        raise ValueError(f"model.type {m['type']!r}: only transformer_xl has a PyTorch reference")
    d_head = m["d_head"] or m["d_model"] // m["n_head"]
    att = m.get("attention", {}) or {}
    kw = dict(n_token=n_token, n_layer=m["n_layer"], n_head=m["n_head"], d_model=m["d_model"],
              d_head=d_head, d_inner=m["d_inner"], dropout=0.0, dropatt=0.0, mem_len=m["mem_len"],
              clamp_len=m["clamp_len"] if m["clamp_len"] > 0 else -1,
              same_length=m["same_length"], pre_lnorm=m["pre_ln"],
              attention=att.get("type", "softmax"))
    if kw["attention"] == "rsa":
        rem = att.get("rem", {}) or {}
        spec = {k: rem[k] for k in REM_KEYS if k in rem}
        spec["masked"] = True  # causal language models use the masked REM
        if "dilations" not in spec:
            spec["dilations"] = [2] * (spec.get("dilated_regular", 0) + spec.get("dilated_cyclic", 0))
        kw.update(rem_spec=spec, gate=att.get("gate", "head"))
    return kw


def data_path(cfg, config_path):
    p = cfg.get("data", {}).get("path", "data/tinyshakespeare.txt")
    if os.path.isabs(p) or os.path.exists(p):
        return p
    alt = os.path.join(os.path.dirname(os.path.abspath(config_path)), "..", p)
    return alt if os.path.exists(alt) else p


def vocab_size(cfg, config_path):
    """Remora's vocabulary size for a config's data (cli/data.h)."""
    d = cfg.get("data", {})
    if d.get("type") == "bytes":
        return 256
    if d.get("type") != "char":
        raise ValueError(f"data.type {d.get('type')!r}: only char and bytes language models")
    with open(data_path(cfg, config_path), "rb") as f:
        text = f.read()
    return len(set(text[:len(text) * 90 // 100])) + 1


def read_ids(path):
    with open(path) as f:
        j = json.load(f)
    if not isinstance(j, list) or not j:
        raise ValueError(f"{path}: expected a JSON array of ids or an array of arrays")
    rows = j if isinstance(j[0], list) else [j]
    if any(len(r) != len(rows[0]) for r in rows):
        raise ValueError(f"{path}: a batch needs sequences of equal length")
    return rows


def torch_logits(model, rows):
    """float32 logits [B, L, V] of MemTransformerLM (time-major inside) on id rows."""
    import torch
    ids = torch.tensor(rows, dtype=torch.int64).t().contiguous()  # [L, B]
    model.eval()
    with torch.no_grad():
        logits, _, _, _ = model(ids, torch.zeros_like(ids))
    return logits.transpose(0, 1).contiguous()  # [B, L, V]


def max_abs(a, b):
    return float((a.double() - b.double()).abs().max())


# ---------------------------------------------------------------- commands

def load_remora_checkpoint(path):
    """MemTransformerLM with the weights of a Remora checkpoint, and its config."""
    import torch
    from torch_ref.mem_transformer import MemTransformerLM
    tensors, meta = read_safetensors(path)
    if meta.get("format") != "remora-checkpoint":
        raise ValueError(f"{path}: not a Remora checkpoint (metadata format {meta.get('format')!r})")
    if "config" not in meta:
        raise ValueError(f"{path}: no \"config\" metadata")
    cfg = json.loads(meta["config"])
    weights = {k: v for k, v in tensors.items() if not k.startswith(("optimizer.", "state."))}
    if "word_emb.emb_layers.0.weight" not in weights:
        raise ValueError(f"{path}: no word_emb.emb_layers.0.weight (not a language model?)")
    n_token = weights["word_emb.emb_layers.0.weight"].shape[0]
    model = MemTransformerLM(**model_kwargs(cfg["model"], n_token))
    model = model.to(torch.float32)
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in weights.items()}, strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}: state dict does not fit MemTransformerLM: missing {missing}, "
                         f"unexpected {unexpected}")
    return model, cfg


def cmd_check(args):
    model, _ = load_remora_checkpoint(args.checkpoint)
    rows = read_ids(args.ids)
    got = torch_logits(model, rows)
    infer, _ = read_safetensors(args.logits)
    want = infer["logits"].float()
    if tuple(got.shape) != tuple(want.shape):
        print(f"check: FAIL: PyTorch logits {tuple(got.shape)} vs Remora {tuple(want.shape)}")
        return 1
    err = max_abs(got, want)
    ok = err <= args.tol
    print(f"check: {args.checkpoint}: logits {tuple(got.shape)}, max |torch - remora| = {err:.3e} "
          f"(tol {args.tol:g}): {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def build_torch_model(cfg, config_path, seed, init_std):
    import torch
    from torch_ref.mem_transformer import MemTransformerLM
    torch.manual_seed(seed)
    model = MemTransformerLM(**model_kwargs(cfg.get("model", {}), vocab_size(cfg, config_path)))
    model = model.to(torch.float32)
    # Larger spreads than the training init (as the goldens do), so the logits
    # depend visibly on every tensor and a wrong mapping cannot hide.
    model.reset_parameters(init_std=init_std, bias_std=0.1)
    with torch.no_grad():
        for layer in model.layers:
            if hasattr(layer.dec_attn, "rem"):
                layer.dec_attn.rem.theta.add_(torch.empty_like(layer.dec_attn.rem.theta).uniform_(-0.3, 0.3))
                layer.dec_attn.rem.mu.uniform_(-1.5, 1.5)
    return model


def export(cfg, config_path, out, seed=0, init_std=0.3, ids_rows=None, expected=None):
    import torch
    model = build_torch_model(cfg, config_path, seed, init_std)
    sd = model.state_dict()
    write_safetensors(out, [(k, v) for k, v in sd.items()], {"format": "pt"})
    if ids_rows is not None:
        logits = torch_logits(model, ids_rows)
        write_safetensors(expected, [("ids", torch.tensor(ids_rows, dtype=torch.int64)),
                                     ("logits", logits)],
                          {"format": "remora-interop-expected", "remora_config": json.dumps(cfg),
                           "generator": "tools/goldens/checkpoint_interop.py fixtures"})
        return logits
    return None


def cmd_export(args):
    with open(args.config) as f:
        cfg = json.load(f)
    rows = read_ids(args.ids) if args.ids else None
    if rows is not None and not args.expected:
        raise ValueError("--ids needs --expected")
    export(cfg, args.config, args.out, args.seed, args.init_std, rows, args.expected)
    print(f"export: wrote {args.out}" + (f" and {args.expected}" if rows is not None else ""))
    return 0


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


TINY_CONFIG = {
    "seed": 5,
    "model": {"type": "transformer_xl", "n_layer": 2, "d_model": 16, "n_head": 4, "d_inner": 32,
              "dropout": 0.1, "mem_len": 8,
              "attention": {"type": "rsa", "rem": {"regular": 1, "cyclic": 1}, "gate": "head"}},
    "data": {"type": "char", "path": "", "seq_len": 8, "batch_size": 2},
    "train": {"steps": 4, "eval_every": 2, "eval_batches": 2, "log_every": 1, "threads": 1,
              "optimizer": {"type": "adamw", "lr": 0.01}},
}


def corpus_text():
    words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while",
             "birds", "sing", "of", "rain"]
    out, x = [], 7
    while sum(len(w) + 1 for w in out) < 3000:
        x = (x * 1103515245 + 12345) % 2 ** 31
        out.append(words[(x >> 16) % len(words)])
    return " ".join(out) + "\n"


def cmd_selftest(args):
    remora = os.path.abspath(args.remora)
    work = tempfile.mkdtemp(prefix="remora_interop_")
    try:
        corpus = os.path.join(work, "corpus.txt")
        with open(corpus, "w") as f:
            f.write(corpus_text())
        cfg = json.loads(json.dumps(TINY_CONFIG))
        cfg["data"]["path"] = corpus
        config = os.path.join(work, "tiny.json")
        with open(config, "w") as f:
            json.dump(cfg, f)
        ids = os.path.join(work, "ids.json")
        with open(ids, "w") as f:
            json.dump([[1, 5, 9, 2, 7, 3, 11, 4, 6], [8, 2, 2, 10, 1, 12, 3, 5, 9]], f)

        # (a) Remora -> PyTorch
        out = os.path.join(work, "run")
        run([remora, "train", config, "--out", out])
        ck = os.path.join(out, "last.safetensors")
        infer = os.path.join(work, "infer.safetensors")
        run([remora, "infer", config, "--checkpoint", ck, "--input", ids, "--output", infer])
        ns = argparse.Namespace(checkpoint=ck, ids=ids, logits=infer, tol=1e-4)
        if cmd_check(ns) != 0:
            return 1

        # (b) PyTorch -> Remora (bare weights)
        weights = os.path.join(work, "torch.safetensors")
        want = export(cfg, config, weights, seed=3, ids_rows=read_ids(ids),
                      expected=os.path.join(work, "expected.safetensors"))
        infer2 = os.path.join(work, "infer2.safetensors")
        run([remora, "infer", config, "--checkpoint", weights, "--input", ids, "--output", infer2])
        got = read_safetensors(infer2)[0]["logits"]
        err = max_abs(got, want)
        print(f"import: remora infer on PyTorch weights: max |remora - torch| = {err:.3e} (tol 1e-4): "
              f"{'ok' if err <= 1e-4 else 'FAIL'}")
        if err > 1e-4:
            return 1
        ev = json.loads(run([remora, "eval", config, "--checkpoint", weights]))
        if not math.isfinite(ev["loss"]):
            print(f"import: remora eval gave a non-finite loss: {ev}")
            return 1
        print(f"import: remora eval on PyTorch weights: loss {ev['loss']:.4f}: ok")
        return 0
    finally:
        if args.keep:
            print(f"selftest: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


FIXTURE_CONFIG = {
    "seed": 1,
    "model": {"type": "transformer_xl", "n_layer": 2, "d_model": 16, "n_head": 4, "d_inner": 32,
              "dropout": 0.0, "mem_len": 4,
              "attention": {"type": "rsa", "rem": {"regular": 1, "cyclic": 1}, "gate": "head"}},
    "data": {"type": "bytes", "path": "corpus.txt", "seq_len": 8, "batch_size": 2},
    "train": {"threads": 1},
}


def cmd_fixtures(args):
    import torch
    data = os.path.join(ROOT, "tests", "data")
    g = torch.Generator().manual_seed(11)
    rows = torch.randint(0, 256, (2, 7), generator=g).tolist()
    # data.type bytes: 256 symbols whatever the corpus, so the C++ test can use
    # any text file as data.path.
    export(FIXTURE_CONFIG, os.path.join(data, "x.json"), os.path.join(data, "torch_xl_weights.safetensors"),
           seed=2, ids_rows=rows, expected=os.path.join(data, "torch_xl_expected.safetensors"))
    print(f"fixtures: wrote {data}/torch_xl_weights.safetensors and torch_xl_expected.safetensors")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="(a) Remora checkpoint -> PyTorch, compare with remora infer")
    c.add_argument("checkpoint")
    c.add_argument("--ids", required=True)
    c.add_argument("--logits", required=True, help="the safetensors file remora infer wrote")
    c.add_argument("--tol", type=float, default=1e-4)
    e = sub.add_parser("export", help="(b) PyTorch-initialised weights as bare safetensors")
    e.add_argument("out")
    e.add_argument("--config", required=True)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--init-std", type=float, default=0.3)
    e.add_argument("--ids")
    e.add_argument("--expected")
    s = sub.add_parser("selftest", help="both directions end to end with the remora binary")
    s.add_argument("--remora", required=True)
    s.add_argument("--keep", action="store_true")
    sub.add_parser("fixtures", help="rewrite tests/data/torch_xl_*.safetensors")
    args = p.parse_args()

    torch, why = import_torch()
    if torch is None:
        print(f"checkpoint_interop: skipped: {why}")
        return 77
    torch.set_num_threads(1)
    try:
        return {"check": cmd_check, "export": cmd_export, "selftest": cmd_selftest,
                "fixtures": cmd_fixtures}[args.cmd](args)
    except (ValueError, RuntimeError, OSError, KeyError) as err:
        print(f"checkpoint_interop {args.cmd}: error: {err}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
