#!/usr/bin/env python3
"""Judges what `iser-guard doctor` and `doctor --active` gave on the lab guest (scenarios
doctor and doctor-active). Prints one line per expectation, "CHECK 1|0 <what>", and measured
figures, "FIGURE <name> <value>"; the scenario turns them into its checks and figures
(guest/scenarios/doctor-common.sh). It reads the reports only: what the guest's kernel
shows (devwatch, the QP table, the session) the scenario checks itself.

  doctor_check.py audit JSON RC KERNEL_RELEASE INIT DAEMON KMOD
      (INIT tiny|systemd, DAEMON none|running, KMOD lab|stock: which rdma_rxe is loaded)
  doctor_check.py text TEXT RC JSON
  doctor_check.py active REPORT SECRET
"""
import json
import re
import sys

INI, TGT, NETDEV = "rxe_ini", "rxe_tgt", "ini0"
PORTAL = "192.0.2.2:3260"
IQN = "iqn.2003-01.org.example.lab:tgt0"
VERDICTS = ("ok", "warning", "problem", "unknown")


def out(ok, what):
    print("CHECK %d %s" % (1 if ok else 0, what.replace("\n", " ")[:300]))


def figure(name, value):
    print("FIGURE %s %s" % (name, value))


def load(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, str(e)


def find(checks, kind, subject):
    return next((c for c in checks if c.get("check") == kind and c.get("subject") == subject), None)


def text_of(c):
    return " ".join([c.get("finding", "")] + c.get("evidence", []))


def audit(path, rc, release, init, daemon, kmod):
    j, err = load(path)
    out(j is not None, "doctor --json printed JSON (%s)" % (err or "parsed"))
    if j is None:
        return
    rc = int(rc)
    checks = j.get("checks", [])
    tally = {v: sum(1 for c in checks if c.get("verdict") == v) for v in VERDICTS}
    for v in VERDICTS:
        figure("checks_" + v, tally[v])
    out(j.get("counts") == tally, "the counts %s are the checks' verdicts %s" % (j.get("counts"), tally))
    want = 1 if tally["problem"] else 2 if tally["warning"] + tally["unknown"] else 0
    out(rc == want, "exit %d is the documented code of its verdicts (%d: 0 ok, 1 problem, 2 warnings only)" % (rc, want))
    out(j.get("exit_code") == rc, "the JSON's exit_code (%s) is the exit status (%d)" % (j.get("exit_code"), rc))
    out(j.get("rdma_present") is True and j.get("outcome") != "no-rdma",
        "rdma_present (%s), outcome %s" % (j.get("rdma_present"), j.get("outcome")))
    out(all(c.get("verdict") in VERDICTS and c.get("finding") for c in checks),
        "every check has a verdict and a finding")
    problems = ["%s %s: %s" % (c["check"], c["subject"], c["finding"]) for c in checks if c.get("verdict") == "problem"]
    out(not problems, "no problem on a host iser-guard protects (%s)" % ("; ".join(problems) or "none"))

    c = find(checks, "kernel", "host")
    out(c is not None and any(e.endswith(": " + release) for e in c.get("evidence", [])),
        "kernel: the running release %s (%s)" % (release, c and c.get("evidence")))
    c = find(checks, "driver", "rdma_rxe")
    if kmod == "lab":
        out(c is not None and c["verdict"] == "warning" and "outside the kernel tree" in c["finding"],
            "driver rdma_rxe: the lab's module, built outside the kernel tree, said so (%s)" % (c and text_of(c)))
        # the driver check itself names the known issue (one per module: the known-issue rows
        # leave out-of-tree-driver to it, crates/iser-guard-core/src/doctor/rdma.rs needs_met)
        out(c is not None and "out-of-tree-driver" in (c.get("action") or ""),
            "driver rdma_rxe: points at known issue out-of-tree-driver (%s)" % (c and c.get("action")))
    else:
        out(c is not None and c["verdict"] == "ok" and "in-tree" in c["finding"],
            "driver rdma_rxe: the kernel's own, in-tree (%s)" % (c and text_of(c)))
    c = find(checks, "device", INI)
    out(c is not None and c["verdict"] == "ok" and NETDEV in text_of(c) and "rxe" in text_of(c),
        "device %s: ok, Soft-RoCE on %s (%s)" % (INI, NETDEV, c and text_of(c)))
    out(find(checks, "device", TGT) is not None, "device %s listed" % TGT)
    c = find(checks, "recreate", INI)
    out(c is not None and c["verdict"] == "ok" and "delete and re-add rxe link %s on %s" % (INI, NETDEV) in c["finding"],
        "recreate %s: the daemon would use rdma link delete/add (%s)" % (INI, c and c.get("finding")))
    c = find(checks, "gsi-qp", INI + "/1")
    out(c is not None and c["verdict"] == "ok" and "state RTS" in text_of(c),
        "gsi-qp %s/1: QP 1 in RTS (%s)" % (INI, c and text_of(c)))
    c = find(checks, "cm-ids", INI + "/1")
    out(c is not None and c["verdict"] == "ok" and "ib_iser" in c["finding"],
        "cm-ids %s/1: the iSER connection by ib_iser (%s)" % (INI, c and c.get("finding")))
    c = find(checks, "modules", "host")
    out(c is not None and c["verdict"] == "ok", "modules: every module loaded (%s)" % (c and c.get("finding")))
    c = find(checks, "config", "devices.allow")
    out(c is not None and c["verdict"] == "ok" and INI in c["finding"],
        "config devices.allow: %s matches a device (%s)" % (INI, c and c.get("finding")))
    c = find(checks, "config", "portal " + PORTAL)
    out(c is not None and "session" in text_of(c),
        "config portal %s: its probe, and the session using it (%s)" % (PORTAL, c and text_of(c)))
    out(any(c.get("check") == "open-iscsi" for c in checks), "open-iscsi settings judged")
    c = find(checks, "known-issue", "iser-task-rsp-crash")
    out(c is not None and c["verdict"] == "warning",
        "known-issue iser-task-rsp-crash applies to %s with iSER (the lab met it on 6.1 and 6.12)" % release)
    c = find(checks, "sandbox", "service")
    if init == "systemd":
        out(c is not None and c["verdict"] == "ok",
            "sandbox: the installed unit lets the service open /dev/kmsg, the verbs devices and rdma_cm (%s)" % (c and text_of(c)))
    else:
        out(c is not None, "sandbox judged (%s: %s)" % (c and c["verdict"], c and c["finding"]))
    c = find(checks, "daemon", "daemon")
    if daemon == "running":
        out(c is not None and c["verdict"] in ("ok", "warning") and any(e.startswith(INI + "/1:") for e in c.get("evidence", [])),
            "daemon: runs, its view of %s/1 read and not in disagreement with the kernel (%s)" % (INI, c and text_of(c)))
    else:
        out(c is not None and c["verdict"] == "warning" and "no daemon runs" in c["finding"],
            "daemon: none runs, said so (%s)" % (c and c.get("finding")))


def text(path, rc, json_path):
    j, _ = load(json_path)
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        out(False, "doctor's text report: %s" % e)
        return
    heads = [l for l in lines if re.match(r"^(ok|warning|problem|unknown) +[a-z-]+ ", l)]
    n = len(j.get("checks", [])) if j else -1
    out(len(heads) == n, "the text report has one line per check (%d lines, %d checks)" % (len(heads), n))
    out(j is not None and int(rc) == j.get("exit_code"), "the text report exits as --json does (%s, %s)" % (rc, j and j.get("exit_code")))
    out(bool(lines) and lines[-1].startswith("doctor: "), "the text report ends with its summary (%s)" % (lines[-1] if lines else "empty"))


def selftest_passed(r):
    ran = r.get("Ran") if isinstance(r, dict) else None
    return bool(ran and ran.get("steps") and all(s.get("ok") for s in ran["steps"]))


def active(path, secret):
    try:
        raw = open(path).read()
    except OSError as e:
        out(False, "the report file: %s" % e)
        return
    out(secret not in raw, "the CHAP secret of the node record is nowhere in the report")
    j, err = load(path)
    out(j is not None, "the report is JSON (%s)" % (err or "parsed"))
    if j is None:
        return
    a = j.get("active", {})
    plan = a.get("plan", {})
    out(j.get("passed") is True and a.get("stopped") is None,
        "the report says passed (%s), not stopped (%s)" % (j.get("passed"), a.get("stopped")))
    kinds = [m.get("method") for m in plan.get("methods", [])]
    out(plan.get("device") == INI and kinds == ["rdma-link-readd"] and plan["methods"][0].get("netdev") == NETDEV,
        "the plan: %s by rdma link delete/add on %s, the only method (module reload is off) (%s)" % (INI, NETDEV, kinds))
    ws = plan.get("sessions", [])
    out(len(ws) == 1 and ws[0].get("target") == IQN and ws[0].get("disk"),
        "the plan watches the logged-in session and its disk (%s)" % ws)
    st = a.get("selftest", [])
    out(bool(st) and all(selftest_passed(r) for r in st), "the self-test before passed on every port")
    methods = a.get("methods", [])
    out(len(methods) == len(kinds), "every planned method ran (%d of %d)" % (len(methods), len(kinds)))
    for i, m in enumerate(methods, 1):
        k = m.get("method", {}).get("method", "?")
        oc = m.get("outcome", {})
        out(oc.get("outcome") == "passed", "method %d (%s) passed (%s)" % (i, k, oc))
        steps = m.get("steps", [])
        bad = [s["name"] for s in steps if not s.get("ok")]
        out(steps and not bad, "method %d: every step ok (%s)" % (i, bad or [s["name"] for s in steps]))
        for n, s in enumerate(steps, 1):
            # "/usr/sbin/rdma link delete rxe_ini" -> m1_s1_rdma_link_delete_rxe_ini_ms
            short = re.sub(r"[^a-z0-9]+", "_", re.sub(r"\S*/", "", s["name"]).lower())[:40].strip("_")
            figure("m%d_s%d_%s_ms" % (i, n, short), s.get("took_ms"))
        rec = next((s for s in steps if s["name"].startswith("re-create ")), None)
        out(rec is not None, "method %d: the re-creation is a timed step" % i)
        if rec:
            figure("m%d_recreate_ms" % i, rec.get("took_ms"))
        g = m.get("gsi_after", [])
        out(bool(g) and all(st == "RTS" for _, st in g), "method %d: QP 1 of the new device in RTS (%s)" % (i, g))
        ss = m.get("sessions", [])
        out(bool(ss) and all(s.get("back") for s in ss), "method %d: the session came back (%s)" % (i, ss))
        for s in ss:
            figure("m%d_session_back_ms" % i, s.get("after_ms"))
            figure("m%d_session_back_by" % i, (s.get("by") or "none").replace(" ", "_"))
        io = m.get("io", {})
        out(io.get("disks") and io.get("ok", 0) > 0 and io.get("ok_at_end"),
            "method %d: direct-I/O reads ran and work at the end (%s)" % (i, io))
        figure("m%d_io_failed_reads" % i, io.get("failed"))
        figure("m%d_io_longest_stall_ms" % i, io.get("longest_stall_ms"))
        kl = m.get("kernel_lines", [])
        figure("m%d_kernel_lines" % i, len(kl))
        out(any("detected conn error" in l for l in kl),
            "method %d: the kernel lines kept include the session's connection error (%d lines)" % (i, len(kl)))
        sa = m.get("selftest_after", [])
        out(bool(sa) and all(selftest_passed(r) for r in sa), "method %d: the self-test after passed" % i)
    out(len(j.get("doctor", {}).get("checks", [])) > 5, "the report holds the passive audit")
    out(IQN in j.get("sessions_after", "") and "LOGGED_IN" in j.get("sessions_after", ""),
        "the report holds iscsiadm's session listing after the run")
    recs = j.get("node_records", [])
    out(any("node.session.auth.password = ********" in t for _, t in recs),
        "the report holds the session's node record, its CHAP password replaced (%d records)" % len(recs))


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "audit" and len(argv) == 8:
        audit(*argv[2:])
    elif cmd == "text" and len(argv) == 5:
        text(*argv[2:])
    elif cmd == "active" and len(argv) == 4:
        active(*argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
