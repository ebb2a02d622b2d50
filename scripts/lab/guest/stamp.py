#!/usr/bin/env python3
# Prefixes each line of stdin with the wall-clock time it arrived ("<epoch> "), so that the
# daemon's log (no timestamps when it does not write to a terminal) can be laid beside the
# lab's own timelines (devwatch.log, io.log, qp1.log) on one clock.
import sys, time
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(b"%.3f " % time.time() + line)
    sys.stdout.buffer.flush()
