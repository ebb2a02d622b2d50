#!/usr/bin/env bash
# Sets everything up and runs all the tests: formatting, lints, unit, scenario and CLI tests.
# This is the command README.md names and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy -D warnings" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
# Licenses (an allow-list), duplicate versions (warnings) and sources; advisories need the
# advisory database from the network, which CI does not have (deny.toml says so).
echo "== cargo deny check licenses bans sources" >&2
cargo deny --offline --locked --workspace check licenses bans sources
# The build without verbs (no libibverbs, no libclang) must keep compiling.
echo "== cargo check --no-default-features" >&2
cargo check --locked --no-default-features --lib --bins
echo "== cargo test" >&2
cargo test --workspace --locked --all-targets
# Doc tests are not part of --all-targets.
cargo test --workspace --locked --doc
# The fuzz targets are run on purpose (cargo fuzz, nightly), not in CI; checking that they
# still compile keeps them from rotting as the library changes.
echo "== fuzz targets compile" >&2
cargo check --quiet --manifest-path fuzz/Cargo.toml --bins
echo "== all tests passed" >&2
