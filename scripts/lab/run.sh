#!/bin/bash
# iser-guard's real-kernel lab: Debian guest kernels (12's 6.1 and 6.12; 13's 6.12) under QEMU/TCG, Soft-RoCE
# (rdma_rxe) on both ends of a veth pair, a LIO iSER target and an open-iscsi iSER initiator in
# one guest, and iser-guard's release binary as the daemon with its real paths.
#
#   scripts/lab/run.sh setup          host prerequisites (apt-get; QEMU extracted into LAB_WORK)
#   scripts/lab/run.sh build [DIST]   guest image (bookworm, or trixie); rebuilt only when its recipe changes
#   scripts/lab/run.sh kmod [DIST]    the irdma-like rdma_rxe per guest kernel (kmod/README.md)
#   scripts/lab/run.sh binary         cargo build --release, copy the binary (and .deb) into the share
#   scripts/lab/run.sh all            setup + build + binary + every batch + summary
#   scripts/lab/run.sh batch NAME     one guest boot running one batch (see guest/batches/)
#   scripts/lab/run.sh list           the batches and their scenarios
#
# Environment: LAB_WORK (default /var/tmp/iser-guard-lab: the cache, the 9p share and the
# results), RESULTS (default $LAB_WORK/results/<UTC date-time>), KVER (kernel of a single
# batch run), NO_DEB=1 (skip the .deb and the systemd batch), SMP, MEM, SRC (the source tree
# `binary` builds; default this clone) and SRC_COMMIT (build that commit of SRC's repository,
# exported into $LAB_WORK/src, instead of SRC's work tree as it is), SRC_MERGE (build the merge
# of SRC_COMMIT and this commit).
#
# The lab lock: setup, build, binary, batch and all hold an exclusive flock on LAB_LOCK
# (default /var/tmp/iser-guard-lab.lock) for their whole run, and wait for it (saying who holds
# it) when another run has it: two TCG guests on a 2-core host ruin each other's timing bounds,
# and a build into the share under a running guest changes what it runs. A caller that already
# holds the lock (`flock /var/tmp/iser-guard-lab.lock ...`) sets LAB_LOCK_HELD=1.
set -euo pipefail
LAB_SRC=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$LAB_SRC/../.." && pwd)
export LAB_WORK=${LAB_WORK:-/var/tmp/iser-guard-lab}
mkdir -p "$LAB_WORK"
source "$LAB_SRC/host/lib.sh"

cmd=${1:-help}
shift || true

LAB_LOCK=${LAB_LOCK:-/var/tmp/iser-guard-lab.lock}
# lab_lock: the exclusive lab lock on fd 9 for the rest of this process (and its children, the
# guest included). Opened for append so that a waiter does not erase the holder's line.
lab_lock() {
	[ -n "${LAB_LOCK_HELD:-}" ] && return 0
	exec 9>> "$LAB_LOCK"
	if ! flock -n 9; then
		echo "lab: waiting for the lab lock $LAB_LOCK, held by: $(grep . "$LAB_LOCK" 2>/dev/null || echo 'a caller of flock(1)')" >&2
		local t0=$(date +%s)
		flock 9
		echo "lab: got the lab lock after $(($(date +%s) - t0)) s" >&2
	fi
	: > "$LAB_LOCK"
	echo "pid $$ since $(date -u +%FT%TZ): run.sh $cmd $* (uid $(id -u), cwd $PWD)" >&9
	# the holder's line goes with the lock (a later holder may be a bare flock(1) caller)
	trap ': > "$LAB_LOCK"' EXIT
	export LAB_LOCK_HELD=1
}
case $cmd in setup | build | kmod | binary | batch | all) lab_lock "$@" ;; esac

case $cmd in
setup) "$LAB_SRC/host/setup.sh" ;;
build) lab_build_image "${1:-bookworm}" ;;
kmod) lab_build_kmod "${1:-bookworm}" ;;
binary) lab_stage_binary ;;
batch)
	[ $# -ge 1 ] || { echo "usage: run.sh batch NAME" >&2; exit 64; }
	# another suite's image and modules are built (or found cached) for its batch
	DIST=$(lab_batch_table | awk -v b="$1" '$1==b{print ($5 == "" ? "bookworm" : $5)}')
	[ "${DIST:-bookworm}" = bookworm ] || lab_build_image "$DIST"
	lab_build_kmod "${DIST:-bookworm}"
	lab_stage_guest
	export RESULTS=${RESULTS:-$LAB_WORK/results/$(date -u +%Y%m%dT%H%M%SZ)}
	lab_run_batch "$1"
	lab_summary "$RESULTS"
	;;
all)
	T0=$(date +%s)
	"$LAB_SRC/host/setup.sh"
	lab_build_image
	lab_build_kmod
	B0=$(date +%s)
	lab_stage_binary
	BIN_S=$(($(date +%s) - B0))
	lab_stage_guest
	export RESULTS=${RESULTS:-$LAB_WORK/results/$(date -u +%Y%m%dT%H%M%SZ)}
	mkdir -p "$RESULTS"
	for b in $(lab_batches); do lab_run_batch "$b" || true; done
	echo "total_wall_s=$(($(date +%s) - T0)) binary_step_s=$BIN_S load1_end=$(cut -d' ' -f1 /proc/loadavg)" >> "$RESULTS/timing.txt"
	lab_summary "$RESULTS"
	;;
summary) lab_summary "${1:-$(ls -d "$LAB_WORK"/results/*/ | sort | tail -1)}" ;;
list) lab_list ;;
*) sed -n '2,19p' "$0" ;;
esac
