#!/bin/bash
# Host-side helpers of scripts/lab/run.sh (sourced). LAB_SRC, REPO and LAB_WORK are set.

# Guest images, one per Debian suite (DIST): bookworm (Debian 12: 6.1 and backports' 6.12, the
# default) in $LAB_WORK/image, trixie (Debian 13, the stand-in for Ubuntu 24.04) in
# $LAB_WORK/image-trixie.
lab_image_dir() { if [ "${1:-bookworm}" = bookworm ]; then echo "$LAB_WORK/image"; else echo "$LAB_WORK/image-$1"; fi; }
lab_log_suffix() { [ "${1:-bookworm}" = bookworm ] || echo "-$1"; }

# The image recipe: every file under image/, and the suite. Its hash names the image that is
# cached in the suite's image folder; another hash means another recipe, and it is rebuilt.
lab_recipe_hash() {
	local dist=${1:-bookworm}
	{
		(cd "$LAB_SRC/image" && find . -type f | LC_ALL=C sort | xargs sha256sum)
		# bookworm's hash stays what it was before suites were named
		[ "$dist" = bookworm ] || echo "suite $dist"
	} | sha256sum | cut -c1-16
}

# lab_build_image [DIST]
lab_build_image() {
	local dist=${1:-bookworm} want have img log
	img=$(lab_image_dir "$dist")
	log=$LAB_WORK/image-build$(lab_log_suffix "$dist").log
	want=$(lab_recipe_hash "$dist")
	have=$(cat "$img/recipe.sha" 2>/dev/null || true)
	if [ "$want" = "$have" ] && [ -f "$img/rootfs.img" ]; then
		echo "lab: $dist image cached (recipe $want): $(tr '\n' ' ' < "$img/kernels.txt")"
		return 0
	fi
	echo "lab: building the $dist guest image (recipe $want; was ${have:-none})"
	rm -f "$img/recipe.sha"
	local t0=$(date +%s)
	LAB_DIST=$dist "$LAB_SRC/image/build.sh" > "$log" 2>&1 || {
		echo "lab: image build failed, see $log" >&2
		tail -20 "$log" >&2
		return 1
	}
	echo "$want" > "$img/recipe.sha"
	echo "lab: $dist image built in $(($(date +%s) - t0)) s: $(tr '\n' ' ' < "$img/kernels.txt")"
}

# The lab's irdma-like rdma_rxe (kmod/README.md), one per kernel of a suite's image; cached
# in $LAB_WORK/kmod and rebuilt only when its patch, model or kernel package changes.
# lab_build_kmod [DIST]
lab_build_kmod() {
	local dist=${1:-bookworm} t0=$(date +%s) log
	log=$LAB_WORK/kmod-build$(lab_log_suffix "$dist").log
	if ! LAB_DIST=$dist "$LAB_SRC/kmod/build.sh" > "$log" 2>&1; then
		tail -20 "$log" >&2
		echo "lab: kernel module build failed, see $log" >&2
		return 1
	fi
	grep '^kmod:' "$log"
	echo "lab: kernel modules ready in $(($(date +%s) - t0)) s"
}

# The 9p share the guest mounts on /lab: guest scripts, the binary, the .debs, the results.
SHARE=$LAB_WORK/share

# Batches: NAME KERNEL(prefix of the kernel release) INIT(tiny|systemd) TIMEOUT_S [DIST], in
# run order. Each batch is one guest boot of DIST's image (default bookworm) running
# guest/batches/NAME.sh (tiny init) or guest/batches/NAME.sh under systemd (systemd init).
lab_batch_table() {
	cat <<'EOT'
k612-recovery 6.12 tiny 1800
k612-operator 6.12 tiny 1200
systemd 6.12 systemd 1200
k61-recovery 6.1. tiny 1500
smoke 6.12 tiny 400
k612-baseline-b 6.12 tiny 1800
k612-rest 6.12 tiny 1800
k61-listener 6.1. tiny 600
k612-verbs 6.12 tiny 600
k61-verbs 6.1. tiny 600
k612-verify 6.12 tiny 900
k61-verify 6.1. tiny 900
kfield-probe 6.12 tiny 900
kfield-early 6.12 tiny 900
kfield-repeat 6.12 tiny 1500
kfield-reboot 6.12 tiny 1500
k612-consumers 6.12 tiny 900
k612-multipath 6.12 tiny 900
k612-references 6.12 tiny 600
k612-drivers 6.12 tiny 1200
k61-doctor 6.1. tiny 600
trixie-systemd 6.12 systemd 1500 trixie
trixie-recovery 6.12 tiny 1200 trixie
EOT
}
# smoke, k612-baseline-b, k612-rest, k61-listener, k612-verbs, k61-verbs, k612-verify, k61-verify, kfield-probe, kfield-early, kfield-repeat, kfield-reboot, k612-consumers, k612-multipath, k612-references, k612-drivers, k61-doctor and the batches of another suite (trixie-*) are
# run by name only (a second boot after a stopped one, one scenario on a fresh guest, or
# another distribution).
lab_batches() { lab_batch_table | awk '$1!="smoke" && $1!="k612-baseline-b" && $1!="k612-rest" && $1!="k61-listener" && $1!~/-verbs$/ && $1!~/-verify$/ && $1!="kfield-probe" && $1!="kfield-early" && $1!="kfield-repeat" && $1!="kfield-reboot" && $1!="k612-consumers" && $1!="k612-multipath" && $1!="k612-references" && $1!="k612-drivers" && $1!="k61-doctor" && $5==""{print $1}'; }
lab_list() {
	local b
	for b in $(lab_batches); do
		echo "$b ($(lab_batch_table | awk -v b=$b '$1==b{print "kernel " $2 "*, init " $3}')):"
		# continued lines (trailing backslash) joined first: a batch's list may span several
		sed -e ':a' -e '/\\$/{N;s/\\\n//;ba}' "$LAB_SRC/guest/batches/$b.sh" |
			grep -o 'run_scenarios.*\|^\s*sd_run [a-z-]*' | sed 's/run_scenarios//; s/sd_run//' | tr -s ' \\\n\t' ' ' | sed 's/^/  /'
		echo
	done
}

lab_stage_guest() {
	mkdir -p "$SHARE/guest" "$SHARE/results"
	[ -e "$LAB_WORK/results" ] || ln -s share/results "$LAB_WORK/results"
	rm -rf "$SHARE/guest" "$SHARE/kmod"
	cp -a "$LAB_SRC/guest" "$SHARE/guest"
	# the built modules: /lab/kmod/<kver>/rdma_rxe.ko in the guest
	local d
	for d in "$LAB_WORK"/kmod/*/; do
		[ -f "$d/rdma_rxe.ko" ] || continue
		mkdir -p "$SHARE/kmod/$(basename "$d")"
		cp "$d/rdma_rxe.ko" "$d/modinfo.txt" "$SHARE/kmod/$(basename "$d")/"
	done
}

# The source tree `binary` builds: SRC (default this clone) as it is, or, with SRC_COMMIT, that
# commit of SRC's repository exported (git archive) into $LAB_WORK/src, whose target/ is kept
# between exports: another engineer's branch is built exactly at the commit named, without
# touching their work tree or its target/. SRC_MERGE=COMMIT builds the merge of SRC_COMMIT and
# COMMIT instead (git merge-tree, no work tree touched; a conflict is an error). The first
# export's target/release is seeded with the compiled registry dependencies of
# /work/main/target/release when that exists (the workspace's own crates are built afresh).
lab_source_tree() {
	local src=${SRC:-$REPO}
	if [ -z "${SRC_COMMIT:-}" ]; then
		(cd "$src" && pwd)
		return
	fi
	local dst=$LAB_WORK/src what tree
	mkdir -p "$dst"
	git -C "$src" cat-file -e "$SRC_COMMIT^{commit}" || { echo "lab: no commit $SRC_COMMIT in $src" >&2; return 1; }
	what=$(git -C "$src" rev-parse "$SRC_COMMIT")
	tree=$what
	if [ -n "${SRC_MERGE:-}" ]; then
		tree=$(git -C "$src" merge-tree --write-tree "$SRC_COMMIT" "$SRC_MERGE") || {
			echo "lab: $SRC_COMMIT and $SRC_MERGE do not merge cleanly:" >&2
			echo "$tree" | tail -n +2 >&2
			return 1
		}
		what="$what+$(git -C "$src" rev-parse "$SRC_MERGE")"
	fi
	# into a staging folder, then only files whose content differs are replaced in $dst: an
	# unchanged file keeps its mtime, so cargo rebuilds only what changed (git archive of a
	# merged tree stamps every file with the current time)
	local stage=$LAB_WORK/src.stage
	rm -rf "$stage"
	mkdir -p "$stage"
	git -C "$src" archive "$tree" | tar -x -C "$stage"
	python3 - "$stage" "$dst" <<'EOP'
import filecmp, os, shutil, sys
stage, dst = sys.argv[1], sys.argv[2]
want = set()
for root, dirs, files in os.walk(stage):
    rel = os.path.relpath(root, stage)
    for f in files:
        r = os.path.normpath(os.path.join(rel, f)); want.add(r)
        a, b = os.path.join(stage, r), os.path.join(dst, r)
        if os.path.islink(a) or not os.path.isfile(b) or not filecmp.cmp(a, b, shallow=False):
            os.makedirs(os.path.dirname(b), exist_ok=True)
            if os.path.lexists(b): os.remove(b)
            shutil.copy2(a, b, follow_symlinks=False)
for root, dirs, files in os.walk(dst):
    rel = os.path.relpath(root, dst)
    if rel == "target" or rel.startswith("target" + os.sep):
        dirs[:] = []; continue
    if rel == ".":
        dirs[:] = [d for d in dirs if d != "target"]
    for f in files:
        r = os.path.normpath(os.path.join(rel, f))
        if r not in want and r != ".lab-commit": os.remove(os.path.join(dst, r))
EOP
	rm -rf "$stage"
	echo "$what" > "$dst/.lab-commit"
	# seed target/release (the binary) and target/debug (build-deb.sh's generator examples)
	local prof seed
	for prof in release debug; do
		seed=/work/main/target/$prof
		[ "$prof" = release ] && seed=${LAB_SEED_RELEASE:-$seed}
		[ ! -d "$dst/target/$prof" ] && [ -d "$seed/deps" ] || continue
		mkdir -p "$dst/target/$prof/deps"
		cp -a "$seed/build" "$seed/.fingerprint" "$dst/target/$prof/" 2>/dev/null
		rm -rf "$dst/target/$prof/.fingerprint"/iser-guard* "$dst/target/$prof/.fingerprint"/iser_guard*
		find "$seed/deps" -maxdepth 1 -type f \( -name 'lib*' -o -name '*.d' \) ! -name '*iser_guard*' -exec cp -a {} "$dst/target/$prof/deps/" \;
		echo "lab: seeded $dst/target/$prof from $seed" >&2
	done
	echo "$dst"
}

# cargo build --release (the binary the guest runs as the daemon) and the .debs for the systemd
# batch: the package as scripts/build-deb.sh builds it, and the same package with a higher
# version for the upgrade scenario.
lab_stage_binary() {
	mkdir -p "$SHARE/bin" "$SHARE/deb"
	local tree
	tree=$(lab_source_tree) || return 1
	echo "lab: building the release binary from $tree${SRC_COMMIT:+ (commit $SRC_COMMIT${SRC_MERGE:+ merged with $SRC_MERGE} of ${SRC:-$REPO})}"
	(cd "$tree" && cargo build --release --locked)
	install -m 0755 "$tree/target/release/iser-guard" "$SHARE/bin/iser-guard"
	{
		if [ -f "$tree/.lab-commit" ]; then
			echo "commit=$(cat "$tree/.lab-commit")"
			echo "code_commit=$(cat "$tree/.lab-commit")"
			echo "code_dirty=0"
		else
			echo "commit=$(git -C "$tree" rev-parse HEAD 2>/dev/null)"
			echo "code_commit=$(git -C "$tree" log -1 --format=%H -- src crates Cargo.toml Cargo.lock 2>/dev/null)"
			echo "code_dirty=$(git -C "$tree" status --porcelain --untracked-files=normal -- src crates Cargo.toml Cargo.lock 2>/dev/null | wc -l)"
		fi
		echo "source=$tree"
		echo "built=$(date -u +%FT%TZ)"
	} > "$SHARE/bin/build.txt"
	local sha
	sha=$(sha256sum "$SHARE/bin/iser-guard" | cut -c1-64)
	if [ -n "${NO_DEB:-}" ]; then
		rm -f "$SHARE"/deb/*.deb "$SHARE"/deb/.binary.sha
	elif [ "$(cat "$SHARE/deb/.binary.sha" 2>/dev/null)" = "$sha" ] && ls "$SHARE"/deb/1-*.deb "$SHARE"/deb/2-upgrade.deb > /dev/null 2>&1; then
		echo "lab: the .debs of this binary are staged already"
	else
		rm -f "$SHARE"/deb/*.deb "$SHARE"/deb/*.ddeb "$SHARE"/deb/.binary.sha
		(cd "$tree" && scripts/build-deb.sh --no-build)
		local deb ver
		deb=$(ls -t "$tree"/target/debian/iser-guard_*_amd64.deb | head -1)
		cp "$deb" "$SHARE/deb/1-$(basename "$deb")"
		ver=$(dpkg-deb -f "$deb" Version)
		(cd "$tree" && cargo deb --locked --no-build --deb-version "${ver}+lab1" -o "$SHARE/deb/2-upgrade.deb")
		rm -f "$SHARE"/deb/*.ddeb
		echo "$sha" > "$SHARE/deb/.binary.sha"
		ls -l "$SHARE/deb"
	fi
	cat "$SHARE/bin/build.txt"
}

# The prefix is literal (its dots escaped): as a regular expression "6.1." also matched
# 6.12.95, and the 6.1 batch booted 6.12 (lab run of 2026-12-01).
# lab_kernel PREFIX [DIST]
lab_kernel() { grep "^$(printf '%s' "$1" | sed 's/[.]/[.]/g')" "$(lab_image_dir "${2:-bookworm}")/kernels.txt" | sort -V | tail -1; }

# lab_boot KVER INIT BATCH OUTDIR_IN_SHARE TIMEOUT [DIST]: one guest boot. TCG: KVM does not work on
# these machines (MSR 0x10a, then a guest that never boots).
lab_boot() {
	local kver=$1 init=$2 batch=$3 out=$4 tmo=$5 img
	img=$(lab_image_dir "${6:-bookworm}")
	# softlockup_panic: a CPU stuck in the kernel for 60 s (watchdog_thresh 30: 2 × 30 s, high
	# enough for a starved TCG vCPU) ends the boot with a panic instead of a hung batch
	local append="root=/dev/vda rw console=ttyS0 panic=-1 log_buf_len=16M watchdog_thresh=30 softlockup_panic=1"
	append+=" lab.batch=$batch lab.out=/lab/$out"
	[ "$init" = tiny ] && append+=" init=/usr/local/sbin/lab-init"
	[ "$init" = systemd ] && append+=" systemd.show_status=1"
	timeout "$tmo" "$LAB_WORK/qemu/usr/bin/qemu-system-x86_64" -L "$LAB_WORK/fw" \
		-accel tcg,thread=multi -cpu max -smp "${SMP:-2}" -m "${MEM:-2048}" \
		-kernel "$img/vmlinuz-$kver" -initrd "$img/initrd.img-$kver" -append "$append" \
		-drive file="$img/rootfs.img",if=virtio,format=raw,snapshot=on \
		-virtfs local,path="$SHARE",mount_tag=lab,security_model=none,id=lab \
		-nic none -display none -monitor none -serial file:"$SHARE/$out/console.log" -no-reboot
}

lab_run_batch() {
	local b=$1 row kpre init tmo dist kver rel out t0 rc
	row=$(lab_batch_table | awk -v b="$b" '$1==b')
	[ -n "$row" ] || { echo "lab: no batch $b (run.sh list)" >&2; return 64; }
	read -r _ kpre init tmo dist <<< "$row"
	dist=${dist:-bookworm}
	kver=${KVER:-$(lab_kernel "$kpre" "$dist")}
	[ -n "$kver" ] || { echo "lab: no $kpre kernel in the $dist image" >&2; return 1; }
	[ -x "$SHARE/bin/iser-guard" ] || { echo "lab: no binary staged (run.sh binary)" >&2; return 1; }
	rel=${RESULTS#"$LAB_WORK"/results/}
	out=results/$rel/$b
	mkdir -p "$SHARE/$out"
	cp "$SHARE/bin/build.txt" "$SHARE/$out/binary.txt"
	echo "lab: batch $b on $kver ($dist, $init init), timeout $tmo s"
	echo "$dist" > "$SHARE/$out/dist.txt"
	t0=$(date +%s)
	# the host's load average every 30 s while the guest runs: TCG's speed follows it
	local l0 sampler
	l0=$(cut -d' ' -f1 /proc/loadavg)
	(while sleep 30; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; done) > "$SHARE/$out/host-load.txt" 2>&1 &
	sampler=$!
	lab_boot "$kver" "$init" "$b" "$out" "$tmo" "$dist"
	rc=$?
	kill $sampler 2>/dev/null
	local lmax
	lmax=$(awk -v m="$l0" '$2>m{m=$2} END{print m}' "$SHARE/$out/host-load.txt")
	echo "batch $b kernel $kver dist $dist init $init wall_s $(($(date +%s) - t0)) qemu_rc $rc load1_start $l0 load1_max $lmax" | tee -a "$RESULTS/timing.txt"
	grep -h '^VERDICT' "$SHARE/$out/verdicts.txt" 2>/dev/null || true
	# soft lockups are counted, not judged: under TCG on a loaded host the guest's vCPUs starve
	# and its watchdog reports "BUG: soft lockup" for code that is merely not scheduled
	echo "FIGURE $b soft_lockup_reports $(grep -ac 'BUG: soft lockup' "$SHARE/$out/console.log")" >> "$SHARE/$out/figures.txt"
	local bad='Kernel panic\|Oops\|BUG: kernel\|BUG: unable\|general protection fault'
	if grep -aq "$bad" "$SHARE/$out/console.log" 2>/dev/null; then
		local line last
		line=$(grep -a -m1 "$bad" "$SHARE/$out/console.log" | cut -c1-160)
		last=$(grep -ao '=== scenario [a-z0-9-]*' "$SHARE/$out/batch.log" 2>/dev/null | tail -1 | cut -d' ' -f3)
		if [ -n "$last" ] && [ "${last%-iscsid-alone}" != "$last" ] &&
			! grep -q "^VERDICT $last " "$SHARE/$out/verdicts.txt" 2>/dev/null; then
			# a reference run has no daemon: the crash is what the kernel does with iscsid
			# alone (docs/lab.md, kernel bugs met), that run's result, not the product's
			echo "VERDICT $last KERNEL-BUG reference run (no daemon running): the guest kernel crashed: $line" | tee -a "$SHARE/$out/verdicts.txt"
		else
			echo "VERDICT $b-guest FAIL kernel: $line" | tee -a "$SHARE/$out/verdicts.txt"
		fi
	elif [ $rc = 124 ]; then
		echo "VERDICT $b-guest ERROR lab: the guest did not power off within $tmo s" | tee -a "$SHARE/$out/verdicts.txt"
	fi
	return 0
}

lab_summary() {
	local r=${1%/} b
	{
		echo "# iser-guard lab run $(basename "$r")"
		cat "$r"/*/binary.txt 2>/dev/null | sort -u | sed 's/^/binary: /'
		for b in "$r"/*/; do
			[ -f "$b/kernel.txt" ] && echo "batch $(basename "$b"): kernel $(cat "$b/kernel.txt")"
		done
		echo
		cat "$r"/*/verdicts.txt 2>/dev/null
		echo
		cat "$r"/*/figures.txt 2>/dev/null | grep '^FIGURE'
		echo
		cat "$r/timing.txt" 2>/dev/null
		echo
		echo "PASS $(cat "$r"/*/verdicts.txt 2>/dev/null | grep -c ' PASS ') FAIL $(cat "$r"/*/verdicts.txt 2>/dev/null | grep -c ' FAIL ') ERROR $(cat "$r"/*/verdicts.txt 2>/dev/null | grep -c ' ERROR ') KERNEL-BUG $(cat "$r"/*/verdicts.txt 2>/dev/null | grep -c ' KERNEL-BUG ')"
	} > "$r/summary.txt"
	cat "$r/summary.txt"
}
