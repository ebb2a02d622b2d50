#!/usr/bin/env bash
# Checks a built iser-guard .deb without installing it: file list, modes, conffiles,
# dependencies, maintainer scripts (with the systemd enable/start snippets), the man pages,
# that the packaged binary validates the packaged configuration, `systemd-analyze verify` of
# the unit inside the unpacked tree, and lintian when installed.
# Usage: scripts/deb-smoke-test.sh [path/to/iser-guard_*.deb]   (default: newest in target/debian)
set -euo pipefail
cd "$(dirname "$0")/.."

deb="${1:-$(ls -t target/debian/iser-guard_*.deb 2>/dev/null | head -n1 || true)}"
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
	echo "deb-smoke-test: no .deb found; run scripts/build-deb.sh first" >&2
	exit 66
fi
echo "== $deb ($(stat -c %s "$deb") bytes)"

fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

contents="$(dpkg-deb -c "$deb")"
has() { # has MODE PATH
	if grep -Eq "^$1 .* \./$2\$" <<<"$contents"; then ok "$2 ($1)"; else bad "$2 missing or not $1"; fi
}
has '-rwxr-xr-x' 'usr/sbin/iser-guard'
has '-rw-r-----' 'etc/iser-guard/config.toml'
has '-rw-r--r--' 'usr/lib/systemd/system/iser-guard.service'
has '-rw-r--r--' 'usr/share/man/man8/iser-guard.8.gz'
has '-rw-r--r--' 'usr/share/man/man8/iser-guard-check-config.8.gz'
has '-rw-r--r--' 'usr/share/man/man5/iser-guard.toml.5.gz'
has '-rw-r--r--' 'usr/share/doc/iser-guard/copyright'
has '-rw-r--r--' 'usr/share/doc/iser-guard/changelog.Debian.gz'
has '-rw-r--r--' 'usr/share/lintian/overrides/iser-guard'

info="$(dpkg-deb -I "$deb")"
field() { dpkg-deb -f "$deb" "$1"; }
depends="$(field Depends)"
for d in open-iscsi iproute2 libc6; do
	if grep -q "\b$d\b" <<<"$depends"; then ok "Depends has $d"; else bad "Depends lacks $d: $depends"; fi
done
if grep -q rdma-core <<<"$(field Recommends)"; then ok "Recommends rdma-core"; else bad "Recommends lacks rdma-core"; fi
[ "$(field Section)" = admin ] && ok "Section admin" || bad "Section is $(field Section)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -e "$deb" "$tmp/DEBIAN"
dpkg-deb -x "$deb" "$tmp/root"
if grep -qx '/etc/iser-guard/config.toml' "$tmp/DEBIAN/conffiles"; then ok "conffile /etc/iser-guard/config.toml"; else bad "config.toml is not a conffile"; fi
for s in postinst prerm postrm; do
	[ -x "$tmp/DEBIAN/$s" ] && ok "$s present" || bad "$s missing"
done
# The cargo-deb gotcha: without maintainer-scripts, no enable snippet is generated.
grep -q 'deb-systemd-helper.*enable' "$tmp/DEBIAN/postinst" && ok "postinst enables the unit" || bad "postinst does not enable the unit"
grep -q 'deb-systemd-invoke.*iser-guard.service' "$tmp/DEBIAN/postinst" && ok "postinst starts the unit" || bad "postinst does not start the unit"
grep -q 'check-config' "$tmp/DEBIAN/postinst" && ok "postinst checks the config" || bad "postinst lacks the config check"
if grep -q '#DEBHELPER#' "$tmp/DEBIAN/postinst" "$tmp/DEBIAN/postrm"; then bad "#DEBHELPER# not substituted"; else ok "#DEBHELPER# substituted"; fi
for s in postinst postrm prerm; do sh -n "$tmp/DEBIAN/$s" && ok "$s parses (sh -n)" || bad "$s syntax"; done

# The packaged binary accepts the packaged configuration (same check as ExecStartPre).
cp "$tmp/root/etc/iser-guard/config.toml" "$tmp/config.toml"
if out="$("$tmp/root/usr/sbin/iser-guard" check-config "$tmp/config.toml" 2>&1)"; then
	ok "packaged binary: $(head -n1 <<<"$out")"
else
	bad "packaged binary rejects the packaged config: $out"
fi

if command -v systemd-analyze >/dev/null; then
	# Verify the packaged unit against the host's systemd; only its binary path is pointed
	# at the unpacked package (same unit name, so dependencies resolve as installed).
	mkdir -p "$tmp/unit"
	sed "s|/usr/sbin/iser-guard|$tmp/root/usr/sbin/iser-guard|g" \
		"$tmp/root/usr/lib/systemd/system/iser-guard.service" >"$tmp/unit/iser-guard.service"
	if out="$(systemd-analyze verify --man=no "$tmp/unit/iser-guard.service" 2>&1)"; then
		ok "systemd-analyze verify${out:+ (notes: $out)}"
	else
		bad "systemd-analyze verify: $out"
	fi
	sec="$(systemd-analyze security --offline=yes "$tmp/unit/iser-guard.service" 2>/dev/null |
		tail -n1 || true)"
	[ -n "$sec" ] && echo "info systemd-analyze security: $sec"
else
	echo "skip systemd-analyze (not installed)"
fi

if command -v lintian >/dev/null; then
	echo "== lintian"
	# Report, don't fail on warnings; errors fail the smoke test.
	lintian --tag-display-limit 0 "$deb" | tee "$tmp/lintian.txt" || true
	if grep -q '^E:' "$tmp/lintian.txt"; then bad "lintian errors"; else ok "lintian: no errors"; fi
else
	echo "skip lintian (not installed; apt-get install lintian)"
fi

if [ "$fail" = 0 ]; then echo "== deb smoke test passed"; else echo "== deb smoke test FAILED"; exit 1; fi
