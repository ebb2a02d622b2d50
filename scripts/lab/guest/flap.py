#!/usr/bin/env python3
"""A flapping target: its host answers for UP_S, then not for DOWN_S, COUNT times.

usage: flap.py DEV UP_S DOWN_S COUNT LOG

One `tc -force -batch -` process applies every change (a tc process per change took 0.5-0.8 s
to start under TCG and stretched a 0.4 s window to 2 s); "off" is netem loss 100% on DEV's
root (everything the target sends is lost), "on" deletes it. LOG gets "<epoch> on|off" as
each change is handed to tc, and "<epoch> done" at the end (the target is left off).
"""
import subprocess, sys, time

dev, up, down, count, log = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
tc = subprocess.Popen(["tc", "-force", "-batch", "-"], stdin=subprocess.PIPE, text=True)
with open(log, "a", buffering=1) as out:
    def change(cmd, what):
        tc.stdin.write(cmd + "\n")
        tc.stdin.flush()
        out.write("%.3f %s\n" % (time.time(), what))
    for _ in range(count):
        change("qdisc del dev %s root" % dev, "on")
        time.sleep(up)
        change("qdisc replace dev %s root netem loss 100%%" % dev, "off")
        time.sleep(down)
    tc.stdin.close()
    tc.wait()
    out.write("%.3f done\n" % time.time())
