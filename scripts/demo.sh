#!/usr/bin/env bash
# Sets everything up and runs the demo: the field incident, explained.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cargo build --locked --release --quiet
bin=target/release/iser-guard

echo "== iser-guard explain on the two lines of the field incident"
"$bin" explain --file tests/fixtures/kmsg/field-incident.dmesg || true
