#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Transformer-XL training throughput and peak memory: Remora against PyTorch eager
(and compiled), 1.13 and 2.x.

    /usr/bin/python3 tools/bench/bench_xl_train.py [--config configs/xl.json] [--steps 60]
                                              [--threads 2] [--remora build/cli/remora]
                                              [--device cpu|cuda] [--torch2 PYTHON]
                                              [--seq-len L[,L2,...]] [--batch B] [--mem-len M]
                                              [--warmup N] [--no-torch1]

--seq-len runs one table per segment length L, the config's data.seq_len set to L
and model.mem_len to L (or to --mem-len), data.batch_size to --batch when given: the
long-context comparison (Remora computes XL's positional term inside the fused
attention; PyTorch materialises the [B, H, L, L + M] scores). For example, at
L = 4,096 with batch 4 and memory = L, against PyTorch 2.x eager:

    /usr/bin/python3 tools/bench/bench_xl_train.py --config configs/xl.json \
        --seq-len 1024,4096 --batch 4 --steps 8 --warmup 3 --no-torch1 \
        --torch2 $(bash tools/bench/torch2_env.sh)

--torch2 PYTHON adds the PyTorch 2.x peers: the same model under that interpreter
(`bash tools/bench/torch2_env.sh` makes one and prints its path), eager and with
torch.compile (inductor; its compilation falls in the warm-up steps).

Both sides train the same model (tools/torch_ref/mem_transformer.py is the PyTorch
twin of models/transformer_xl.cpp, checked against it by the goldens) on the same
character stream (the config's corpus, batch_size x seq_len segments with memory),
with AdamW and gradient clipping as in the config, for the same number of steps and
threads. Each runs in its own process; tokens/s counts the steps after the first 10
(warm-up), peak RSS is the child's ru_maxrss. One run prints both, side by side.

--precision f32|bf16|both (default f32): bf16 trains Remora with train.precision=bf16
(docs/precision.md) and PyTorch under torch.autocast(device, dtype=torch.bfloat16)
around the forward and loss (its CPU autocast runs the matrix products through
oneDNN's bf16 kernels); both keep f32 weights and AdamW state. `both` prints f32
and bf16 rows for each peer and the bf16 / f32 ratios.

--device cuda runs both on the GPU (Remora with --set device=cuda, PyTorch with the
model and batches moved to cuda and torch.cuda.synchronize() around the timed span;
TF32 off on both sides). Peak RSS then measures host memory only; PyTorch's peak
GPU memory (torch.cuda.max_memory_allocated) is printed beside it. --tf32 turns
TF32 on on both sides instead: Remora with REMORA_CUDA_TF32=1 (cuBLAS in TF32 and
the tensor-core attention kernels, docs/gpu.md), PyTorch with allow_tf32.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HERE)
WARMUP = 10  # --warmup: the steps before the timed span
sys.path.insert(0, os.path.join(HERE, "bench"))
from bench_common import Recorder, add_record_args  # noqa: E402


def torch_child(cfg, steps, threads, out_path, device="cpu", compile_model=False, precision="f32",
                tf32=False):
    """Runs in a forked child: trains the PyTorch model and writes its figures."""
    import torch
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    sys.path.insert(0, HERE)
    from torch_ref.mem_transformer import MemTransformerLM
    torch.set_num_threads(threads)
    torch.manual_seed(cfg.get("seed", 1))
    m, d, t = cfg["model"], cfg["data"], cfg["train"]
    text = open(os.path.join(ROOT, d.get("path", "data/tinyshakespeare.txt")), "rb").read()
    train = text[: len(text) * 90 // 100]
    vocab = sorted(set(train))
    ids = {c: i + 1 for i, c in enumerate(vocab)}
    toks = torch.tensor([ids[c] for c in train], dtype=torch.long)
    B, T = d["batch_size"], d["seq_len"]
    S = toks.numel() // B
    streams = toks[: S * B].view(B, S).t().contiguous().to(dev)  # [S, B], time-major
    att = m.get("attention", {"type": "softmax"})
    rem = att.get("rem", {})
    n_head = m["n_head"]
    model = MemTransformerLM(
        len(vocab) + 1, m["n_layer"], n_head, m["d_model"], m.get("d_head") or m["d_model"] // n_head,
        m["d_inner"], dropout=m.get("dropout", 0.1), dropatt=m.get("dropatt", 0.0),
        tgt_len=T, mem_len=m.get("mem_len", 0), clamp_len=m.get("clamp_len", 0),
        same_length=m.get("same_length", False), pre_lnorm=m.get("pre_ln", False),
        attention=att["type"], rem_spec=rem if att["type"] == "rsa" else None,
        gate=att.get("gate", "head"))
    model.to(dev)
    model.train()
    fwd = torch.compile(model) if compile_model else model
    o = t.get("optimizer", {})
    opt = torch.optim.AdamW(model.parameters(), lr=o.get("lr", 1e-3),
                            betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)),
                            eps=o.get("eps", 1e-8), weight_decay=o.get("weight_decay", 0.01))
    sch = t.get("schedule", {})
    warm, kind, floor = sch.get("warmup", 0), sch.get("type", "constant"), sch.get("min_lr_ratio", 0.0)
    total = t.get("steps", steps)

    def lr_at(s):  # Remora's optim::LRSchedule, evaluated at step + 1 as the driver does
        s += 1
        if s < warm:
            return s / warm
        if kind == "constant":
            return 1.0
        prog = min(1.0, (s - warm) / max(1, total - warm))
        return floor + (1 - floor) * (0.5 * (1 + math.cos(math.pi * prog)) if kind == "cosine" else 1 - prog)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s))
    clip = t.get("clip", 0.0)
    mems = None
    start = None
    losses = []
    for step in range(steps):
        if step == WARMUP:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        i = (step * T) % (S - T - 1)
        x, y = streams[i:i + T], streams[i + 1:i + T + 1]
        if precision == "bf16":
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                _, loss, mems, _ = fwd(x, y, mems)
        else:
            _, loss, mems, _ = fwd(x, y, mems)
        opt.zero_grad()
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        losses.append(loss.item())  # (a sync point on cuda, as Remora's logging is)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - start
    json.dump({"tokens_per_s": (steps - WARMUP) * B * T / secs, "loss": losses[-1],
               "version": torch.__version__,
               "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               "gpu_peak_mib": (torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else None)},
              open(out_path, "w"))


def run_child(cmd, env=None):
    """Runs cmd; returns its own peak RSS in KiB (wait4: this child only)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = status
        if status != 0:
            err.seek(0)
            sys.stderr.write(err.read().decode(errors="replace")[-4000:])
            sys.exit(f"benchmark child failed: {' '.join(cmd)}")
    return ru.ru_maxrss


def run_torch(config, steps, threads, device="cpu", python=sys.executable, compile_model=False,
              precision="f32", tf32=False):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    rss = run_child([python, os.path.abspath(__file__), "--child", path, "--config", config,
                     "--steps", str(steps), "--threads", str(threads), "--device", device,
                     "--precision", precision, "--warmup", str(WARMUP)]
                    + (["--compile"] if compile_model else []) + (["--tf32"] if tf32 else []))
    r = json.load(open(path))
    r["maxrss_kib"] = rss
    return r


def run_remora(remora, config, steps, threads, device="cpu", precision="f32", tf32=False):
    out = tempfile.mkdtemp(prefix="remora_bench_xl_")
    cmd = [remora, "train", config, "--out", out, "--until", str(steps),
           "--set", "train.eval_every=0", "--set", "train.log_every=1",
           "--set", f"train.threads={threads}", "--set", "train.eval_batches=1",
           "--set", f"device={device}", "--set", f"train.precision={precision}"]
    env = dict(os.environ)
    env.pop("REMORA_CUDA_TF32", None)
    if tf32:
        env["REMORA_CUDA_TF32"] = "1"
    rss = run_child(cmd, env)
    rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    train = [r for r in rows if r["split"] == "train"]
    t0 = next(r["elapsed"] for r in train if r["step"] == WARMUP)
    t1 = train[-1]["elapsed"]
    B = cfg_cache["data"]["batch_size"] * cfg_cache["data"]["seq_len"]
    return {"tokens_per_s": (steps - WARMUP) * B / (t1 - t0), "loss": train[-1]["loss"],
            "maxrss_kib": rss}


cfg_cache = {}


def main():
    global WARMUP
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(ROOT, "configs/xl.json"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", default="2", help="a thread count, or several: 1,2 (one table each)")
    ap.add_argument("--remora", default=os.path.join(ROOT, "build/cli/remora"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--torch2", default="", help="a python with PyTorch 2.x (tools/bench/torch2_env.sh)")
    ap.add_argument("--seq-len", default="", help="segment lengths L (one table each): data.seq_len = L, "
                    "model.mem_len = L unless --mem-len")
    ap.add_argument("--batch", type=int, default=0, help="data.batch_size (0: the config's)")
    ap.add_argument("--mem-len", type=int, default=-1, help="model.mem_len with --seq-len (-1: = L)")
    ap.add_argument("--warmup", type=int, default=WARMUP, help="steps before the timed span")
    ap.add_argument("--no-torch1", action="store_true", help="skip the PyTorch of this interpreter")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)   # internal: one PyTorch run
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "both"],
                    help="f32, bf16 (Remora train.precision=bf16, PyTorch CPU/CUDA autocast bf16) or both")
    ap.add_argument("--tf32", action="store_true",
                    help="with --device cuda: TF32 on both sides (REMORA_CUDA_TF32=1; PyTorch allow_tf32)")
    add_record_args(ap, "xl_train")
    a = ap.parse_args()
    WARMUP = a.warmup
    if a.steps <= WARMUP:
        sys.exit(f"--steps {a.steps} must exceed the warm-up steps ({WARMUP})")
    cfg = json.load(open(a.config))
    cfg_cache.update(cfg)
    if a.child:
        torch_child(cfg, a.steps, int(a.threads), a.child, a.device, a.compile, a.precision, a.tf32)
        return
    a.config_name = a.config  # the config as named (a --seq-len run trains a temporary copy)
    a.recorder = Recorder("xl_train", a)
    if a.device == "cuda":  # the GPU names the machine as much as the host CPU does
        import torch
        if torch.cuda.is_available():
            a.recorder.notes = {"gpu": torch.cuda.get_device_name(0)}
    lengths = [int(x) for x in a.seq_len.split(",")] if a.seq_len else [0]
    for L in lengths:
        if L > 0:  # a config of this length, written beside the others' temporaries
            c = json.loads(json.dumps(cfg))
            c["data"]["seq_len"] = L
            c["model"]["mem_len"] = L if a.mem_len < 0 else a.mem_len
            if a.batch > 0:
                c["data"]["batch_size"] = a.batch
            if "path" in c["data"] and not os.path.isabs(c["data"]["path"]):
                c["data"]["path"] = os.path.join(ROOT, c["data"]["path"])  # the config now lives in /tmp
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(c, f)
            run_a = argparse.Namespace(**vars(a))
            run_a.config = f.name
            cfg_cache.clear()
            cfg_cache.update(c)
            for threads in [int(t) for t in str(a.threads).split(",")]:
                table(run_a, c, threads)
            os.unlink(f.name)
        else:
            for threads in [int(t) for t in str(a.threads).split(",")]:
                table(a, cfg, threads)
    a.recorder.write()


def table(a, cfg, threads):
    precs = ["f32", "bf16"] if a.precision == "both" else [a.precision]
    rows = []
    for p in precs:
        tag = "" if p == "f32" else " bf16"
        rows.append(("Remora" + tag, run_remora(a.remora, a.config, a.steps, threads, a.device, p, a.tf32)))
    for p in precs:
        tag = "" if p == "f32" else " autocast bf16"
        if not a.no_torch1:
            rows.append(("PyTorch eager" + tag,
                         run_torch(a.config, a.steps, threads, a.device, precision=p, tf32=a.tf32)))
        if a.torch2:
            rows.append(("PyTorch eager" + tag,
                         run_torch(a.config, a.steps, threads, a.device, a.torch2, precision=p, tf32=a.tf32)))
            if not a.seq_len:  # inductor's compile of a long segment is its own benchmark
                rows.append(("PyTorch compiled" + tag,
                             run_torch(a.config, a.steps, threads, a.device, a.torch2, True, precision=p,
                                       tf32=a.tf32)))
    m, d = cfg["model"], cfg["data"]
    print(f"Transformer-XL training, {os.path.basename(a.config)}: {m['n_layer']} layers, d {m['d_model']}, "
          f"{m['n_head']} heads, d_inner {m['d_inner']}, mem_len {m.get('mem_len', 0)}, "
          f"attention {m.get('attention', {}).get('type', 'softmax')}, batch {d['batch_size']} x {d['seq_len']}, "
          f"{threads} threads, {a.steps} steps ({WARMUP} warm-up), device {a.device}"
          + (", TF32 on both sides" if a.tf32 and a.device == "cuda" else ""))
    waits = [f"{k}={os.environ[k]}" for k in ("REMORA_SPIN_US", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
             if k in os.environ]
    print("Thread wait settings: " + (", ".join(waits) if waits else
          "none set (Remora's pool spins 30 us, then sleeps; PyTorch's OpenMP runtime its default)"))
    print(f"{'':36} {'tokens/s':>10} {'peak RSS MiB':>13} {'last loss':>10} {'Remora / it':>22}")
    # Ratios against Remora in the same precision (the first Remora row of it).
    remora_rows = {("bf16" in n): x for n, x in rows if n.startswith("Remora")}
    for name, x in rows:
        r = remora_rows.get("bf16" in name, rows[0][1])
        label = name if name.startswith("Remora") else f"{name} {x['version'].split('+')[0]}"
        ratio = "" if x is r else (f"{r['tokens_per_s'] / x['tokens_per_s']:6.2f}x tok/s "
                                   f"{r['maxrss_kib'] / x['maxrss_kib']:5.2f}x RSS")
        print(f"{label:36} {x['tokens_per_s']:10.0f} {x['maxrss_kib'] / 1024:13.1f} {x['loss']:10.4f} {ratio:>22}")
        a.recorder.row(config=os.path.basename(a.config_name),
                       attention=m.get("attention", {}).get("type", "softmax"), batch=d["batch_size"],
                       seq_len=d["seq_len"], mem_len=m.get("mem_len", 0), threads=threads, steps=a.steps,
                       warmup=WARMUP, device=a.device, tf32=bool(a.tf32 and a.device == "cuda"),
                       side=label, tokens_per_s=round(x["tokens_per_s"], 1),
                       peak_rss_mib=round(x["maxrss_kib"] / 1024, 1), loss=round(x["loss"], 4),
                       gpu_peak_mib=x.get("gpu_peak_mib"))
        if x.get("gpu_peak_mib") is not None:
            print(f"{'':36} PyTorch peak GPU memory: {x['gpu_peak_mib']:.1f} MiB")
    if len(remora_rows) == 2:
        f, b = remora_rows[False], remora_rows[True]
        print(f"Remora bf16 / f32: {b['tokens_per_s'] / f['tokens_per_s']:.2f}x tokens/s, "
              f"{b['maxrss_kib'] / f['maxrss_kib']:.2f}x peak RSS")
    print(flush=True)


if __name__ == "__main__":
    main()
