#!/usr/bin/env bash
# Installs what building and testing iser-guard needs on a Debian or Ubuntu machine.
# Idempotent: only missing packages are installed.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# C and C++ toolchains for crates with build scripts (libFuzzer in the fuzz crate);
# iproute2 for devlink/rdma; util-linux for flock(1) in the lock tests; man-db, bash, zsh
# and fish to check the packaged man pages and shell completions (tests/man_pages.rs,
# tests/completions.rs); gzip and zstd to make rotated logs as logrotate does (explain's
# tests).
for p in gcc g++ libc6-dev pkg-config iproute2 grep util-linux man-db bash zsh fish gzip zstd; do
    pkg_installed "$p" || need+=("$p")
done
# The `verbs` feature (default): rdma-sys links libibverbs and librdmacm and runs bindgen,
# which needs libclang 14 (16 and newer fail; .cargo/config.toml sets LIBCLANG_PATH).
for p in libibverbs-dev librdmacm-dev libclang-14-dev; do
    pkg_installed "$p" || need+=("$p")
done
# A Rust toolchain: keep the one rustup installed; otherwise take Debian's.
if ! have cargo; then
    need+=(cargo rustc)
fi
if ! have rustfmt && ! have cargo-fmt; then
    need+=(rustfmt)
fi
if ! have cargo-clippy && ! have clippy-driver; then
    need+=(rust-clippy)
fi
# promtool, for `promtool check metrics` and `promtool test rules` in tests/metrics_daemon.rs
# and tests/monitoring.rs (they fail under CI=true without it). Debian ships it in the
# `prometheus` package; its server is not wanted here and is stopped below if it started.
new_prometheus=false
if ! have promtool; then
    need+=(prometheus)
    new_prometheus=true
fi

if ((${#need[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        SUDO=sudo
    else
        SUDO=
    fi
    echo "setup: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if $new_prometheus && have systemctl && systemctl is-active --quiet prometheus 2>/dev/null; then
    # Installed only for promtool: do not leave a Prometheus server running.
    ${SUDO:-} systemctl disable --now prometheus >/dev/null 2>&1 || true
elif $new_prometheus && have service && have pgrep && pgrep -x prometheus >/dev/null 2>&1; then
    ${SUDO:-} service prometheus stop >/dev/null 2>&1 || true
fi

# cargo-deny for the license, duplicate-version and source checks in scripts/test.sh. Built
# from source once (no Debian package): about 4 min of CPU, 14 min wall on a 2-core machine
# shared with other builds (load 7-16), a few minutes on an idle one.
CARGO_DENY_VERSION=0.20.2
if ! cargo deny --version 2>/dev/null | grep -qx "cargo-deny $CARGO_DENY_VERSION"; then
    echo "setup: installing cargo-deny $CARGO_DENY_VERSION (cargo install, one time)" >&2
    cargo install cargo-deny --locked --version "$CARGO_DENY_VERSION"
fi
