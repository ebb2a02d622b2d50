#!/usr/bin/env python3
"""Raw RDMA nldev netlink capture for fixtures (standard library only).

usage: nldev_capture.py OUTDIR "what the moment is"

Sends the requests the daemon sends (a GET dump, then a RES_QP_GET dump and a RES_CM_ID_GET
dump per device) over socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA=20) and writes, per request,
OUTDIR/NN-NAME.hex in the format of tests/fixtures/nldev (README.md there):
  line 1      '# captured: kernel ...; moment ...; request ...'
  '#' lines   comments ('# << recv N' marks each recv() datagram)
  other lines the hex of one whole netlink message (nlmsghdr included, nlmsg_len bytes): the
              first is the request as sent, every further one a reply in arrival order.
"""
import os, socket, struct, sys

NETLINK_RDMA = 20
RDMA_NL_NLDEV = 5
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
GET, RES_QP_GET, RES_CM_ID_GET = 1, 10, 11
ATTR_DEV_INDEX, ATTR_DEV_NAME = 1, 2


def nla(kind, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * ((4 - n % 4) % 4)


def request(op, seq, attrs=b""):
    body = attrs
    return struct.pack("=IHHII", 16 + len(body), (RDMA_NL_NLDEV << 10) | op,
                       NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq, 0) + body


def exchange(sock, msg):
    """The replies of one dump: (datagram index, message bytes) until DONE or an error."""
    sock.send(msg)
    out, n = [], 0
    while True:
        data = sock.recv(1 << 20)
        n += 1
        off = 0
        while off + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, off)
            if length < 16:
                return out
            out.append((n, data[off:off + length]))
            off += (length + 3) & ~3
            if kind in (NLMSG_DONE, NLMSG_ERROR):
                return out


def devices(replies):
    """(index, name) of every device in a GET dump."""
    found = []
    for _, m in replies:
        if struct.unpack_from("=H", m, 4)[0] != (RDMA_NL_NLDEV << 10) | GET:
            continue
        off, idx, name = 16, None, None
        while off + 4 <= len(m):
            l, k = struct.unpack_from("=HH", m, off)
            if l < 4:
                break
            v = m[off + 4:off + l]
            if k & 0x3fff == ATTR_DEV_INDEX:
                idx = struct.unpack("=I", v[:4])[0]
            elif k & 0x3fff == ATTR_DEV_NAME:
                name = v.rstrip(b"\0").decode()
            off += (l + 3) & ~3
        if idx is not None:
            found.append((idx, name))
    return found


def write(path, header, msg, replies):
    with open(path, "w") as f:
        f.write(header + "\n")
        f.write(msg.hex() + "\n")
        last = None
        for n, m in replies:
            if n != last:
                f.write("# << recv %d\n" % n)
                last = n
            f.write(m.hex() + "\n")


def main():
    out, moment = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    kernel = os.uname().release
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_RDMA)
    sock.bind((0, 0))
    seq, nr = 1000, 0

    def capture(name, op, attrs=b"", what=""):
        nonlocal seq, nr
        seq += 1
        nr += 1
        msg = request(op, seq, attrs)
        replies = exchange(sock, msg)
        write(os.path.join(out, "%02d-%s.hex" % (nr, name)),
              "# captured: kernel %s; moment %s; request %s" % (kernel, moment, what or name),
              msg, replies)
        return replies

    devs = devices(capture("get-dump", GET, what="RDMA_NLDEV_CMD_GET dump"))
    for idx, name in devs:
        dev = struct.pack("=I", idx)
        capture("res-qp-%s" % name, RES_QP_GET, nla(ATTR_DEV_INDEX, dev),
                "RDMA_NLDEV_CMD_RES_QP_GET dump, DEV_INDEX %d (%s)" % (idx, name))
        capture("res-cm-id-%s" % name, RES_CM_ID_GET, nla(ATTR_DEV_INDEX, dev),
                "RDMA_NLDEV_CMD_RES_CM_ID_GET dump, DEV_INDEX %d (%s)" % (idx, name))
    print("%s: %d request(s), devices %s" % (out, nr, devs))


if __name__ == "__main__":
    main()
