#!/bin/bash
# Builds the lab's irdma-like rdma_rxe (README.md beside this file) for every kernel of a
# guest image (LAB_DIST: bookworm, the default, or trixie), from Debian's own packages of that
# exact kernel version:
#   linux-source-<series> (the rxe sources), linux-headers-<kver> and what it depends on
#   (linux-headers-<...>-common, linux-kbuild-<...>), fetched with the lab's private apt
#   configuration ($LAB_WORK/apt, written by the image build) and unpacked, never installed.
# The rxe folder gets hooks-<series>.patch and rxe_lab_irdma.[ch], and is built out of tree
# against the unpacked headers with the compiler the kernel was built with: the host's gcc-12
# for Debian 12's kernels; for a kernel built with a compiler the host does not have (Debian
# 13's: gcc-14, and its kbuild tools need trixie's glibc) inside a build chroot of that suite
# ($LAB_WORK/kmod/chroot-<suite>: debootstrap minbase with the compiler, make and the kbuild
# tools' libraries, made once), the work folder bind-mounted at the same path.
# Cached in $LAB_WORK/kmod/<kver>/: rebuilt only when the patch, the model, this script or the
# kernel package's version changes (key.txt).
set -euo pipefail
: "${LAB_WORK:?}"
HERE=$(cd "$(dirname "$0")" && pwd)
LAB_DIST=${LAB_DIST:-bookworm}
IMG_DIR=$LAB_WORK/image
[ "$LAB_DIST" = bookworm ] || IMG_DIR=$LAB_WORK/image-$LAB_DIST
export LAB_APT_SUITE=$LAB_DIST
source "$HERE/../host/apt.sh"
KM=$LAB_WORK/kmod
# the kernel packages each suite's kmod is built from (one suite's 6.12 is not the other's)
DEBS=$KM/debs
[ "$LAB_DIST" = bookworm ] || DEBS=$KM/debs-$LAB_DIST
mkdir -p "$DEBS"

# the Debian version of the package that carries kernel KVER in the image
kernel_pkg_version() {
	local kv=$1 v deb
	v=$(awk -v p="linux-image-$kv" '$1==p{print $2}' "$IMG_DIR/packages-installed.txt" 2>/dev/null)
	if [ -z "$v" ]; then
		# the backports kernel is unpacked into the image, not installed: its .deb says
		deb=$(ls "$LAB_WORK"/debs/linux-image-"$kv"_*.deb 2>/dev/null | head -1)
		[ -n "$deb" ] && v=$(dpkg-deb -f "$deb" Version)
	fi
	[ -n "$v" ] || { echo "kmod: cannot tell the package version of kernel $kv" >&2; return 1; }
	echo "$v"
}

# build_chroot CC: a chroot of this suite that has the compiler CC (e.g. x86_64-linux-gnu-gcc-14),
# made once; prints its path
build_chroot() {
	local cc=$1 root=$KM/chroot-$LAB_DIST
	if [ ! -x "$root/usr/bin/$cc" ]; then
		rm -rf "$root"
		echo "kmod: making the $LAB_DIST build chroot for $cc" >&2
		debootstrap --variant=minbase --keyring="$KEYRING" \
			--include="gcc-${cc##*-},make,libc6-dev,libelf1t64,libssl3t64,zlib1g" \
			"$LAB_APT_SUITE" "$root" "$MIRROR" > "$KM/chroot-$LAB_DIST.log" 2>&1 || {
			echo "kmod: debootstrap of the build chroot failed (see $KM/chroot-$LAB_DIST.log)" >&2; return 1; }
	fi
	echo "$root"
}

build_one() {
	local kv=$1 v series patch key have w hdr src deps pkg
	v=$(kernel_pkg_version "$kv")
	series=$(echo "$kv" | cut -d. -f1-2 | sed 's/-.*//')
	patch=$HERE/hooks-$series.patch
	[ -f "$patch" ] || { echo "kmod: no hooks for kernel series $series ($kv): write $patch" >&2; return 1; }
	key=$( (echo "$kv $v"; cat "$patch" "$HERE/rxe_lab_irdma.c" "$HERE/rxe_lab_irdma.h" "$HERE/build.sh") | sha256sum | cut -c1-16)
	have=$(cat "$KM/$kv/key.txt" 2>/dev/null || true)
	if [ "$key" = "$have" ] && [ -f "$KM/$kv/rdma_rxe.ko" ]; then
		echo "kmod: $kv cached (key $key)"
		return 0
	fi
	echo "kmod: building rdma_rxe for $kv (package $v, series $series, key $key; was ${have:-none})"
	w=$KM/$kv.work
	rm -rf "$w" "$KM/$kv"
	mkdir -p "$w/root"
	lab_apt_update_once
	# linux-headers-KVER pulls linux-headers-*-common and linux-kbuild-* of the same version
	deps=$(lab_apt_cache show "linux-headers-$kv=$v" | awk -F': ' '/^Depends:/{print $2; exit}' |
		tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -E '^linux-(headers|kbuild)-' || true)
	for pkg in "linux-source-$series" "linux-headers-$kv" $deps; do
		ls "$DEBS/${pkg}_"*.deb > /dev/null 2>&1 && [ "$(dpkg-deb -f "$(ls "$DEBS/${pkg}_"*.deb | head -1)" Version)" = "$v" ] && continue
		rm -f "$DEBS/${pkg}_"*.deb
		(cd "$DEBS" && lab_apt download "$pkg=$v") > "$w/apt.log" 2>&1 || {
			echo "kmod: cannot download $pkg=$v (see $w/apt.log)" >&2; return 1; }
	done
	for pkg in "linux-headers-$kv" $deps; do dpkg -x "$DEBS/${pkg}_"*.deb "$w/root"; done
	hdr=$w/root/usr/src/linux-headers-$kv
	# the per-flavour Makefile includes the common one by its installed path
	sed -i "s#^include /usr/src/#include $w/root/usr/src/#" "$hdr/Makefile"
	# only the rxe folder of the source tarball
	dpkg-deb --fsys-tarfile "$DEBS/linux-source-${series}_"*.deb |
		tar -x -C "$w" "./usr/src/linux-source-$series.tar.xz"
	src=$w/src
	mkdir -p "$src"
	tar -xJf "$w/usr/src/linux-source-$series.tar.xz" -C "$src" --strip-components=1 \
		"linux-source-$series/drivers/infiniband/sw/rxe"
	rm -rf "$w/usr"
	patch -d "$src" -p1 --no-backup-if-mismatch < "$patch"
	cp "$HERE/rxe_lab_irdma.c" "$HERE/rxe_lab_irdma.h" "$src/drivers/infiniband/sw/rxe/"
	sed -i 's/^obj-$(CONFIG_RDMA_RXE)/obj-m/' "$src/drivers/infiniband/sw/rxe/Makefile"
	# BTF for modules needs pahole and the kernel's vmlinux; the module loads without it
	local cc make_in=()
	cc=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\{0,1\}\([^ "]*\).*/\1/p' "$hdr/include/config/auto.conf")
	if [ -n "$cc" ] && ! command -v "$cc" > /dev/null; then
		local root
		root=$(build_chroot "$cc") || return 1
		make_in=(chroot "$root")
		mkdir -p "${make_in[1]}$w"
		mount --bind "$w" "${make_in[1]}$w"
		echo "kmod: $kv needs $cc: building in ${make_in[1]}"
	fi
	local rc=0
	"${make_in[@]}" make -C "$hdr" M="$src/drivers/infiniband/sw/rxe" modules -j"$(nproc)" \
		CONFIG_DEBUG_INFO_BTF_MODULES= > "$w/make.log" 2>&1 || rc=$?
	[ ${#make_in[@]} = 0 ] || umount "${make_in[1]}$w"
	[ $rc = 0 ] || {
		tail -30 "$w/make.log" >&2; echo "kmod: build failed for $kv (see $w/make.log)" >&2; return 1; }
	mkdir -p "$KM/$kv"
	cp "$src/drivers/infiniband/sw/rxe/rdma_rxe.ko" "$KM/$kv/"
	strings "$KM/$kv/rdma_rxe.ko" | grep -E '^(vermagic|depends)=' > "$KM/$kv/modinfo.txt"
	grep -q "^vermagic=$kv " "$KM/$kv/modinfo.txt" || {
		echo "kmod: built module's vermagic is not $kv: $(cat "$KM/$kv/modinfo.txt")" >&2; return 1; }
	echo "$key" > "$KM/$kv/key.txt"
	echo "package=$v series=$series" >> "$KM/$kv/modinfo.txt"
	rm -rf "$w"
	echo "kmod: $kv built: $(tr '\n' ' ' < "$KM/$kv/modinfo.txt")"
}

for kv in ${KVERS:-$(cat "$IMG_DIR/kernels.txt")}; do
	build_one "$kv"
done
