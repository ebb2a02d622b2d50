#!/usr/bin/env bash
# Builds the iser-guard .deb into target/debian/: installs cargo-deb if missing (a one-time
# `cargo install cargo-deb --locked`, about 2.5 minutes on a 2-core machine), generates the
# man pages from the CLI definition, then runs cargo-deb (release build).
# Not part of scripts/test.sh (too slow for CI); scripts/deb-smoke-test.sh checks the result.
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

echo "== man pages -> target/man" >&2
rm -rf target/man
cargo run --locked --quiet --example gen_man -- target/man

echo "== cargo deb" >&2
cargo deb --locked "$@"

ls -l target/debian/*.deb
