#!/bin/bash
# iser-guard's real-kernel lab: Debian guest kernels (6.1 and 6.12) under QEMU/TCG, Soft-RoCE
# (rdma_rxe) on both ends of a veth pair, a LIO iSER target and an open-iscsi iSER initiator in
# one guest, and iser-guard's release binary as the daemon with its real paths.
#
#   scripts/lab/run.sh setup          host prerequisites (apt-get; QEMU extracted into LAB_WORK)
#   scripts/lab/run.sh build          guest image; rebuilt only when its recipe changes
#   scripts/lab/run.sh binary         cargo build --release, copy the binary (and .deb) into the share
#   scripts/lab/run.sh all            setup + build + binary + every batch + summary
#   scripts/lab/run.sh batch NAME     one guest boot running one batch (see guest/batches/)
#   scripts/lab/run.sh list           the batches and their scenarios
#
# Environment: LAB_WORK (default /var/tmp/iser-guard-lab: the cache, the 9p share and the
# results), RESULTS (default $LAB_WORK/results/<UTC date-time>), KVER (kernel of a single
# batch run), NO_DEB=1 (skip the .deb and the systemd batch), SMP, MEM.
set -euo pipefail
LAB_SRC=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$LAB_SRC/../.." && pwd)
export LAB_WORK=${LAB_WORK:-/var/tmp/iser-guard-lab}
mkdir -p "$LAB_WORK"
source "$LAB_SRC/host/lib.sh"

cmd=${1:-help}
shift || true
case $cmd in
setup) "$LAB_SRC/host/setup.sh" ;;
build) lab_build_image ;;
binary) lab_stage_binary ;;
batch)
	[ $# -ge 1 ] || { echo "usage: run.sh batch NAME" >&2; exit 64; }
	lab_stage_guest
	export RESULTS=${RESULTS:-$LAB_WORK/results/$(date -u +%Y%m%dT%H%M%SZ)}
	lab_run_batch "$1"
	lab_summary "$RESULTS"
	;;
all)
	T0=$(date +%s)
	"$LAB_SRC/host/setup.sh"
	lab_build_image
	lab_stage_binary
	lab_stage_guest
	export RESULTS=${RESULTS:-$LAB_WORK/results/$(date -u +%Y%m%dT%H%M%SZ)}
	mkdir -p "$RESULTS"
	for b in $(lab_batches); do lab_run_batch "$b" || true; done
	echo "total_wall_s=$(($(date +%s) - T0))" >> "$RESULTS/timing.txt"
	lab_summary "$RESULTS"
	;;
summary) lab_summary "${1:-$(ls -d "$LAB_WORK"/results/*/ | sort | tail -1)}" ;;
list) lab_list ;;
*) sed -n '2,18p' "$0" ;;
esac
