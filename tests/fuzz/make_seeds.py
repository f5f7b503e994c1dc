#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the committed seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/).

Deterministic and dependency-free (struct + json), so the seeds can be re-made:
    python3 tests/fuzz/make_seeds.py
Files under corpus/<target>/ named regress-* are regression inputs kept from
findings (docs/reliability.md); this script never touches them.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def seeds_safetensors():
    t = "safetensors"
    write(t, "f32", safetensors([("w", "F32", [2, 3], f32([0.5 * i for i in range(6)])),
                                 ("b", "F32", [3], f32([1, 2, 3]))], {"format": "pt"}))
    write(t, "dtypes", safetensors([
        ("a", "F64", [2], struct.pack("<2d", 1.5, -2.0)),
        ("b", "I64", [2], struct.pack("<2q", 7, -7)),
        ("c", "F16", [2], struct.pack("<2H", 0x3C00, 0x0001)),
        ("d", "BF16", [2], struct.pack("<2H", 0x3F80, 0xFF80)),
        ("e", "I32", [1], struct.pack("<i", -5)),
        ("f", "I16", [1], struct.pack("<h", 300)),
        ("g", "I8", [2], struct.pack("<2b", -1, 1)),
        ("h", "U8", [1], b"\xff"),
        ("i", "BOOL", [1], b"\x01")]))
    write(t, "empty_and_scalar", safetensors([("s", "F32", [], f32([3.0])), ("z", "F32", [0, 4], b"")],
                                             {"step": "3"}))
    nan = struct.pack("<f", float("nan"))
    write(t, "nan", safetensors([("w", "F32", [2], nan + f32([1.0]))], {"format": "remora-checkpoint"}))
    write(t, "no_padding", safetensors([("x", "F32", [1], f32([1]))], pad=False))


def seeds_config():
    t = "config"
    for name in ["default.json", "xl.json", "bert.json", "regular_rsa.json", "srupp.json",
                 "timeseries_rsa.json", "copy_relrnn.json", "classify_starsaber.json", "starsaber_lm.json"]:
        with open(os.path.join(ROOT, "configs", name), "rb") as f:
            write(t, name, f.read())
    with open(os.path.join(ROOT, "configs", "regular_softmax.json"), "rb") as f:
        base = f.read()
    sets = ["train.steps=5", "model.attention.type=rsa", "model.attention.rem.dilations=[1,2]",
            "train.clip=null", "seed=7", "data.language=dyck2", "device=cpu"]
    write(t, "regular_with_sets", base + b"".join(b"\0" + s.encode() for s in sets))
    write(t, "bad_set", base + b"\0model.n_layer.x=1\0=3\0train..steps=2")


def tiny_bert():
    V, H, I, P = 6, 4, 4, 4
    cfg = {"architectures": ["BertForPreTraining"], "model_type": "bert", "vocab_size": V, "hidden_size": H,
           "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": I,
           "max_position_embeddings": P, "type_vocab_size": 2, "hidden_act": "gelu", "pad_token_id": 0,
           "layer_norm_eps": 1e-12, "position_embedding_type": "absolute"}
    shapes = [("bert.embeddings.word_embeddings.weight", [V, H]),
              ("bert.embeddings.position_embeddings.weight", [P, H]),
              ("bert.embeddings.token_type_embeddings.weight", [2, H]),
              ("bert.embeddings.LayerNorm.gamma", [H]), ("bert.embeddings.LayerNorm.beta", [H])]
    p = "bert.encoder.layer.0."
    for n in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"]:
        shapes += [(p + n + ".weight", [H, H]), (p + n + ".bias", [H])]
    shapes += [(p + "attention.output.LayerNorm.weight", [H]), (p + "attention.output.LayerNorm.bias", [H]),
               (p + "intermediate.dense.weight", [I, H]), (p + "intermediate.dense.bias", [I]),
               (p + "output.dense.weight", [H, I]), (p + "output.dense.bias", [H]),
               (p + "output.LayerNorm.weight", [H]), (p + "output.LayerNorm.bias", [H]),
               ("bert.pooler.dense.weight", [H, H]), ("bert.pooler.dense.bias", [H]),
               ("cls.predictions.bias", [V]),
               ("cls.predictions.transform.dense.weight", [H, H]), ("cls.predictions.transform.dense.bias", [H]),
               ("cls.predictions.transform.LayerNorm.weight", [H]), ("cls.predictions.transform.LayerNorm.bias", [H]),
               ("cls.seq_relationship.weight", [2, H]), ("cls.seq_relationship.bias", [2])]
    tensors = [(n, "F32", s, f32([0.01 * ((i * 7 + k) % 13 - 6) for k in range(numel(s))]))
               for i, (n, s) in enumerate(shapes)]
    return cfg, tensors


def seeds_hf():
    t = "hf"
    sep = b"\n--model.safetensors--\n"
    cfg, tensors = tiny_bert()
    write(t, "tiny", json.dumps(cfg, indent=1).encode() + sep + safetensors(tensors, {"format": "pt"}))
    # F16 weights and the tied decoder alias.
    half = [(n, "F16", s, struct.pack("<%dH" % numel(s), *([0x2000] * numel(s)))) for n, _, s, _ in tensors]
    half.append(("cls.predictions.decoder.weight", "F16", [6, 4], struct.pack("<24H", *([0x2000] * 24))))
    write(t, "tiny_f16_decoder", json.dumps(cfg).encode() + sep + safetensors(half))
    rsa = dict(cfg, remora={"attention": {"type": "rsa", "rem": {"regular": 1}}})
    write(t, "rsa_config_only", json.dumps(rsa).encode() + sep)
    write(t, "missing_tensor", json.dumps(cfg).encode() + sep + safetensors(tensors[:-3]))


def seeds_ids():
    t = "ids"
    write(t, "one", b"\x1e" + b"[3, 22, 2, 7, 16, 10, 13, 9, 27]")
    with open(os.path.join(ROOT, "tests", "data", "hf_bert_tiny_ids.json"), "rb") as f:
        write(t, "batch", b"\x1e" + f.read())
    write(t, "text_lm", b"\x80" + b"the lazy fox\nover the dog")
    write(t, "ragged", b"\x10[[1,2],[3]]")
    write(t, "bad_id", b"\x05[[1,-2],[3,18446744073709551615]]")


def seeds_corpus():
    t = "corpus"
    text = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"
    write(t, "char", b"\x00\x09" + text)
    write(t, "bytes", b"\x01\x12" + text + bytes(range(0, 256, 7)))
    write(t, "utf8", b"\x00\x00" + "naïve café — über straße; ünïcödé text here".encode())
    write(t, "vocab_chars", b"\x02\x00" + b'{"kind":"chars","unk_id":0,"symbols":[10,32,65,97]}')
    write(t, "vocab_bytes", b"\x02\x00" + b'{"kind":"bytes"}')
    write(t, "vocab_bad", b"\x02\x00" + b'{"kind":"chars","symbols":[97,65]}')


def seeds_hostile():
    """Hand-made hostile inputs (named hostile-*), replayed by every run."""
    deep = "[" * 3000 + "]" * 3000
    hdr = lambda h: struct.pack("<Q", len(h)) + h
    write("safetensors", "hostile-header-length-2^63", struct.pack("<Q", 1 << 63) + b"{}")
    write("safetensors", "hostile-shape-overflow",
          hdr(b'{"x":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,0]}}'))
    write("safetensors", "hostile-negative-offsets",
          hdr(b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}') + b"z")
    write("safetensors", "hostile-duplicate-names",
          hdr(b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}') + b"ab")
    write("safetensors", "hostile-deep-nesting", hdr(('{"__metadata__":' + deep + '}').encode()))
    write("safetensors", "hostile-metadata-not-string", hdr(b'{"__metadata__":{"step":3}}'))
    write("ids", "hostile-deep-nesting", b"\x05" + deep.encode())
    write("ids", "hostile-huge-and-float", b"\x05[[1e400, 9223372036854775808, -9223372036854775809, 1.0]]")
    write("ids", "hostile-objects", b'\x05[{"a":1}, "x", null]')
    write("config", "hostile-deep-nesting", ('{"model":' + deep + '}').encode())
    write("config", "hostile-sets", b'{"model":{"type":"rnn"}}\0model.type.x=1\0=\0.\0model..a=2\0a.b.c.d.e.f=[[[[1]]]]')
    write("config", "hostile-huge-numbers", b'{"model":{"type":"rnn","n_layer":1e308,"d_model":-0,"dropout":NaN},'
          b'"data":{"type":"copy","delay":18446744073709551615},"seed":-1}')
    write("corpus", "hostile-vocab-symbols", b"\x02\x00" + json.dumps(
        {"kind": "chars", "unk_id": 0, "symbols": list(range(256)) + [256, -1, 1.5]}).encode())
    write("corpus", "hostile-vocab-deep", b"\x02\x00" + deep.encode())
    write("corpus", "hostile-nul-bytes", b"\x00\xff" + b"\0" * 64)
    write("hf", "hostile-sizes", json.dumps({"model_type": "bert", "vocab_size": 1 << 62, "hidden_size": -4,
                                             "num_attention_heads": 0}).encode())
    write("hf", "hostile-deep-nesting", ('{"remora":' + deep + '}').encode())


if __name__ == "__main__":
    seeds_hostile()
    seeds_safetensors()
    seeds_config()
    seeds_hf()
    seeds_ids()
    seeds_corpus()
