#!/usr/bin/python3
"""Watches one RDMA device's identity every 50 ms, in one process (no fork per sample: under
TCG on a loaded host, `rdma link show -j | jq` takes seconds). A re-created device is a new
kernfs node, hence a new inode of /sys/class/infiniband/<dev>; a deleted one is absent.
Lines: "<epoch> present <inode>" or "<epoch> absent", one per change.
usage: devwatch.py DEVICE"""
import os, sys, time

path = "/sys/class/infiniband/" + sys.argv[1]
last = None
while True:
    try:
        cur = "present %d" % os.stat(path).st_ino
    except OSError:
        cur = "absent"
    if cur != last:
        print("%.3f %s" % (time.time(), cur), flush=True)
        last = cur
    time.sleep(0.05)
