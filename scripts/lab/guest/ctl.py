#!/usr/bin/python3
"""Talks to iser-guard's control socket directly (JSON lines, one request per connection),
bypassing the CLI: proves the socket protocol itself. Prints every reply line; exits with the
final `done` line's exit_code (3 if the connection ends without one).
usage: ctl.py SOCKET '{"cmd":"status"}'"""
import json, socket, sys

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(120)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
buf = b""
code = 3
while True:
    d = s.recv(65536)
    if not d:
        break
    buf += d
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        print(line.decode(errors="replace"))
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("type") == "done":
            code = int(r.get("exit_code", 3))
sys.exit(code)
