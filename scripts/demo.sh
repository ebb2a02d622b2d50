#!/usr/bin/env bash
# Sets everything up and runs the demo: the field incident explained from its kernel lines,
# then replayed on the simulated host, where iser-guard recovers it without a reboot.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cargo build --locked --release --quiet
bin=target/release/iser-guard

echo "== 1. What the kernel said: iser-guard explain on the field incident's log"
echo
# Exit status 1 means "a stuck GSI QP was found", which is what this log shows.
"$bin" explain --file crates/iser-guard-core/tests/fixtures/kmsg/field-incident.dmesg || [ $? -eq 1 ]

echo
echo "== 2. What iser-guard does about it: the field incident on the simulated host"
echo "   (target powered off for 3 minutes, then back; virtual time)"
echo
"$bin" simulate field-incident
