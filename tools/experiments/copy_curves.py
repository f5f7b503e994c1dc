# SPDX-License-Identifier: BSD-3-Clause
"""Learning curves, table and result sentences of the official-recipe copy runs
(tools/experiments/copy_official.sh): one PNG (valid accuracy and valid loss against steps,
T = 100 and T = 200) drawn by gnuplot, and on stdout the Markdown table followed by the
**Result.** paragraph that quotes it (docs/results.md's copy_official block).

  /usr/bin/python3 tools/experiments/copy_curves.py out/copy_official docs/copy_curves.png
"""
import json
import math
import os
import subprocess
import sys
import tempfile

MODELS = ["relrnn", "lstm", "rnn"]
COLORS = {"relrnn": "#cc3311", "lstm": "#0077bb", "rnn": "#009988"}
NAMES = {"relrnn": "RelRNN", "lstm": "the LSTM", "rnn": "the plain RNN"}
CHANCE = 0.125  # 8 symbols
LEFT = 0.15  # a test accuracy above this has left the chance plateau
TREND = 1000  # the RelRNN trend sentence looks at the last TREND steps (half the run when shorter)


def walltimes(out_dir):
    """Seconds per run: the lines "NAME SECONDS s" of walltime.txt, summed over the passes of a resumed run."""
    walltime = {}
    path = os.path.join(out_dir, "walltime.txt")
    if os.path.exists(path):
        for line in open(path):
            name, secs, _ = line.split()
            walltime[name] = walltime.get(name, 0) + int(secs)
    return walltime


def collect(out_dir):
    """[(row, valid points)] for every finished run in out_dir, T = 100 first."""
    walltime = walltimes(out_dir)
    runs = []
    for T in (100, 200):
        for m in MODELS:
            for seed in (1, 2):
                name = "%s_T%d_s%d" % (m, T, seed)
                path = os.path.join(out_dir, name, "metrics.jsonl")
                if not os.path.exists(path):
                    continue
                valid = [json.loads(l) for l in open(path) if '"valid"' in l]
                if not valid:
                    continue
                test = {}
                tp = os.path.join(out_dir, name, "test.json")
                if os.path.exists(tp) and os.path.getsize(tp) > 0:
                    test = json.loads(open(tp).read().strip().splitlines()[-1])
                row = dict(T=T, model=m, seed=seed, steps=valid[-1]["step"], best=max(v["accuracy"] for v in valid),
                           last=valid[-1]["accuracy"], test=test.get("accuracy", float("nan")), loss=valid[-1]["loss"],
                           memoryless=10 * math.log(8) / (T + 20), wall=walltime.get(name, 0) / 60, name=name)
                runs.append((row, valid))
    return runs


def plot(runs, png):
    tmp = tempfile.mkdtemp()
    plots = {100: {"acc": [], "loss": []}, 200: {"acc": [], "loss": []}}
    for row, valid in runs:
        dat = os.path.join(tmp, row["name"] + ".dat")
        with open(dat, "w") as f:
            for v in valid:
                f.write("%d %g %g\n" % (v["step"], v["accuracy"], v["loss"]))
        style = "lw 2 dt %d lc rgb '%s'" % (1 if row["seed"] == 1 else 2, COLORS[row["model"]])
        plots[row["T"]]["acc"].append("'%s' using 1:2 with lines %s title '%s seed %d'" % (dat, style, row["model"], row["seed"]))
        plots[row["T"]]["loss"].append("'%s' using 1:3 with lines %s notitle" % (dat, style))
    gp = os.path.join(tmp, "plot.gp")
    with open(gp, "w") as f:
        f.write("set terminal pngcairo size 1200,800 font ',10'\nset output '%s'\n" % png)
        f.write("set multiplot layout 2,2 title 'Copy task, official MemoryNets recipe (RMSprop, batch 10, one-hot, official init)'\n")
        f.write("set grid\nset xlabel 'step'\n")
        for T in (100, 200):
            plateau = 10 * math.log(8) / (T + 20)
            f.write("set title 'T = %d: valid accuracy on the recalled symbols (chance 0.125)'\n" % T)
            f.write("set ylabel 'accuracy'\nset yrange [0:*]\nset key top left\n")
            f.write("plot " + ", ".join(plots[T]["acc"] + ["0.125 with lines lc rgb '#999999' dt 3 title 'chance'"]) + "\n")
            f.write("set title 'T = %d: valid loss per position (nats)'\n" % T)
            f.write("set ylabel 'loss'\nset yrange [0:0.4]\nset key top right\n")
            f.write("plot " + ", ".join(plots[T]["loss"] + ["%g with lines lc rgb '#999999' dt 3 title 'memoryless %.4f'" % (plateau, plateau)]) + "\n")
        f.write("unset multiplot\n")
    subprocess.check_call(["gnuplot", gp])


def table(runs):
    lines = ["| T | model | seed | steps | best valid acc | last valid acc | test acc (last) | last valid loss | memoryless loss | wall (min) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r, _ in runs:
        lines.append("| %d | %s | %d | %d | %.3f | %.3f | %.3f | %.4f | %.4f | %.1f |" % (
            r["T"], r["model"], r["seed"], r["steps"], r["best"], r["last"], r["test"], r["loss"], r["memoryless"], r["wall"]))
    return "\n".join(lines)


def result(runs):
    """The **Result** paragraph: the verdict on the claim, the ranking per delay, RelRNN's trend."""
    rows = [r for r, _ in runs]
    Ts = sorted({r["T"] for r in rows})
    mean = {}
    for r in rows:
        mean.setdefault((r["T"], r["model"]), []).append(r["test"])
    mean = {k: sum(v) / len(v) for k, v in mean.items()}
    holds = all(mean.get((T, "relrnn"), -1) > max(v for (t, m), v in mean.items() if t == T and m != "relrnn")
                for T in Ts if any(m != "relrnn" for t, m in mean if t == T))
    parts = []
    for T in Ts:
        ranked = sorted([m for t, m in mean if t == T], key=lambda m: -mean[(T, m)])
        steps = max(r["steps"] for r in rows if r["T"] == T)
        parts.append("at T = %d (%s steps) %s" % (T, format(steps, ","), ", ".join(
            "%s %.3f%s" % (NAMES[m], mean[(T, m)], " (chance level)" if mean[(T, m)] <= LEFT else "") for m in ranked)))
    text = ("**Result: the claim %s at this budget.** Mean test accuracy over the seeds, best first (chance %.3f; "
            "up to %.2f counts as chance level): %s." % (
                "holds" if holds else "does not hold", CHANCE, LEFT, "; ".join(parts)))
    # RelRNN's trend over the end of the longest runs.
    T = Ts[0] if Ts else None
    trend = []
    for r, valid in runs:
        if r["model"] != "relrnn" or r["T"] != T or len(valid) < 2:
            continue
        span = TREND if r["steps"] > TREND else r["steps"] // 2
        start = min(valid, key=lambda v: abs(v["step"] - (r["steps"] - span)))
        trend.append((r["seed"], start, valid[-1], span))
    if trend:
        span = trend[0][3]
        text += (" Over the last %s steps at T = %d, RelRNN's valid accuracy went %s, its valid loss %s." % (
            format(span, ","), T,
            " and ".join("%.3f → %.3f (seed %d)" % (a["accuracy"], b["accuracy"], s) for s, a, b, _ in trend),
            " and ".join("%.3f → %.3f" % (a["loss"], b["loss"]) for s, a, b, _ in trend)))
    return text


if __name__ == "__main__":
    out_dir, png = sys.argv[1], sys.argv[2]
    runs = collect(out_dir)
    plot(runs, png)
    print(table(runs))
    if runs:
        print()
        print(result(runs))
