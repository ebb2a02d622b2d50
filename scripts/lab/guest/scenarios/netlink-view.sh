# iser-guard's netlink view against iproute2's: `status --json` links and `qps --json` rows
# must equal `rdma link show -j` and `rdma resource show qp -j` field for field (PSNs move with
# traffic, so the product's answer must equal iproute2's from just before or just after it, or,
# with traffic between all three, have every other field equal and its PSNs between theirs).
scenario_netlink_view() {
	local d=$SOUT
	rdma link show -j > $d/rdma-link-1.json
	rdma resource show qp -j > $d/rdma-qp-1.json
	$IG status --json > $d/status.json 2> $d/status.err; echo $? > $d/status.rc
	$IG qps --json > $d/qps.json 2> $d/qps.err; echo $? > $d/qps.rc
	rdma link show -j > $d/rdma-link-2.json
	rdma resource show qp -j > $d/rdma-qp-2.json
	check "status --json exit 0" [ "$(cat $d/status.rc)" = 0 ]
	check "qps --json exit 0" [ "$(cat $d/qps.rc)" = 0 ]
	python3 - $d > $d/compare.txt 2>&1 <<'EOP'
import json, sys
d = sys.argv[1]
def load(n):
    return json.load(open("%s/%s" % (d, n)))
ok = True
st = load("status.json")
links = {(l["ifname"], l["port"]): l for dev in st.get("devices", []) for l in dev.get("links", [])}
for n in ("rdma-link-1.json", "rdma-link-2.json"):
    bad = []
    for r in load(n):
        l = links.get((r["ifname"], r["port"]))
        if l is None:
            bad.append("missing link %s/%s" % (r["ifname"], r["port"])); continue
        for k, v in r.items():
            if l.get(k) != v:
                bad.append("%s/%s %s: iproute2 %r, iser-guard %r" % (r["ifname"], r["port"], k, v, l.get(k)))
    if not bad:
        print("links match %s" % n); break
    print("links differ from %s: %s" % (n, "; ".join(bad)))
else:
    ok = False
q = load("qps.json")
for n in ("rdma-qp-1.json", "rdma-qp-2.json"):
    r = load(n)
    if q == r and all(list(a.keys()) == list(b.keys()) for a, b in zip(q, r)):
        print("qps match %s (order and keys included)" % n); break
    print("qps differ from %s:\n iproute2 %s\n iser-guard %s" % (n, json.dumps(r), json.dumps(q)))
else:
    # Traffic between all three dumps (a NOP-Out, 2026-12-02 on Debian 13): every field but
    # the PSNs equal to both dumps, keys in order, and each PSN between the two dumps' (24-bit
    # sequence numbers: the distance forward from the first, modulo 2^24)
    r1, r2 = load("rdma-qp-1.json"), load("rdma-qp-2.json")
    PSN = ("rq-psn", "sq-psn")
    def fwd(a, b): return (b - a) % (1 << 24)
    bad = []
    if not (len(q) == len(r1) == len(r2)):
        bad.append("row counts %d, %d, %d" % (len(r1), len(q), len(r2)))
    for a, m, b in zip(r1, q, r2):
        if not (list(a.keys()) == list(m.keys()) == list(b.keys())):
            bad.append("keys differ: %s / %s / %s" % (list(a), list(m), list(b))); continue
        for k in m:
            if k in PSN:
                if not fwd(a[k], m[k]) <= fwd(a[k], b[k]):
                    bad.append("%s/%s qp %s %s %s not between %s and %s" % (m["ifname"], m["port"], m["lqpn"], k, m[k], a[k], b[k]))
            elif not (a[k] == m[k] == b[k]):
                bad.append("%s/%s qp %s %s: %r / %r / %r" % (m.get("ifname"), m.get("port"), m.get("lqpn"), k, a[k], m[k], b[k]))
    if bad:
        print("qps differ from both dumps beyond the PSNs' movement: " + "; ".join(bad))
        ok = False
    else:
        print("qps match both dumps field for field (order and keys included), the PSNs between the two dumps' (traffic between them)")
sys.exit(0 if ok else 1)
EOP
	local rc=$?
	check "netlink view equals iproute2's ($(tr '\n' ' ' < $d/compare.txt | cut -c1-200))" [ $rc = 0 ]
}
