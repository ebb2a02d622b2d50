#!/usr/bin/env python3
"""Kernel-record-to-decision latency of the daemon against `dmesg -W | grep --line-buffered`.

Usage (root: it writes to /dev/kmsg):
    scripts/measure-latency.py [--records N] [--rate R] [--load K] [--runs M] \
        [--bin target/release/iser-guard [--bin OTHER[@SLICE_US] ...]] [--] [extra daemon arguments]

Starts one daemon per --bin (`--dry-run daemon`, each with its own lab configuration in a
temporary directory: the real /dev/kmsg, state and control socket in the directory, syslog
off, an iscsiadm stub) and `dmesg -W | grep --line-buffered 'detected conn error'` side by
side, optionally K CPU hogs (`sh -c 'while :; do :; done'`, killed at the end of the run:
the loaded machine), then writes N records at R per second to /dev/kmsg, each
`connectionID:0: detected conn error (1011)` with its own ID (the device is reopened for
each record, so the printk_devkmsg rate limit never drops one). Every reader sees the same
records at the same moment under the same load, so the ratios are paired: two binaries
(e.g. main's and a branch's) given with --bin are compared in one run. `PATH@US` sets a
custom scheduler slice of US microseconds on that daemon's loop thread from outside (what
the daemon now does itself), to compare a binary with and without it.

A record counts as decided when the daemon logs its classified-event line (`kernel log:
iSCSI connection of session ID failed ...`); the grep pipeline's time is when grep prints
it. Both are read by this script with the same monotonic clock, from the instant just
before the write. Prints p50/p90/p99/max of each reader and the daemon/grep ratios of p50
and p99, per run and, with --runs M > 1, their medians with min and max over the runs.

Records written by userspace are untrusted by the daemon (kmsg.trust-userspace-records =
false): classified and logged, nothing acted on. Keep N small (a few thousand): the
kernel ring is shared with everything else on the machine.
"""

import argparse
import ctypes
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


def median(values):
    return percentile(values, 50)


def reader(stream, pattern, arrivals):
    for raw in iter(stream.readline, b""):
        m = pattern.search(raw)
        if m:
            rid = int(m.group(1))
            arrivals.setdefault(rid, time.monotonic_ns())


class SchedAttr(ctypes.Structure):
    # struct sched_attr, SCHED_ATTR_SIZE_VER1 (include/uapi/linux/sched/types.h)
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32),
                ("flags", ctypes.c_uint64), ("nice", ctypes.c_int32),
                ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64),
                ("util_min", ctypes.c_uint32), ("util_max", ctypes.c_uint32)]


def set_slice(tid, slice_us):
    """SCHED_OTHER with a custom slice (EEVDF, Linux 6.12+) on one thread, nice 0: what the
    daemon asks for itself on its loop thread (daemon::sources::request_short_slice). Only
    for comparing binaries built before that; x86_64 syscall number."""
    attr = SchedAttr(size=ctypes.sizeof(SchedAttr), policy=0, runtime=slice_us * 1000)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(314, tid, ctypes.byref(attr), 0) != 0:
        print(f"measure-latency: sched_setattr({tid}): errno {ctypes.get_errno()}", file=sys.stderr)


def lab_config(tmp):
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
    return cfg


def one_run(a, run_no):
    """One run: every daemon and the grep pipeline on the same records. Returns
    {reader name: [latency ms]} and the number of records written."""
    tmps = [tempfile.mkdtemp(prefix="iser-lat-") for _ in a.bin]
    base = 100000 + (os.getpid() % 1000) * 1000 + run_no * 100000
    env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
    written = {}
    readers = []  # (name, process, arrivals)
    threads = []
    for i, (spec, tmp) in enumerate(zip(a.bin, tmps)):
        binary, _, slice_us = spec.partition("@")
        p = subprocess.Popen(
            [binary, "--config", lab_config(tmp)] + a.extra + ["daemon", "--dry-run"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )
        if slice_us:
            time.sleep(0.3)  # past the daemon's start (its loop runs on the main thread)
            set_slice(p.pid, int(slice_us))
        arrivals = {}
        name = f"daemon {i + 1}" if len(a.bin) > 1 else "daemon"
        readers.append((name, p, arrivals))
        threads.append(threading.Thread(
            target=reader, daemon=True,
            args=(p.stderr, re.compile(rb"session (\d+) failed"), arrivals)))
    grep = subprocess.Popen(
        ["sh", "-c", "exec dmesg -W | grep --line-buffered 'detected conn error'"],
        stdout=subprocess.PIPE, start_new_session=True,
    )
    grep_at = {}
    threads.append(threading.Thread(
        target=reader, daemon=True,
        args=(grep.stdout, re.compile(rb"connection(\d+):0"), grep_at)))
    for t in threads:
        t.start()
    hogs = [
        subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
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
            os.killpg(h.pid, signal.SIGKILL)
            h.wait()
        for _, p, _ in readers:
            p.send_signal(signal.SIGTERM)
        for _, p, _ in readers:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        os.killpg(grep.pid, signal.SIGTERM)
        grep.wait()
        for tmp in tmps:
            subprocess.run(["rm", "-rf", tmp])

    def lat(arrivals):
        return [(arrivals[r] - t0) / 1e6 for r, t0 in written.items() if r in arrivals]

    out = {name: lat(arr) for name, _, arr in readers}
    out["dmesg -W | grep"] = lat(grep_at)
    return out, len(written)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=40.0)
    ap.add_argument("--load", type=int, default=0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--bin", action="append")
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    a.bin = a.bin or ["target/release/iser-guard"]
    if os.geteuid() != 0:
        print("measure-latency: needs root (writes to /dev/kmsg)", file=sys.stderr)
        return 77

    ratios = {}  # name -> [(p50 ratio, p99 ratio)]
    for run_no in range(a.runs):
        res, n = one_run(a, run_no)
        print(f"run {run_no + 1}/{a.runs}: records: {n} at {a.rate}/s, CPU hogs: {a.load}")
        for i, b in enumerate(a.bin):
            print(f"  daemon {i + 1}: {b}" if len(a.bin) > 1 else f"  binary: {b}")
        for name, v in res.items():
            print(
                f"  {name:16} seen {len(v):5}  p50 {percentile(v, 50):8.2f} ms  p90 {percentile(v, 90):8.2f} ms"
                f"  p99 {percentile(v, 99):8.2f} ms  max {max(v) if v else float('nan'):8.2f} ms"
            )
        g = res["dmesg -W | grep"]
        for name, v in res.items():
            if name == "dmesg -W | grep" or not v or not g:
                continue
            r50 = percentile(v, 50) / percentile(g, 50)
            r99 = percentile(v, 99) / percentile(g, 99)
            ratios.setdefault(name, []).append((r50, r99))
            print(f"  {name}: p50 ratio daemon/grep {r50:.2f}, p99 ratio daemon/grep: {r99:.2f}")
        sys.stdout.flush()
    if a.runs > 1:
        print(f"over {a.runs} runs (median [min-max]):")
        for name, rs in ratios.items():
            r50 = [r[0] for r in rs]
            r99 = [r[1] for r in rs]
            print(f"  {name}: p50 ratio {median(r50):.2f} [{min(r50):.2f}-{max(r50):.2f}], "
                  f"p99 ratio {median(r99):.2f} [{min(r99):.2f}-{max(r99):.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
