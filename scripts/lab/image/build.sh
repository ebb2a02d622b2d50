#!/bin/bash
# Builds a guest image from Debian's packages: rootfs.img (ext4), vmlinuz-<kver> and
# initrd.img-<kver> for every kernel in the image, in $LAB_WORK/image (LAB_DIST=bookworm, the
# default) or $LAB_WORK/image-<dist> (LAB_DIST=trixie).
#   bookworm: its own 6.1 (linux-image-amd64) and the newest linux-image-6.12.*+deb12-amd64
#   of bookworm-backports;
#   trixie (Debian 13, the stand-in for Ubuntu 24.04: systemd 257, rdma-core with
#   librdmacm1t64): its own 6.12 (linux-image-amd64 of trixie itself, not its backports).
# Packages come through the lab's private apt configuration (host/apt.sh: the host's mirror
# and keyring; the host's apt state is not touched).
# The same image boots two ways: tiny init (init=/usr/local/sbin/lab-init) or systemd.
set -euo pipefail
: "${LAB_WORK:?}"
HERE=$(cd "$(dirname "$0")" && pwd)
LAB_DIST=${LAB_DIST:-bookworm}
SUITE=$LAB_DIST
IMG_DIR=$LAB_WORK/image
[ "$LAB_DIST" = bookworm ] || IMG_DIR=$LAB_WORK/image-$LAB_DIST
ROOT=$IMG_DIR/rootfs
export LAB_APT_SUITE=$SUITE
source "$HERE/../host/apt.sh"
mkdir -p "$IMG_DIR" "$LAB_WORK/debs"

# 1. bookworm: the 6.12 kernel package from bookworm-backports (unpacked into the image in
#    step 3; kmod/build.sh reads its version from the .deb)
lab_apt update
if [ "$LAB_DIST" = bookworm ]; then
	K612=${K612_PKG:-$(lab_apt_cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | awk '{print $1}' | sort -V | tail -1)}
	[ -n "$K612" ] || { echo "build: no linux-image-6.12.*+deb12-amd64 in $SUITE-backports" >&2; exit 1; }
	echo "build: 6.12 kernel package $K612"
	rm -f "$LAB_WORK"/debs/linux-image-*.deb
	(cd "$LAB_WORK/debs" && lab_apt download "$K612")
fi

# 2. debootstrap (minbase + the package list)
# a line "NAME" is for every suite, "NAME SUITE..." only for those named
PKGS=$(grep -v '^#' "$HERE/packages.txt" | awk -v s="$SUITE" 'NF==1{print $1; next} NF>1{for(i=2;i<=NF;i++) if($i==s) print $1}' | paste -sd, -)
rm -rf "$ROOT"
debootstrap --variant=minbase --keyring="$KEYRING" --include="$PKGS" "$SUITE" "$ROOT" "$MIRROR"

# 3. extra kernels: unpack, copy modules and /boot, depmod (bookworm's kmod and mkinitramfs
#    handle 6.12's .ko.xz modules)
[ "$LAB_DIST" = bookworm ] && extra=$(ls "$LAB_WORK"/debs/linux-image-*.deb) || extra=
for deb in $extra; do
	tmp=$(mktemp -d)
	dpkg -x "$deb" "$tmp"
	for kv in $(ls "$tmp/lib/modules"); do
		cp -a "$tmp/lib/modules/$kv" "$ROOT/lib/modules/"
		cp -a "$tmp"/boot/* "$ROOT/boot/"
		chroot "$ROOT" depmod "$kv"
	done
	rm -rf "$tmp"
done

# 4. lab tweaks
echo lab > "$ROOT/etc/hostname"
echo "127.0.0.1 localhost lab" > "$ROOT/etc/hosts"
echo "InitiatorName=iqn.2004-10.com.example:lab-initiator" > "$ROOT/etc/iscsi/initiatorname.iscsi"
install -m 0755 "$HERE/lab-init" "$ROOT/usr/local/sbin/lab-init"
mkdir -p "$ROOT/lab"
echo "# the lab guest has no network; packages come from the image build" > "$ROOT/etc/apt/sources.list"
# systemd boot: the share in fstab, 9p modules, a machine-id, the runner unit, no timers that
# take the dpkg lock, root without password on the console (debug only)
cat > "$ROOT/etc/fstab" <<'EOS'
/dev/vda / ext4 rw,errors=remount-ro 0 1
lab /lab 9p trans=virtio,version=9p2000.L,msize=262144,nofail 0 0
EOS
printf '9pnet_virtio\n9p\n' > "$ROOT/etc/modules-load.d/lab.conf"
install -m 0644 "$HERE/lab-test.service" "$ROOT/etc/systemd/system/lab-test.service"
mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/lab-test.service "$ROOT/etc/systemd/system/multi-user.target.wants/lab-test.service"
chroot "$ROOT" passwd -d root || true
rm -f "$ROOT/etc/machine-id"; chroot "$ROOT" systemd-machine-id-setup
rm -f "$ROOT"/etc/systemd/system/timers.target.wants/apt-daily*.timer \
	"$ROOT"/etc/systemd/system/timers.target.wants/dpkg-db-backup.timer
# iscsid/open-iscsi units must not start on the systemd boot before the scenario sets up
# the network; scenarios start iscsid themselves
rm -f "$ROOT"/etc/systemd/system/*.wants/iscsid.* "$ROOT"/etc/systemd/system/*.wants/open-iscsi.service

# 5. a small initramfs per kernel (virtio disk + ext4; the rest loads from the rootfs)
printf 'virtio_pci\nvirtio_blk\next4\n' > "$ROOT/etc/initramfs-tools/modules"
sed -i 's/^MODULES=.*/MODULES=list/' "$ROOT/etc/initramfs-tools/initramfs.conf"
rm -f "$IMG_DIR"/vmlinuz-* "$IMG_DIR"/initrd.img-*
for kv in $(ls "$ROOT/lib/modules" | sort -V); do
	[ -f "$ROOT/boot/vmlinuz-$kv" ] || continue
	chroot "$ROOT" mkinitramfs -o "/boot/initrd.img-$kv" "$kv"
	cp "$ROOT/boot/vmlinuz-$kv" "$ROOT/boot/initrd.img-$kv" "$IMG_DIR/"
	echo "build: kernel $kv"
done
ls "$ROOT/lib/modules" | sort -V > "$IMG_DIR/kernels.txt"
chroot "$ROOT" dpkg-query -W > "$IMG_DIR/packages-installed.txt"
rm -f "$IMG_DIR/rootfs.img.new"
mkfs.ext4 -q -L labroot -d "$ROOT" "$IMG_DIR/rootfs.img.new" 3G
mv -f "$IMG_DIR/rootfs.img.new" "$IMG_DIR/rootfs.img"
echo "build: image $IMG_DIR/rootfs.img"
