#!/usr/bin/env bash
# Builds the iser-guard .deb and its -dbgsym .ddeb into target/debian/; check them with
# scripts/deb-smoke-test.sh (file list, modes, conffiles, md5sums, scripts, the unit, an
# install into a throw-away root, lintian --pedantic on both packages).
#
# Steps: cargo-deb if missing (a one-time `cargo install cargo-deb --locked`, about 2.5 min
# on 2 cores); the man pages, shell completions and the compressed README into target/;
# `cargo deb` (release build); then each package is finished where cargo-deb stops short
# of policy: DEBIAN/md5sums (dpkg --verify, debsums), and for the .ddeb Priority optional
# (cargo-deb writes the obsolete "extra"), Depends on the exact iser-guard version and
# /usr/share/doc/iser-guard-dbgsym as a symlink to iser-guard's documentation (copyright and
# changelog), as debhelper's dbgsym packages have. In the .deb's Depends, a library the 64-bit
# time_t transition renamed gets the new name as an alternative (scripts/deb-t64-alternatives.sh:
# `librdmacm1t64 (>= V) | librdmacm1 (>= V)`), so the package built here on Debian 12 names
# what Ubuntu 24.04 and Debian 13 ship.
# Not part of scripts/test.sh (a release build is too slow for CI); tests/packaging.rs,
# tests/copyright.rs, tests/man_pages.rs and tests/completions.rs check the inputs in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo deb --version >/dev/null 2>&1; then
	echo "== installing cargo-deb (one time, ~2.5 min)" >&2
	cargo install cargo-deb --locked
fi

if [ ! -f README.md ]; then
	echo "build-deb: README.md is missing; it is packaged as the documentation" >&2
	exit 66
fi

echo "== copyright up to date with Cargo.lock" >&2
cargo run --locked --quiet --example gen_copyright -- --check

echo "== man pages -> target/man, completions -> target/completions" >&2
rm -rf target/man target/completions target/pkgdoc
cargo run --locked --quiet --example gen_man -- target/man
cargo run --locked --quiet --example gen_completions -- target/completions
mkdir -p target/pkgdoc
gzip -9n -c README.md >target/pkgdoc/README.md.gz

echo "== cargo deb" >&2
rm -f target/debian/iser-guard_*.deb target/debian/iser-guard-dbgsym_*.ddeb
cargo deb --locked "$@"

# finish PACKAGE: adds DEBIAN/md5sums; for the .ddeb also the control fields and doc link.
finish() {
	local pkg=$1 tmp
	tmp=$(mktemp -d)
	dpkg-deb -R "$pkg" "$tmp/p"
	if [[ $pkg == *.ddeb ]]; then
		local ctl=$tmp/p/DEBIAN/control name version
		name=$(sed -n 's/^Source: //p' "$ctl")
		version=$(sed -n 's/^Version: //p' "$ctl")
		sed -i -e 's/^Priority: extra$/Priority: optional/' -e '/^Recommends: /d' "$ctl"
		grep -q '^Depends: ' "$ctl" || sed -i "/^Architecture: /a Depends: $name (= $version)" "$ctl"
		mkdir -p "$tmp/p/usr/share/doc"
		ln -sfn "$name" "$tmp/p/usr/share/doc/$name-dbgsym"
	else
		scripts/deb-t64-alternatives.sh "$tmp/p/DEBIAN/control"
	fi
	(cd "$tmp/p" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
		xargs -0 md5sum) >"$tmp/p/DEBIAN/md5sums"
	chmod 0644 "$tmp/p/DEBIAN/md5sums"
	dpkg-deb --root-owner-group -Zxz --build "$tmp/p" "$pkg" >/dev/null
	rm -rf "$tmp"
}
for p in target/debian/iser-guard_*.deb target/debian/iser-guard-dbgsym_*.ddeb; do
	[ -f "$p" ] && finish "$p"
done

ls -l target/debian/*.deb target/debian/*.ddeb 2>/dev/null || true
