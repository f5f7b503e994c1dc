# SPDX-License-Identifier: BSD-3-Clause
"""Learning curves and the table of the official-recipe copy runs
(tools/experiments/copy_official.sh): one PNG (valid accuracy and valid loss against steps,
T = 100 and T = 200) drawn by gnuplot, and a Markdown table on stdout.

  /usr/bin/python3 tools/experiments/copy_curves.py out/copy_official docs/copy_curves.png
"""
import json
import math
import os
import subprocess
import sys
import tempfile

out_dir, png = sys.argv[1], sys.argv[2]
MODELS = ["relrnn", "lstm", "rnn"]
COLORS = {"relrnn": "#cc3311", "lstm": "#0077bb", "rnn": "#009988"}
walltime = {}
if os.path.exists(os.path.join(out_dir, "walltime.txt")):
    for line in open(os.path.join(out_dir, "walltime.txt")):
        name, secs, _ = line.split()
        walltime[name] = walltime.get(name, 0) + int(secs)


def runs():
    for T in (100, 200):
        for m in MODELS:
            for seed in (1, 2):
                name = "%s_T%d_s%d" % (m, T, seed)
                if os.path.exists(os.path.join(out_dir, name, "metrics.jsonl")):
                    yield T, m, seed, name


tmp = tempfile.mkdtemp()
plots = {100: {"acc": [], "loss": []}, 200: {"acc": [], "loss": []}}
rows = []
for T, m, seed, name in runs():
    valid = [json.loads(l) for l in open(os.path.join(out_dir, name, "metrics.jsonl")) if '"valid"' in l]
    if not valid:
        continue
    dat = os.path.join(tmp, name + ".dat")
    with open(dat, "w") as f:
        for v in valid:
            f.write("%d %g %g\n" % (v["step"], v["accuracy"], v["loss"]))
    style = "lw 2 dt %d lc rgb '%s'" % (1 if seed == 1 else 2, COLORS[m])
    plots[T]["acc"].append("'%s' using 1:2 with lines %s title '%s seed %d'" % (dat, style, m, seed))
    plots[T]["loss"].append("'%s' using 1:3 with lines %s notitle" % (dat, style))
    test = {}
    tp = os.path.join(out_dir, name, "test.json")
    if os.path.exists(tp) and os.path.getsize(tp) > 0:
        test = json.loads(open(tp).read().strip().splitlines()[-1])
    rows.append((T, m, seed, valid[-1]["step"], max(v["accuracy"] for v in valid), valid[-1]["accuracy"],
                 test.get("accuracy", float("nan")), valid[-1]["loss"], 10 * math.log(8) / (T + 20),
                 walltime.get(name, 0) / 60))

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
print("| T | model | seed | steps | best valid acc | last valid acc | test acc (last) | last valid loss | memoryless loss | wall (min) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %d | %s | %d | %d | %.3f | %.3f | %.3f | %.4f | %.4f | %.1f |" % r)
