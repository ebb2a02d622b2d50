#!/usr/bin/env python3
"""Kernel-record-to-decision latency of the daemon against `dmesg -W | grep --line-buffered`.

Usage (root: it writes to /dev/kmsg):
    scripts/measure-latency.py [--records N] [--rate R] [--load K] [--load-secs S] \
        [--bin target/release/iser-guard] [--] [extra daemon arguments]

Starts the daemon (`--dry-run daemon`, a lab configuration in a temporary directory: the
real /dev/kmsg, state and control socket in the directory, syslog off, an iscsiadm stub)
and `dmesg -W | grep --line-buffered 'detected conn error'` side by side, optionally K CPU
hogs (`sh -c 'while :; do :; done'`, killed after S seconds: the loaded machine), then
writes N records at R per second to /dev/kmsg, each `connectionID:0: detected conn error
(1011)` with its own ID (the device is reopened for each record, so the printk_devkmsg
rate limit never drops one). A record counts as decided when the daemon logs its
classified-event line (`kernel log: iSCSI connection of session ID failed ...`); the grep
pipeline's time is when grep prints it. Both are read by this script with the same
monotonic clock, from the instant just before the write. Prints p50/p90/p99/max of both.

Records written by userspace are untrusted by the daemon (kmsg.trust-userspace-records =
false): classified and logged, nothing acted on. Keep N small (a few thousand): the
kernel ring is shared with everything else on the machine.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def reader(stream, pattern, arrivals):
    for raw in iter(stream.readline, b""):
        m = pattern.search(raw)
        if m:
            rid = int(m.group(1))
            arrivals.setdefault(rid, time.monotonic_ns())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=40.0)
    ap.add_argument("--load", type=int, default=0)
    ap.add_argument("--load-secs", type=int, default=120)
    ap.add_argument("--bin", default="target/release/iser-guard")
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("measure-latency: needs root (writes to /dev/kmsg)", file=sys.stderr)
        return 77

    tmp = tempfile.mkdtemp(prefix="iser-lat-")
    stub = os.path.join(tmp, "iscsiadm")
    with open(stub, "w") as f:
        f.write('#!/bin/sh\necho "iscsiadm: No active sessions." >&2\nexit 21\n')
    os.chmod(stub, 0o755)
    os.mkdir(os.path.join(tmp, "sysfs"))
    cfg = os.path.join(tmp, "config.toml")
    with open(cfg, "w") as f:
        f.write(
            f'[paths]\nkmsg = "/dev/kmsg"\nsysfs-root = "{tmp}/sysfs"\nstate-dir = "{tmp}/state"\n'
            f'iscsiadm = "{stub}"\ncontrol-socket = "{tmp}/control.sock"\n'
            "[alerts]\nsyslog = false\n[kmsg]\ntrust-userspace-records = false\n"
        )

    base = 100000 + (os.getpid() % 1000) * 1000
    daemon_at, grep_at, written = {}, {}, {}
    env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
    daemon = subprocess.Popen(
        [a.bin, "--config", cfg] + a.extra + ["daemon", "--dry-run"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    grep = subprocess.Popen(
        ["sh", "-c", "exec dmesg -W | grep --line-buffered 'detected conn error'"],
        stdout=subprocess.PIPE, start_new_session=True,
    )
    threads = [
        threading.Thread(target=reader, daemon=True,
                         args=(daemon.stderr, re.compile(rb"session (\d+) failed"), daemon_at)),
        threading.Thread(target=reader, daemon=True,
                         args=(grep.stdout, re.compile(rb"connection(\d+):0"), grep_at)),
    ]
    for t in threads:
        t.start()
    hogs = [
        subprocess.Popen(["timeout", str(a.load_secs), "sh", "-c", "while :; do :; done"])
        for _ in range(a.load)
    ]
    time.sleep(a.settle)
    try:
        period = 1.0 / a.rate
        t_next = time.monotonic()
        for i in range(a.records):
            rid = base + i
            line = f"<3>connection{rid}:0: detected conn error (1011)\n".encode()
            fd = os.open("/dev/kmsg", os.O_WRONLY)
            written[rid] = time.monotonic_ns()
            os.write(fd, line)
            os.close(fd)
            t_next += period
            delay = t_next - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        time.sleep(3.0)
    finally:
        for h in hogs:
            h.kill()
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=5)
        except subprocess.TimeoutExpired:
            daemon.kill()
        os.killpg(grep.pid, signal.SIGTERM)
        grep.wait()
        subprocess.run(["rm", "-rf", tmp])

    def lat(arrivals):
        return [(arrivals[r] - t0) / 1e6 for r, t0 in written.items() if r in arrivals]

    print(f"records: {len(written)} at {a.rate}/s, CPU hogs: {a.load}, binary: {a.bin}")
    for name, arr in (("daemon", daemon_at), ("dmesg -W | grep", grep_at)):
        v = lat(arr)
        print(
            f"  {name:16} seen {len(v):5}  p50 {percentile(v, 50):8.2f} ms  p90 {percentile(v, 90):8.2f} ms"
            f"  p99 {percentile(v, 99):8.2f} ms  max {max(v) if v else float('nan'):8.2f} ms"
        )
    d, g = lat(daemon_at), lat(grep_at)
    if d and g:
        print(f"  p99 ratio daemon/grep: {percentile(d, 99) / percentile(g, 99):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
