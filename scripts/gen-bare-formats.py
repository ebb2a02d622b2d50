#!/usr/bin/env python3
"""Regenerates crates/iser-guard-core/src/signatures/subsystem/bare_formats.rs from kernel
source trees: the format strings that the storage and RDMA subsystems print with no prefix
(pr_*() in a file without a pr_fmt, printk(KERN_*), WARN*()), so that the subsystem layer
recognises those lines by the kernel's own text rather than by phrases picked from incidents.

usage: scripts/gen-bare-formats.py KERNEL_TREE... > crates/iser-guard-core/src/signatures/subsystem/bare_formats.rs

Each tree is a kernel source tree (Debian's linux-source-X.Y unpacked is enough). Formats of
all trees are merged, so messages that one kernel version reworded stay recognised.
"""
import os
import re
import sys

# Directories (or file prefixes) whose bare messages belong to a subsystem the host depends
# on; the Rust side maps the path to its subsystem with SOURCE_DIRS, so the two lists agree.
SCAN = [
    ("drivers/infiniband/core/", "RdmaCore"),
    ("drivers/infiniband/ulp/iser/", "Iser"),
    ("drivers/infiniband/ulp/isert/", "IscsiTarget"),
    ("drivers/infiniband/ulp/srpt/", "IscsiTarget"),
    ("drivers/infiniband/ulp/srp/", "Scsi"),
    ("drivers/infiniband/ulp/ipoib/", "RdmaCore"),
    ("drivers/infiniband/hw/", "RdmaDriver"),
    ("drivers/infiniband/sw/", "RdmaDriver"),
    ("drivers/scsi/libiscsi", "Iscsi"),
    ("drivers/scsi/scsi_transport_iscsi", "Iscsi"),
    ("drivers/scsi/iscsi_tcp", "Iscsi"),
    ("drivers/scsi/cxgbi/", "Iscsi"),
    ("drivers/scsi/bnx2i/", "Iscsi"),
    ("drivers/scsi/be2iscsi/", "Iscsi"),
    ("drivers/scsi/qedi/", "Iscsi"),
    ("drivers/scsi/qla4xxx/", "Iscsi"),
    ("drivers/scsi/sd", "Scsi"),
    ("drivers/scsi/scsi", "Scsi"),
    ("drivers/scsi/device_handler/", "Scsi"),
    ("drivers/nvme/host/", "Nvme"),
    ("drivers/target/", "IscsiTarget"),
    ("net/sunrpc/xprtrdma/", "Nfs"),
    ("drivers/md/dm-mpath", "Block"),
    ("block/", "Block"),
]

CALL = re.compile(
    r"\b(pr_(?:emerg|alert|crit|err|warn|warning|notice|info)(?:_once|_ratelimited)?"
    r"|printk(?:_ratelimited)?|WARN(?:_ONCE|_RATELIMIT)?)\s*\(")
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
# One printf conversion (flags, width, precision, length, the %p extensions).
CONV = re.compile(r"%[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|j|t|L)?"
                  r"(?:p[a-zA-Z]*\d?[a-zA-Z]*|[diouxXcsfeEgG])")


def args_text(src, start):
    """The text of a call's arguments from the '(' at start to its matching ')'."""
    depth, i, instr = 0, start, False
    while i < len(src):
        c = src[i]
        if instr:
            if c == "\\":
                i += 1
            elif c == '"':
                instr = False
        elif c == '"':
            instr = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return src[start + 1:i]
        i += 1
    return None


def split_top(args):
    """Top-level comma-separated arguments."""
    out, depth, cur, instr, i = [], 0, [], False, 0
    while i < len(args):
        c = args[i]
        if instr:
            cur.append(c)
            if c == "\\" and i + 1 < len(args):
                cur.append(args[i + 1])
                i += 1
            elif c == '"':
                instr = False
        elif c == '"':
            instr = True
            cur.append(c)
        elif c in "([{":
            depth += 1
            cur.append(c)
        elif c in ")]}":
            depth -= 1
            cur.append(c)
        elif c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur).strip())
    return out


def literal(arg):
    """The format of an argument made of string literals and KERN_* levels only."""
    rest = re.sub(r"\bKERN_(?:EMERG|ALERT|CRIT|ERR|WARNING|NOTICE|INFO|DEBUG|DEFAULT)\b", "", arg)
    pieces = STRING.findall(rest)
    if not pieces or STRING.sub("", rest).strip():
        return None  # a macro (a driver's own prefix) or a variable: not a bare format
    return "".join(pieces)


def unescape(s):
    return (s.replace('\\"', '"').replace("\\t", " ").replace("\\\\", "\\"))


def normalise(fmt):
    """The format's first line with conversions as '%'; None when it is not specific enough
    to name its subsystem on its own (a false finding costs more than a miss)."""
    if "KERN_CONT" in fmt or "%%" in fmt:
        return None
    fmt = unescape(fmt).split("\\n")[0].rstrip()
    if "\\" in fmt or "%" not in fmt and not fmt:
        return None
    out = CONV.sub("\x00", fmt)
    if "%" in out:
        return None  # a conversion this parser does not know
    out = out.replace("\x00", "%")
    lit = out.replace("%", " ")
    words = [w for w in re.findall(r"[A-Za-z]{2,}", lit)]
    # Three words, or two with no conversion (then the whole line must be the format).
    if sum(len(w) for w in words) < 14 or len(words) < (2 if "%" not in out else 3):
        return None
    if out.startswith((" ", ":", "(", "[", "<", "-", ".")):
        return None
    # Lines that start with a conversion are found by the word after it: the conversion
    # must be followed by text of its own.
    # A conversion first (a function or device name) leaves less to go by: four words.
    if out.startswith("%"):
        m = re.match(r"%[:,]? ?([A-Za-z][A-Za-z_]{3,})", out)
        if not m or len(words) < 4 or sum(len(w) for w in words) < 20:
            return None
    elif not re.match(r"[A-Za-z]", out) or "%" in out.split(" ")[0]:
        return None  # the first word is glued to a conversion (`rxe%d: …`)
    return out


def file_has_pr_fmt(src):
    return re.search(r"#\s*define\s+pr_fmt\b", src) is not None


def scan_tree(root, found):
    for prefix, sub in SCAN:
        base = os.path.join(root, prefix)
        dirname = base if prefix.endswith("/") else os.path.dirname(base)
        if not os.path.isdir(dirname):
            continue
        for dp, _, files in os.walk(dirname):
            for f in files:
                path = os.path.join(dp, f)
                rel = os.path.relpath(path, root)
                if not f.endswith((".c", ".h")) or not rel.startswith(prefix):
                    continue
                if not prefix.endswith("/") and "/" in rel[len(os.path.dirname(prefix)) + 1:]:
                    continue
                src = open(path, encoding="utf-8", errors="replace").read()
                has_fmt = file_has_pr_fmt(src)
                for m in CALL.finditer(src):
                    name = m.group(1)
                    if name.startswith("pr_") and has_fmt:
                        continue  # prefixed with the module's name: the NAMES table's job
                    a = args_text(src, m.end() - 1)
                    if a is None:
                        continue
                    args = split_top(a)
                    if name.startswith("WARN"):
                        if len(args) < 2:
                            continue
                        arg = args[1]
                    else:
                        arg = args[0]
                    if name.startswith("printk") and "KERN_" not in arg:
                        continue  # KERN_CONT-less continuation or a macro level
                    fmt = literal(arg)
                    if fmt is None:
                        continue
                    n = normalise(fmt)
                    if n is None:
                        continue
                    key = first_key(n)
                    if key is None:
                        continue
                    found.setdefault((n, sub), rel)


def first_key(fmt):
    """The word a line is looked up by: its first word, or for a format opening with a
    conversion the first word after it (marked by a leading '%')."""
    if fmt.startswith("%"):
        m = re.match(r"%[:,]? ?([A-Za-z][A-Za-z_]{3,})", fmt)
        return "%" + m.group(1) if m else None
    return fmt.split(" ")[0]


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = {}
    for root in sys.argv[1:]:
        scan_tree(root, found)
    # A format printed in two places belongs to the one SCAN lists first (core before the
    # drivers: `failed to drain send queue` moved from ib_core into mlx4/mlx5).
    order = {sub: i for i, (_, sub) in reversed(list(enumerate(SCAN)))}
    by_fmt = {}
    for (fmt, sub), rel in found.items():
        if fmt not in by_fmt or order[sub] < order[by_fmt[fmt]]:
            by_fmt[fmt] = sub
    rows = sorted((first_key(f), f, s) for f, s in by_fmt.items())
    trees = ", ".join(os.path.basename(os.path.normpath(r)) for r in sys.argv[1:])
    print("//! Generated by scripts/gen-bare-formats.py from " + trees + "; do not edit.")
    print("//! The formats the RDMA and storage subsystems print with no prefix (see the script),")
    print("//! conversions written as `%`, sorted by [`BareFormat::key`].")
    print()
    print("use super::bare::BareFormat;")
    print("use super::Subsystem;")
    print()
    print("#[rustfmt::skip]")
    print("pub(crate) const BARE_FORMATS: &[BareFormat] = &[")
    for key, fmt, sub in rows:
        print(f"    BareFormat {{ key: {rust_str(key)}, format: {rust_str(fmt)}, subsystem: Subsystem::{sub} }},")
    print("];")
    return 0


if __name__ == "__main__":
    sys.exit(main())
