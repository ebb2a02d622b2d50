#!/usr/bin/env bash
# Checks a built iser-guard .deb and its -dbgsym .ddeb without touching this machine's own
# installation:
#   1. contents: file list and modes, conffiles, md5sums, dependencies, maintainer scripts
#      (with the systemd enable/start snippets), man pages, completions, copyright;
#   2. the packaged binary validates the packaged configuration; `systemd-analyze verify`
#      of the packaged unit;
#   3. as root: dpkg --root into a throw-away root (a minimal chroot: dash, the libraries
#      the binary needs, and stand-ins for deb-systemd-helper, deb-systemd-invoke and
#      systemctl that record their calls): install, `dpkg --verify`, an edited conffile kept
#      across a reinstall, remove, purge to nothing; the .ddeb installed beside it;
#   4. lintian --pedantic on both packages: any tag fails (overrides are in the package).
# Usage: scripts/deb-smoke-test.sh [DEB [DDEB]]   (default: the newest in target/debian)
# LINTIAN=skip skips step 4 (lintian missing: apt-get install lintian).
set -euo pipefail
cd "$(dirname "$0")/.."

deb="${1:-$(ls -t target/debian/iser-guard_*.deb 2>/dev/null | head -n1 || true)}"
ddeb="${2:-$(ls -t target/debian/iser-guard-dbgsym_*.ddeb 2>/dev/null | head -n1 || true)}"
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
	echo "deb-smoke-test: no .deb found; run scripts/build-deb.sh first" >&2
	exit 66
fi
echo "== $deb ($(stat -c %s "$deb") bytes)"
[ -n "$ddeb" ] && echo "== $ddeb ($(stat -c %s "$ddeb") bytes)"

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
has '-rw-r--r--' 'usr/share/man/man8/iser-guard-reload.8.gz'
has '-rw-r--r--' 'usr/share/man/man5/iser-guard.toml.5.gz'
has '-rw-r--r--' 'usr/share/doc/iser-guard/copyright'
has '-rw-r--r--' 'usr/share/doc/iser-guard/changelog.Debian.gz'
has '-rw-r--r--' 'usr/share/doc/iser-guard/README.md.gz'
has '-rw-r--r--' 'usr/share/bash-completion/completions/iser-guard'
has '-rw-r--r--' 'usr/share/zsh/vendor-completions/_iser-guard'
has '-rw-r--r--' 'usr/share/fish/vendor_completions.d/iser-guard.fish'
has '-rw-r--r--' 'usr/share/lintian/overrides/iser-guard'
if grep -q 'README.md$' <<<"$contents"; then bad "an uncompressed README.md is shipped"; else ok "no uncompressed README"; fi

field() { dpkg-deb -f "$deb" "$1"; }
depends="$(field Depends)"
for d in open-iscsi iproute2 libc6 libibverbs1 librdmacm1; do
	if grep -q "\b$d\b" <<<"$depends"; then ok "Depends has $d"; else bad "Depends lacks $d: $depends"; fi
done
# Built on Debian 12; Ubuntu 24.04 and Debian 13 name the library librdmacm1t64.
if grep -Eq 'librdmacm1t64( \([^)]*\))? \| librdmacm1\b' <<<"$depends"; then ok "Depends has librdmacm1t64 | librdmacm1"; else bad "Depends lacks the librdmacm1t64 alternative: $depends"; fi
if grep -q rdma-core <<<"$(field Recommends)"; then ok "Recommends rdma-core"; else bad "Recommends lacks rdma-core"; fi
if grep -q ibverbs-providers <<<"$(field Recommends)"; then ok "Recommends ibverbs-providers"; else bad "Recommends lacks ibverbs-providers"; fi
if grep -q nvme-cli <<<"$(field Recommends)"; then ok "Recommends nvme-cli"; else bad "Recommends lacks nvme-cli"; fi
[ "$(field Section)" = admin ] && ok "Section admin" || bad "Section is $(field Section)"
[ "$(field Priority)" = optional ] && ok "Priority optional" || bad "Priority is $(field Priority)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -e "$deb" "$tmp/DEBIAN"
dpkg-deb -x "$deb" "$tmp/root"
if grep -qx '/etc/iser-guard/config.toml' "$tmp/DEBIAN/conffiles"; then ok "conffile /etc/iser-guard/config.toml"; else bad "config.toml is not a conffile"; fi
for s in postinst prerm postrm; do
	[ -x "$tmp/DEBIAN/$s" ] && ok "$s present" || bad "$s missing"
done
# md5sums: every regular file, and right.
if [ -f "$tmp/DEBIAN/md5sums" ]; then
	n_files=$(cd "$tmp/root" && find . -type f | wc -l)
	n_sums=$(wc -l <"$tmp/DEBIAN/md5sums")
	if (cd "$tmp/root" && md5sum --quiet -c "$tmp/DEBIAN/md5sums") && [ "$n_files" = "$n_sums" ]; then
		ok "md5sums: $n_sums files, all match"
	else
		bad "md5sums: $n_sums sums for $n_files files, or a mismatch"
	fi
else
	bad "no DEBIAN/md5sums (build with scripts/build-deb.sh)"
fi
# The cargo-deb gotcha: without maintainer-scripts, no enable snippet is generated.
grep -q 'deb-systemd-helper.*enable' "$tmp/DEBIAN/postinst" && ok "postinst enables the unit" || bad "postinst does not enable the unit"
grep -q 'deb-systemd-invoke.*iser-guard.service' "$tmp/DEBIAN/postinst" && ok "postinst starts the unit" || bad "postinst does not start the unit"
grep -q 'check-config' "$tmp/DEBIAN/postinst" && ok "postinst checks the config" || bad "postinst lacks the config check"
if grep -q '#DEBHELPER#' "$tmp/DEBIAN/postinst" "$tmp/DEBIAN/postrm"; then bad "#DEBHELPER# not substituted"; else ok "#DEBHELPER# substituted"; fi
for s in postinst postrm prerm; do sh -n "$tmp/DEBIAN/$s" && ok "$s parses (sh -n)" || bad "$s syntax"; done
head -n 3 "$tmp/root/usr/share/doc/iser-guard/copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' &&
	ok "copyright is machine-readable (DEP-5), $(grep -c '^Files: ' "$tmp/root/usr/share/doc/iser-guard/copyright") Files paragraphs" ||
	bad "copyright is not DEP-5"

# The packaged binary accepts the packaged configuration (the daemon's own check at start).
cp "$tmp/root/etc/iser-guard/config.toml" "$tmp/config.toml"
if out="$("$tmp/root/usr/sbin/iser-guard" check-config "$tmp/config.toml" 2>&1)"; then
	ok "packaged binary: $(head -n1 <<<"$out")"
else
	bad "packaged binary rejects the packaged config: $out"
fi

verify_unit() { # verify_unit UNIT_FILE BINARY
	if ! command -v systemd-analyze >/dev/null; then
		echo "skip systemd-analyze (not installed)"
		return
	fi
	# Verify the unit against the host's systemd; only its binary path is pointed at the
	# unpacked package (same unit name, so dependencies resolve as installed).
	mkdir -p "$tmp/unit"
	sed "s|/usr/sbin/iser-guard|$2|g" "$1" >"$tmp/unit/iser-guard.service"
	if out="$(systemd-analyze verify --man=no "$tmp/unit/iser-guard.service" 2>&1)"; then
		ok "systemd-analyze verify $1${out:+ (notes: $out)}"
	else
		bad "systemd-analyze verify $1: $out"
	fi
}
verify_unit "$tmp/root/usr/lib/systemd/system/iser-guard.service" "$tmp/root/usr/sbin/iser-guard"
if command -v systemd-analyze >/dev/null; then
	sec="$(systemd-analyze security --offline=yes "$tmp/unit/iser-guard.service" 2>/dev/null | tail -n1 || true)"
	[ -n "$sec" ] && echo "info systemd-analyze security: $sec"
fi

if [ -n "$ddeb" ]; then
	dcontents="$(dpkg-deb -c "$ddeb")"
	version="$(field Version)"
	dfield() { dpkg-deb -f "$ddeb" "$1"; }
	[ "$(dfield Priority)" = optional ] && ok "ddeb Priority optional" || bad "ddeb Priority is $(dfield Priority)"
	[ "$(dfield Depends)" = "iser-guard (= $version)" ] && ok "ddeb Depends iser-guard (= $version)" || bad "ddeb Depends is '$(dfield Depends)'"
	grep -Eq '^lrwxrwxrwx .* \./usr/share/doc/iser-guard-dbgsym -> iser-guard$' <<<"$dcontents" &&
		ok "ddeb doc directory links to iser-guard's" || bad "ddeb has no usr/share/doc/iser-guard-dbgsym -> iser-guard"
	grep -Eq '\./usr/lib/debug/\.build-id/[0-9a-f]{2}/[0-9a-f]+\.debug$' <<<"$dcontents" &&
		ok "ddeb has the build-id debug file" || bad "ddeb has no .build-id debug file"
	dpkg-deb -e "$ddeb" "$tmp/DDEBIAN"
	[ -s "$tmp/DDEBIAN/md5sums" ] && ok "ddeb md5sums" || bad "ddeb has no md5sums"
fi

# --- 3. dpkg --root into a throw-away root --------------------------------------------------
throwaway_root_install() {
	local R=$tmp/chroot calls=$tmp/chroot/calls.log lib
	mkdir -p "$R"/{bin,usr/bin,usr/sbin,etc,var/lib/dpkg/{info,updates,triggers},tmp,var/log}
	touch "$R/var/lib/dpkg/status" "$R/var/lib/dpkg/available"
	# A shell for the maintainer scripts and what they call, with their libraries.
	for b in /bin/sh /bin/dash /bin/rm /bin/rmdir /bin/mkdir /bin/cat "$tmp/root/usr/sbin/iser-guard"; do
		for lib in $(ldd "$b" 2>/dev/null | grep -o '/[^ ]*' || true); do
			mkdir -p "$R$(dirname "$lib")"
			cp -nL "$lib" "$R$lib"
		done
	done
	cp -L /bin/dash "$R/bin/sh"
	for b in rm rmdir mkdir cat; do cp -L "/bin/$b" "$R/bin/$b"; done
	# The scripts send output to /dev/null.
	mkdir -p "$R/dev" && mknod -m 0666 "$R/dev/null" c 1 3
	# Stand-ins that record the call and succeed (was-enabled succeeding is what a first
	# installation sees: the unit gets enabled).
	for b in deb-systemd-helper deb-systemd-invoke systemctl; do
		printf '#!/bin/sh\necho "%s $*" >>/calls.log\nexit 0\n' "$b" >"$R/usr/bin/$b"
		chmod 0755 "$R/usr/bin/$b"
	done
	: >"$calls"
	local dpkg=(dpkg --root="$R" --log=/dev/null --force-depends --force-bad-path --force-confold)
	if out="$("${dpkg[@]}" -i "$deb" 2>&1)"; then ok "dpkg --root -i"; else bad "dpkg --root -i: $out"; return; fi
	[ "$(dpkg-query --root="$R" -W -f '${Status}' iser-guard)" = "install ok installed" ] &&
		ok "status: install ok installed" || bad "status: $(dpkg-query --root="$R" -W -f '${Status}' iser-guard)"
	if out="$(dpkg --root="$R" --verify iser-guard 2>&1)" && [ -z "$out" ]; then ok "dpkg --verify (md5sums) clean"; else bad "dpkg --verify: $out"; fi
	grep -q "deb-systemd-helper enable iser-guard.service" "$calls" && ok "postinst enabled the unit (deb-systemd-helper enable)" || bad "no enable call: $(cat "$calls")"
	[ "$(stat -c %a "$R/etc/iser-guard/config.toml")" = 640 ] && ok "installed config.toml 0640" || bad "config.toml mode $(stat -c %a "$R/etc/iser-guard/config.toml")"
	verify_unit "$R/usr/lib/systemd/system/iser-guard.service" "$R/usr/sbin/iser-guard"
	if [ -n "$ddeb" ]; then
		if out="$("${dpkg[@]}" -i "$ddeb" 2>&1)"; then ok "dpkg --root -i the .ddeb (its Depends met)"; else bad "dpkg --root -i .ddeb: $out"; fi
		[ -f "$R/usr/share/doc/iser-guard-dbgsym/copyright" ] && ok "ddeb's doc link resolves to the copyright" || bad "ddeb's doc link dangles"
		"${dpkg[@]}" --purge iser-guard-dbgsym >/dev/null 2>&1 || bad "purge the .ddeb"
	fi
	# An administrator's edit survives a reinstall (conffile).
	echo '# edited by the administrator' >>"$R/etc/iser-guard/config.toml"
	if out="$("${dpkg[@]}" -i "$deb" 2>&1)"; then ok "reinstall"; else bad "reinstall: $out"; fi
	grep -q 'edited by the administrator' "$R/etc/iser-guard/config.toml" && ok "edited conffile kept" || bad "edited conffile lost"
	if out="$("${dpkg[@]}" -r iser-guard 2>&1)"; then ok "dpkg -r"; else bad "dpkg -r: $out"; fi
	[ ! -e "$R/usr/sbin/iser-guard" ] && [ -e "$R/etc/iser-guard/config.toml" ] &&
		ok "removed: binary gone, conffile kept" || bad "after remove: binary or conffile wrong"
	mkdir -p "$R/var/lib/iser-guard" && echo '{}' >"$R/var/lib/iser-guard/engine-journal.json"
	if out="$("${dpkg[@]}" --purge iser-guard 2>&1)"; then ok "dpkg --purge"; else bad "dpkg --purge: $out"; fi
	local left
	left="$(cd "$R" && find etc/iser-guard var/lib/iser-guard usr/lib/systemd usr/share/doc/iser-guard usr/share/man usr/share/bash-completion usr/share/zsh usr/share/fish 2>/dev/null || true)"
	[ -z "$left" ] && ok "purged to nothing (config, state, unit, docs)" || bad "left after purge: $left"
	grep -q "deb-systemd-helper purge iser-guard.service" "$calls" && ok "postrm purged the unit's enablement" || bad "no purge call: $(cat "$calls")"
	echo "info systemd calls in the throw-away root: $(sort -u "$calls" | tr '\n' ';')"
}
if [ "$(id -u)" = 0 ]; then
	echo "== dpkg --root into a throw-away root"
	throwaway_root_install
else
	echo "skip the throw-away root install (dpkg --root chroots for the maintainer scripts: root only)"
fi

# --- 4. lintian --------------------------------------------------------------------------------
if [ "${LINTIAN:-}" = skip ]; then
	echo "skip lintian (LINTIAN=skip)"
elif command -v lintian >/dev/null; then
	# Both in one run: lintian then sees them as one source's packages, and can check that
	# the .ddeb's doc symlink points into iser-guard (alone it can only say it cannot).
	echo "== lintian --pedantic --display-info -E $(basename "$deb") ${ddeb:+$(basename "$ddeb")}"
	lintian --pedantic --display-info -E --show-overrides --tag-display-limit 0 "$deb" ${ddeb:+"$ddeb"} \
		>"$tmp/lintian.txt" 2>&1 || true
	cat "$tmp/lintian.txt"
	if grep -Eq '^[EWIPX]: ' "$tmp/lintian.txt"; then
		bad "lintian tags (above)"
	else
		ok "lintian --pedantic: no tags on either package ($(grep -c '^O: ' "$tmp/lintian.txt") overridden in the package, each with its reason)"
	fi
else
	bad "lintian is not installed (apt-get install lintian), or run with LINTIAN=skip"
fi

if [ "$fail" = 0 ]; then echo "== deb smoke test passed"; else echo "== deb smoke test FAILED"; exit 1; fi
