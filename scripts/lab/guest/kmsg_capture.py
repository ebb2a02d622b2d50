#!/usr/bin/env python3
"""Raw /dev/kmsg records for fixtures (standard library only).

usage: kmsg_capture.py OUTFILE SINCE_S [UNTIL_S]

Reads the kernel's ring through /dev/kmsg (one record per read(), from the oldest retained)
and writes every record whose timestamp (seconds since boot) is in [SINCE_S, UNTIL_S] to
OUTFILE exactly as read: the "pri,seq,usec,flags;text" line and its " KEY=value" dictionary
lines (tests/fixtures/kmsg/README.md).
"""
import errno, os, sys

out, since = sys.argv[1], float(sys.argv[2])
until = float(sys.argv[3]) if len(sys.argv) > 3 else float("inf")
fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
kept = 0
with open(out, "wb") as f:
    while True:
        try:
            rec = os.read(fd, 16384)
        except OSError as e:
            if e.errno == errno.EAGAIN:
                break
            if e.errno == errno.EPIPE:  # overwritten while reading: go on from the next
                continue
            raise
        head = rec.split(b";", 1)[0].split(b",")
        t = int(head[2]) / 1e6 if len(head) > 2 else 0
        if since <= t <= until:
            f.write(rec if rec.endswith(b"\n") else rec + b"\n")
            kept += 1
print("%s: %d record(s)" % (out, kept))
