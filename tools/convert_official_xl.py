# SPDX-License-Identifier: BSD-3-Clause
"""Converts an official Transformer-XL checkpoint (github.com/kimiyoung/
transformer-xl, pytorch/: MemTransformerLM, attn_type 0) into Remora's:

    python tools/convert_official_xl.py MODEL.pt OUT_DIR [--official PATH/TO/transformer-xl/pytorch]
        [--data PATH] [--cutoffs 20000 40000 200000] [--div-val 1] [--pre-lnorm] ...

MODEL.pt is what the official train.py saves (`torch.save(model, f)`: the whole
module, unpickled with the official code, which --official names) or a state
dict (`torch.save(model.state_dict(), f)`). Writes

    OUT_DIR/model.safetensors  the weights under their official names (Remora's),
                               as bare weights ({"format": "pt"} metadata)
    OUT_DIR/config.json        a Remora config whose "model" section builds the
                               same network (model.type "transformer_xl")

and then, with the corpus the model was trained on at data.path,

    remora eval --checkpoint OUT_DIR/model.safetensors --split test

evaluates it: the config.json beside the weights is their config, and data.type
"words" builds the official WikiText vocabulary from the training split (the
same ids as the official corpus).

The names: Remora's parameters are the official ones, so the tensors are copied
as they are, in float32 (--dtype f64 keeps float64). A tensor that the official
model shares (tie_weight: crit.out_layers.i.weight is word_emb.emb_layers.i.weight;
tie_projs: crit.out_projs.i is a word_emb.emb_projs) appears twice in its state
dict; Remora registers it once, in word_emb, so the copy under crit is dropped.
The buffer pos_emb.inv_freq is recomputed by Remora and dropped too.

The model's settings come from the module's attributes (a whole module) or
from the tensors' shapes (a state dict: n_layer, n_head, d_head, d_model,
d_inner, d_embed, div_val and the cutoffs where div_val > 1, the ties); what the
shapes cannot tell (the cutoffs with div_val 1, pre_lnorm, mem_len, clamp_len,
same_length, dropout) comes from the options, whose defaults are the official
train.py's. An option given explicitly overrides what was read.

Needs PyTorch (in a virtual environment: no part of Remora's build or tests).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="official model.pt (a whole MemTransformerLM or its state dict)")
    p.add_argument("out", help="output folder (created): model.safetensors, config.json")
    p.add_argument("--official", default=os.environ.get("TRANSFORMER_XL_PYTORCH", ""),
                   help="the official pytorch/ folder (to unpickle a whole module; env TRANSFORMER_XL_PYTORCH)")
    p.add_argument("--data", default="data/wikitext-103", help="data.path of the config (the wiki.*.tokens folder)")
    p.add_argument("--data-type", default="words", help="data.type of the config (words, char, bytes)")
    p.add_argument("--dtype", default="f32", choices=["f32", "f64"], help="dtype of the written weights")
    p.add_argument("--cutoffs", type=int, nargs="*", default=None, help="adaptive softmax cutoffs (without n_token)")
    p.add_argument("--div-val", type=int, default=None)
    p.add_argument("--pre-lnorm", action="store_true", default=None)
    p.add_argument("--same-length", action="store_true", default=None)
    p.add_argument("--mem-len", type=int, default=None)
    p.add_argument("--clamp-len", type=int, default=None)
    p.add_argument("--tgt-len", type=int, default=None, help="data.seq_len of the config")
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument("--dropatt", type=float, default=None)
    return p.parse_args(argv)


def load_checkpoint(path, official):
    import torch
    if official:
        for d in (os.path.join(official, "utils"), official):
            if d not in sys.path:
                sys.path.insert(0, d)
    obj = torch.load(path, map_location="cpu", weights_only=False)
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict(keep_vars=False), obj
    if isinstance(obj, dict) and "model_state_dict" in obj:  # a training checkpoint dict
        obj = obj["model_state_dict"]
    if not isinstance(obj, dict):
        raise SystemExit(f"{path}: neither a MemTransformerLM nor a state dict ({type(obj).__name__})")
    return obj, None


def same_tensor(a, b):
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()


def settings(sd, module, a):
    """The Remora model section, from the module (or the state dict's shapes) and the options."""
    if "r_w_bias" not in sd or "layers.0.dec_attn.qkv_net.weight" not in sd:
        raise SystemExit("not a MemTransformerLM of attn_type 0 (no r_w_bias / layers.0.dec_attn.qkv_net.weight)")
    n_layer = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers."))
    n_head, d_head = sd["r_w_bias"].shape
    d_model = sd["layers.0.dec_attn.o_net.weight"].shape[0]
    d_inner = sd["layers.0.pos_ff.CoreNet.0.weight"].shape[0]
    n_emb = 1 + max(int(k.split(".")[2]) for k in sd if k.startswith("word_emb.emb_layers."))
    d_embed = sd["word_emb.emb_layers.0.weight"].shape[1]
    n_token = sum(sd[f"word_emb.emb_layers.{i}.weight"].shape[0] for i in range(n_emb))
    n_clusters = sd["crit.cluster_weight"].shape[0] if "crit.cluster_weight" in sd else 0
    div_val = 1
    if n_emb > 1:
        div_val = d_embed // sd["word_emb.emb_layers.1.weight"].shape[1]
    cutoffs = []
    if n_emb > 1:  # one table per part: the cutoffs are the tables' ends
        end = 0
        for i in range(n_emb - 1):
            end += sd[f"word_emb.emb_layers.{i}.weight"].shape[0]
            cutoffs.append(end)
    m = dict(pre_lnorm=False, same_length=False, mem_len=0, clamp_len=-1, tgt_len=150, dropout=0.1, dropatt=0.0)
    if module is not None:
        if getattr(module, "attn_type", 0) != 0:
            raise SystemExit(f"attn_type {module.attn_type}: only attn_type 0 (relative partial) converts")
        if getattr(module, "sample_softmax", -1) > 0:
            raise SystemExit("sample_softmax: only the (adaptive) softmax output converts")
        cutoffs = list(module.crit.cutoffs[:-1])
        div_val = module.crit.div_val
        m.update(pre_lnorm=bool(module.layers[0].dec_attn.pre_lnorm), same_length=bool(module.same_length),
                 mem_len=int(module.mem_len or 0), clamp_len=int(module.clamp_len),
                 tgt_len=int(module.tgt_len or 150), dropout=float(module.drop.p),
                 dropatt=float(module.layers[0].dec_attn.dropatt.p))
    if a.cutoffs is not None:
        cutoffs = list(a.cutoffs)
    if a.div_val is not None:
        div_val = a.div_val
    for k, v in (("pre_lnorm", a.pre_lnorm), ("same_length", a.same_length), ("mem_len", a.mem_len),
                 ("clamp_len", a.clamp_len), ("tgt_len", a.tgt_len), ("dropout", a.dropout), ("dropatt", a.dropatt)):
        if v is not None:
            m[k] = v
    if len(cutoffs) != n_clusters:
        raise SystemExit(f"the checkpoint has {n_clusters} tail clusters (crit.cluster_weight) but cutoffs "
                         f"{cutoffs}: give --cutoffs (the official train.py: 20000 40000 200000 for wt103)")
    parts = len(cutoffs) + 1
    tie_weight = all(f"crit.out_layers.{i}.weight" in sd and same_tensor(sd[f"crit.out_layers.{i}.weight"],
                                                                         sd[f"word_emb.emb_layers.{i}.weight"])
                     for i in range(n_emb))
    tie_projs = []
    for i in range(parts):
        k = f"crit.out_projs.{i}"
        src = f"word_emb.emb_projs.{0 if div_val == 1 else i}"
        tie_projs.append(k in sd and src in sd and same_tensor(sd[k], sd[src]))
    model = {
        "type": "transformer_xl", "n_layer": n_layer, "d_model": d_model, "n_head": n_head, "d_head": d_head,
        "d_inner": d_inner, "dropout": m["dropout"], "dropatt": m["dropatt"], "mem_len": m["mem_len"],
        "clamp_len": max(0, m["clamp_len"]), "same_length": m["same_length"], "pre_ln": m["pre_lnorm"],
        "cutoffs": cutoffs, "div_val": div_val, "d_embed": 0 if d_embed == d_model else d_embed,
        "tie_weight": tie_weight, "tie_projs": tie_projs if any(tie_projs) else [],
        "attention": {"type": "softmax"},
    }
    return model, n_token, m["tgt_len"]


def remora_tensors(sd, model):
    """The state dict under Remora's names: shared copies under crit and buffers dropped."""
    out = []
    for k, v in sd.items():
        if k == "pos_emb.inv_freq":
            continue
        if k.startswith("crit.out_layers.") and k.endswith(".weight") and model["tie_weight"]:
            continue
        if k.startswith("crit.out_projs."):
            i = int(k.split(".")[2])
            if i < len(model["tie_projs"]) and model["tie_projs"][i]:
                continue
        out.append((k, v))
    return out


def convert(checkpoint, out, official="", data="data/wikitext-103", data_type="words", dtype="f32", **options):
    """Writes out/model.safetensors and out/config.json; returns (config, n_token)."""
    import torch
    a = parse_args([checkpoint, out])
    a.official, a.data, a.data_type, a.dtype = official, data, data_type, dtype
    for k, v in options.items():
        setattr(a, k, v)
    return run(a, torch)


def run(a, torch):
    sys.path.insert(0, os.path.join(HERE, "torch_ref"))
    import safetensors_io
    sd, module = load_checkpoint(a.checkpoint, a.official)
    model, n_token, tgt_len = settings(sd, module, a)
    cast = torch.float64 if a.dtype == "f64" else torch.float32
    tensors = [(k, v.detach().to(cast).contiguous()) for k, v in remora_tensors(sd, model)]
    os.makedirs(a.out, exist_ok=True)
    safetensors_io.save(os.path.join(a.out, "model.safetensors"), tensors, {"format": "pt"})
    config = {
        "seed": 1111,
        "model": model,
        "data": {"type": a.data_type, "path": a.data, "seq_len": tgt_len, "batch_size": 60, "eval_batch_size": 10},
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print(f"{a.checkpoint}: MemTransformerLM, vocabulary {n_token}, {len(tensors)} tensors -> "
          f"{os.path.join(a.out, 'model.safetensors')}, {os.path.join(a.out, 'config.json')}")
    return config, n_token


def main():
    import torch
    run(parse_args(), torch)


if __name__ == "__main__":
    main()
