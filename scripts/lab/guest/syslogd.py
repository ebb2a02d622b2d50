#!/usr/bin/python3
"""A minimal syslog sink on /dev/log for the tiny-init guest (no syslog daemon there): every
datagram the daemon sends as an alert is appended, with the guest's wall clock, to the file
named on the command line. usage: syslogd.py /dev/log OUTFILE"""
import os, socket, sys, time

path, out = sys.argv[1], sys.argv[2]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
with open(out, "a", buffering=1) as f:
    while True:
        d = s.recv(65536)
        f.write("%.3f %s\n" % (time.time(), d.decode(errors="replace").rstrip("\n")))
