# SPDX-License-Identifier: BSD-3-Clause
"""The Markdown blocks of docs/results.md, read from finished runs: a table, then the
**Result.** sentences that quote its numbers. tools/experiments/evidence.sh trains the
runs and calls this script with their folders, in the order of the table's rows:

  /usr/bin/python3 tools/experiments/tables.py KIND RUN_DIR ...

KIND      RUN_DIR holds (besides `remora train`'s metrics.jsonl and config.json)
lm        params.txt (`remora info`'s total), test.json (`remora eval --split test`)
hybrids   as lm
encoders  as lm
classify  eval.json (`remora eval` of best.safetensors)
regular   as classify
copy      params.txt, test.json
copy_long test.json
regular_protocol  test_last.json and last.safetensors (regular_protocol.sh's runs)
copy_probe        the arguments are copy_probe.py's JSON output files instead
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rem_params import rem_params  # noqa: E402

# Chance-level thresholds of the generated sentences.
COPY_CHANCE = 0.125  # 8 symbols
COPY_LEFT = 0.15  # a copy-task test accuracy above this has left the chance plateau
TIE = 0.01  # accuracies closer than this count as a tie


def read_json(path):
    with open(path) as f:
        text = f.read().strip()
    return json.loads(text.splitlines()[-1])


def metrics(d):
    with open(os.path.join(d, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def config(d):
    with open(os.path.join(d, "config.json")) as f:
        return json.load(f)


def run_name(d):
    base = os.path.basename(os.path.normpath(d))
    return base[len("evidence_"):] if base.startswith("evidence_") else base


def params(d):
    with open(os.path.join(d, "params.txt")) as f:
        return int(f.read().split()[0])


def lm_row(d):
    """name, parameters, metric, best valid, test, wall minutes, train tokens/s of a language model or masked LM run."""
    rows = metrics(d)
    valid = [r for r in rows if r["split"] == "valid"]
    train = [r for r in rows if r["split"] == "train"]
    key = "bpc" if "bpc" in valid[-1] else "mlm_accuracy"
    best = min(v[key] for v in valid) if key == "bpc" else max(v[key] for v in valid)
    test = read_json(os.path.join(d, "test.json"))
    return dict(name=run_name(d), params=params(d), key=key, best=best, test=test[key],
                wall=train[-1]["elapsed"] / 60, tps=sum(r["tokens_per_s"] for r in train) / len(train))


def ahead(a, b, lower_is_better):
    if round(a, 3) == round(b, 3):
        return "level"
    return "ahead" if (a < b) == lower_is_better else "behind"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def lm(dirs):
    rows = [lm_row(d) for d in dirs]
    print(table(["config", "parameters", "metric", "best valid", "test (best checkpoint)", "wall time", "train tokens/s"],
                [(r["name"], r["params"], r["key"], "%.4f" % r["best"], "%.4f" % r["test"], "%.1f min" % r["wall"],
                  "%.0f" % r["tps"]) for r in rows]))
    by = {r["name"]: r for r in rows}
    pairs = []
    if "default" in by and "xl" in by:
        a, b = by["default"]["test"], by["xl"]["test"]
        pairs.append((ahead(a, b, True), "%.3f against %.3f test bpc for the language models" % (a, b),
                      "for the language models"))
    if "rsa_bert" in by and "bert" in by:
        a, b = by["rsa_bert"]["test"], by["bert"]["test"]
        pairs.append((ahead(a, b, False), "%.3f against %.3f masked-token accuracy for the encoders" % (a, b),
                      "for the encoders"))
    if not pairs:
        return
    if len({p[0] for p in pairs}) == 1:
        verdict = pairs[0][0] + (" in both pairs" if len(pairs) == 2 else " " + pairs[0][2])
    else:
        verdict = " and ".join("%s %s" % (p[0], p[2]) for p in pairs)
    print("\n**Result.** At this budget RSA is %s: %s." % (verdict, ", ".join(p[1] for p in pairs)))


HYBRIDS = {
    "srupp": ("SRU++ (7 layers, d 320, d′ 64, attention in layers 2, 4, 6)", "SRU++"),
    "default": ("RSA-XL", "RSA-XL"),
    "xl": ("Transformer-XL", "Transformer-XL"),
    "starsaber_lm": ("StarSaber, causal (12 layers, d 132)", "causal StarSaber"),
}


def hybrids(dirs):
    rows = [lm_row(d) for d in dirs]
    print(table(["config", "model", "parameters", "best valid bpc", "test bpc (best checkpoint)", "wall time",
                 "train tokens/s"],
                [(r["name"], HYBRIDS.get(r["name"], (r["name"],))[0], r["params"], "%.4f" % r["best"],
                  "%.4f" % r["test"], "%.1f min" % r["wall"], "%.0f" % r["tps"]) for r in rows]))
    if len(rows) < 2:
        return
    short = lambda r: HYBRIDS.get(r["name"], (r["name"], r["name"]))[1]
    best = min(rows, key=lambda r: r["test"])
    worst = max(rows, key=lambda r: r["test"])
    fast = max(rows, key=lambda r: r["tps"])
    if best is fast:
        s = "%s is both the fastest (%.0f tokens/s) and the best (%.3f test bpc) here" % (short(best), fast["tps"], best["test"])
    else:
        s = "%s is the best (%.3f test bpc) and %s the fastest (%.0f tokens/s) here" % (
            short(best), best["test"], short(fast), fast["tps"])
    print("\n**Result.** %s; %s is last (%.3f)." % (s, short(worst), worst["test"]))


ENCODERS = {"starsaber": "starsaber (9 layers, d 132)", "starsaber_gated": "starsaber_gated (6 layers, d 132)",
            "bert": "bert (3 layers, d 128)"}


def compare(a, b):
    return "ties" if abs(a - b) < TIE else ("beats" if a > b else "trails")


def encoders(dirs):
    rows = [lm_row(d) for d in dirs]
    print(table(["config", "parameters", "metric", "best valid", "test (best checkpoint)", "wall time", "train tokens/s"],
                [(ENCODERS.get(r["name"], r["name"]), r["params"], r["key"], "%.4f" % r["best"], "%.4f" % r["test"],
                  "%.1f min" % r["wall"], "%.0f" % r["tps"]) for r in rows]))
    by = {r["name"]: r for r in rows}
    if not {"starsaber", "starsaber_gated", "bert"} <= set(by):
        return
    g, p, b = by["starsaber_gated"]["test"], by["starsaber"]["test"], by["bert"]["test"]
    print("\n**Result.** At masked LM the gated StarSaber %s BERT at equal size (%.3f against %.3f test accuracy); "
          "the plain one %s it (%.3f)." % (compare(g, b), g, b, compare(p, b), p))


def bins_rows(dirs, label):
    """(language, label, in-distribution accuracy, first bin, second bin) from eval.json."""
    rows = []
    for d in dirs:
        r = read_json(os.path.join(d, "eval.json"))
        b = r["bin_accuracy"]
        rows.append((config(d)["data"]["language"], label(config(d)), r["accuracy"], b[0], b[1]))
    return rows


def bins_table(first, rows):
    return table(["language", first, "in-distribution (2-50)", "51-100", "101-150"],
                 [(l, m, "%.3f" % a, "%.3f" % b0, "%.3f" % b1) for l, m, a, b0, b1 in rows])


def per_language(rows, names, learns):
    """One clause per language comparing the two models in the training lengths and on 101-150;
    'neither model learns it' when both stay below `learns` in the training lengths."""
    out = []
    for lang in dict.fromkeys(r[0] for r in rows):
        r = {m: (a, b1) for l, m, a, _, b1 in rows if l == lang}
        if len(r) != 2:
            continue
        (m1, (a1, l1)), (m2, (a2, l2)) = list(r.items())
        n1, n2 = names(m1), names(m2)
        if max(a1, a2) < learns:
            out.append("%s: neither model learns it (%s %.3f, %s %.3f in the training lengths)" % (lang, n1, a1, n2, a2))
            continue
        lead = lambda x, y: "level" if abs(x - y) < TIE else (n1 if x > y else n2) + " ahead"
        out.append("%s: %s in the training lengths (%s %.3f, %s %.3f), %s on 101-150 (%.3f, %.3f)" % (
            lang, lead(a1, a2), n1, a1, n2, a2, lead(l1, l2), l1, l2))
    return out


def classify(dirs):
    rows = bins_rows(dirs, lambda c: c["model"]["type"])
    print(bins_table("model", rows))
    clauses = per_language(rows, lambda m: {"starsaber": "StarSaber", "bert": "BERT"}.get(m, m), 0.6)
    if clauses:
        print("\n**Result.** Membership accuracy (chance 0.5), %s." % "; ".join(clauses))


def attention_kind(c):
    return c["model"]["attention"]["type"]


def regular(dirs):
    rows = bins_rows(dirs, attention_kind)
    print(bins_table("attention", rows))
    clauses = per_language(rows, lambda m: {"rsa": "RSA", "softmax": "softmax"}.get(m, m), 0.5)
    if clauses:
        print("\n**Result.** Strings predicted right at every position, %s." % "; ".join(clauses))


def copy_row(d):
    c = config(d)
    valid = [r for r in metrics(d) if r["split"] == "valid"]
    test = read_json(os.path.join(d, "test.json"))
    train = [r for r in metrics(d) if r["split"] == "train"]
    return dict(T=c["data"]["delay"], model=c["model"]["type"], steps=valid[-1]["step"],
                best=max(v["accuracy"] for v in valid), test=test["accuracy"],
                wall=train[-1]["elapsed"] / 60 if train else 0.0, dir=d)


def who(models, one, many):
    return "%s %s" % (" and ".join(models) if len(models) < 3 else ", ".join(models[:-1]) + " and " + models[-1],
                      one if len(models) == 1 else many)


def plateau_sentence(rows, group, label):
    """Per group (delay or steps): which models left the chance plateau (test accuracy above COPY_LEFT)."""
    out = []
    for g in sorted({r[group] for r in rows}):
        at = [r for r in rows if r[group] == g]
        left = [r["model"] for r in at if r["test"] > COPY_LEFT]
        stay = [r["model"] for r in at if r["test"] <= COPY_LEFT]
        if not left:
            out.append("%s no model has left the chance plateau" % label(g, at))
        else:
            s = "%s %s the chance plateau" % (label(g, at), who(left, "has left", "have left"))
            if stay:
                s += ", %s on it" % who(stay, "stays", "stay")
            out.append(s)
    return out


def copy(dirs):
    rows = [copy_row(d) for d in dirs]
    for r in rows:
        r["params"] = params(r["dir"])
    print(table(["T", "model", "parameters", "steps", "best valid accuracy", "test accuracy", "wall time"],
                [(r["T"], r["model"], r["params"], r["steps"], "%.3f" % r["best"], "%.3f" % r["test"],
                  "%.1f min" % r["wall"]) for r in rows]))
    label = lambda T, at: "at T = %d (%s steps)" % (T, "/".join(sorted({format(r["steps"], ",") for r in at})))
    print("\n**Result.** By test accuracy (chance %.3f, the plateau ends at %.2f): %s." % (
        COPY_CHANCE, COPY_LEFT, "; ".join(plateau_sentence(rows, "T", label))))


def copy_long(dirs):
    rows = [copy_row(d) for d in dirs]
    print(table(["T", "model", "steps", "best valid accuracy", "test accuracy"],
                [(r["T"], r["model"], r["steps"], "%.3f" % r["best"], "%.3f" % r["test"]) for r in rows]))
    label = lambda steps, at: "after %s steps" % format(steps, ",")
    print("\n**Result.** Continued at T = %s (test accuracy above %.2f leaves the chance plateau): %s." % (
        "/".join(sorted({"%d" % r["T"] for r in rows})), COPY_LEFT, "; ".join(plateau_sentence(rows, "steps", label))))


def regular_protocol(dirs):
    rows = []
    for d in dirs:
        c = config(d)
        r = read_json(os.path.join(d, "test_last.json"))
        valid = [v for v in metrics(d) if v["split"] == "valid"]
        rows.append(dict(lang=c["data"]["language"], kind=attention_kind(c), seed=c["seed"], acc=r["accuracy"],
                         b=r["bin_accuracy"], best=max(v["accuracy"] for v in valid), dir=d))
    print(table(["language", "attention", "seed", "in-distribution (2-50)", "51-100", "101-150", "best valid (2-50)"],
                [(r["lang"], r["kind"], r["seed"], "%.3f" % r["acc"], "%.3f" % r["b"][0], "%.3f" % r["b"][1],
                  "%.3f" % r["best"]) for r in rows]))
    out = []
    for lang in dict.fromkeys(r["lang"] for r in rows):
        kinds = {}
        for r in rows:
            if r["lang"] == lang:
                kinds.setdefault(r["kind"], []).append(r["acc"])
        out.append("%s: %s" % (lang, ", ".join("%s %s" % (k, " / ".join("%.3f" % a for a in v)) for k, v in kinds.items())))
    print("\n**Result.** Last-checkpoint accuracy in the training lengths (seed by seed): %s." % "; ".join(out))
    # The regular REM of the first layer in the RSA parity runs.
    lams, gates = [], []
    for r in rows:
        if r["lang"] != "parity" or r["kind"] != "rsa":
            continue
        layers = rem_params(os.path.join(r["dir"], "last.safetensors"))
        if layers and layers[0]["lambda"]:
            lams.append((r["seed"], layers[0]["lambda"][0]))
        gates += [g for layer in layers for g in layer["gate_sigma_mu"]]
    if lams:
        if len({"%.4f" % l for _, l in lams}) == 1:
            lam = "λ = %.4f in %s" % (lams[0][1], "both parity seeds" if len(lams) == 2 else
                                      "every parity seed" if len(lams) > 2 else "the parity run")
        else:
            lam = "λ = " + ", ".join("%.4f (seed %d)" % (l, s) for s, l in lams)
        print("\nThe regular REM of layer 0 of the RSA parity runs ends at %s (`rem_params.py`: λ = tanh(η)), with "
              "gates σ(μ) between %.2f and %.2f on the REM part." % (lam.replace("-", "−"), min(gates), max(gates)))


def copy_probe(files):
    """files: copy_probe.py's JSON lines, one per checkpoint (the step is the checkpoint's)."""
    by_step = {}
    for f in files:
        p = read_json(f)
        by_step.setdefault(p["step"], []).append(p)
    last = max(by_step)
    def span(ps, key, scale, fmt):
        v = sorted(p[key] * scale for p in ps)
        a, b = fmt % v[0], fmt % v[-1]
        return a if a == b else "%s-%s" % (a, b)
    ps = by_step[last]
    s = ("With ρ = %d, %s of the ten symbol states are still in the relevant set on average when the delimiter "
         "arrives, and the answer steps put %s %% of their attention on those states at %s steps" % (
             ps[0]["relevant"], span(ps, "symbol_states_in_R_at_marker_mean", 1, "%.2f"),
             span(ps, "answer_attention_on_symbol_states", 100, "%.0f"), format(last, ",")))
    earlier = [k for k in sorted(by_step) if k != last]
    if earlier:
        s += " (%s)" % ", ".join("%s %% at %s steps" % (
            span(by_step[k], "answer_attention_on_symbol_states", 100, "%.1f"), format(k, ",")) for k in earlier)
    print(s + "; the short-term buffer gets %s %% (RelRNN at T = 100, seeds %s, %d fresh sequences each)." % (
        span(ps, "answer_attention_on_S", 100, "%.0f"), " and ".join(str(p["seed"]) for p in ps), ps[0]["sequences"]))


def forecast(dirs):
    """Forecast runs (test.json, reference.json from forecast_reference.py): per attention
    and horizon the mean and spread of test MSE / MAE over the seeds, beside the
    baselines computed on the same test windows."""
    groups, base = {}, {}
    for d in dirs:
        c, t, ref = config(d), read_json(os.path.join(d, "test.json")), read_json(os.path.join(d, "reference.json"))
        H = c["data"]["horizon"]
        groups.setdefault((attention_kind(c), H), []).append((c["seed"], t["mse"], t["mae"]))
        base[H] = ref
    def spread(v):
        m = sum(v) / len(v)
        return "%.4f ± %.4f" % (m, (sum((x - m) ** 2 for x in v) / max(1, len(v) - 1)) ** 0.5) if len(v) > 1 else "%.4f" % m
    rows = []
    for (kind, H), runs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        name = {"rsa": "RSA Transformer-XL", "softmax": "Transformer-XL (softmax)"}.get(kind, kind)
        rows.append((H, name, ", ".join(str(r[0]) for r in sorted(runs)), spread([r[1] for r in runs]),
                     spread([r[2] for r in runs])))
    for H in sorted(base):
        for b, name in (("linear", "linear (least squares, NumPy)"), ("persistence", "last value repeated")):
            rows.append((H, name, "", "%.4f" % base[H][b]["mse"], "%.4f" % base[H][b]["mae"]))
    print(table(["horizon (weeks)", "model", "seeds", "test MSE", "test MAE"], rows))
    best = {}
    for (kind, H), runs in groups.items():
        v = [r[1] for r in runs]
        m = sum(v) / len(v)
        sd = (sum((x - m) ** 2 for x in v) / max(1, len(v) - 1)) ** 0.5
        best.setdefault(H, []).append((m, sd, {"rsa": "RSA", "softmax": "softmax"}.get(kind, kind)))
    parts = []
    for H in sorted(best):
        ranked = sorted(best[H])
        (m, sd, kind), lin = ranked[0], base[H]["linear"]["mse"]
        s = "at %d weeks %s attention has the lower mean MSE (%.4f)" % (H, kind, m)
        if len(ranked) > 1 and ranked[1][0] - m < max(sd, ranked[1][1]):
            s += ", by less than the spread over seeds"
        s += ", %s the linear baseline's %.4f" % ("below" if m < lin else "above", lin)
        parts.append(s)
    text = "; ".join(parts)
    print("\n**Result.** " + text[0].upper() + text[1:] + ".")


KINDS = dict(lm=lm, hybrids=hybrids, encoders=encoders, classify=classify, regular=regular, copy=copy,
             copy_long=copy_long, regular_protocol=regular_protocol, copy_probe=copy_probe, forecast=forecast)

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in KINDS:
        sys.exit("usage: tables.py %s RUN_DIR ..." % "|".join(KINDS))
    KINDS[sys.argv[1]](sys.argv[2:])
