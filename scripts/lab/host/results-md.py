#!/usr/bin/python3
"""Turns a lab results folder into the Markdown tables of docs/lab-results.md: one row per
verdict (batch, kernel, scenario, verdict, reason) and one per figure.
usage: results-md.py RESULTS_DIR"""
import glob, os, sys

r = sys.argv[1].rstrip("/")
rows, figs = [], []
for b in sorted(glob.glob(r + "/*/")):
    batch = os.path.basename(b.rstrip("/"))
    kernel = ""
    if os.path.exists(b + "kernel.txt"):
        kernel = open(b + "kernel.txt").read().strip()
    if os.path.exists(b + "verdicts.txt"):
        for line in open(b + "verdicts.txt"):
            p = line.rstrip("\n").split(" ", 3)
            if len(p) >= 3 and p[0] == "VERDICT":
                rows.append((batch, kernel, p[1], p[2], p[3] if len(p) > 3 else ""))
    if os.path.exists(b + "figures.txt"):
        for line in open(b + "figures.txt"):
            p = line.split()
            if len(p) == 4 and p[0] == "FIGURE":
                figs.append((batch, kernel, p[1], p[2], p[3]))
print("| Batch | Kernel | Scenario | Verdict | Reason |")
print("|---|---|---|---|---|")
for b, k, s, v, why in rows:
    print("| %s | %s | %s | **%s** | %s |" % (b, k, s, v, why.replace("|", "/").replace(";", "; ")))
print()
print("| Batch | Scenario | Figure | Value |")
print("|---|---|---|---|")
for b, k, s, n, v in figs:
    print("| %s | %s | %s | %s |" % (b, s, n, v))
