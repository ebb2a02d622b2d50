#!/bin/bash
# Builds the guest image from Debian's packages into $LAB_WORK/image:
#   rootfs.img (ext4), vmlinuz-<kver>, initrd.img-<kver> for every kernel in the image:
#   bookworm's 6.1 (linux-image-amd64) and the newest linux-image-6.12.*+deb12-amd64 of
#   bookworm-backports (downloaded with a private apt configuration: the host's own URI and
#   keyring, plus the backports suite; the host's apt state is not touched).
# The same image boots two ways: tiny init (init=/usr/local/sbin/lab-init) or systemd.
# The mirror is read from the host's apt sources.
set -euo pipefail
: "${LAB_WORK:?}"
HERE=$(cd "$(dirname "$0")" && pwd)
IMG_DIR=$LAB_WORK/image
ROOT=$IMG_DIR/rootfs
SUITE=bookworm
src=/etc/apt/sources.list.d/debian.sources
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' "$src" 2>/dev/null)}
KEYRING=$(awk '/^Signed-By:/{print $2; exit}' "$src" 2>/dev/null)
KEYRING=${KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
[ -n "$MIRROR" ] || { echo "build: cannot read the Debian mirror from $src (set MIRROR=)" >&2; exit 1; }
mkdir -p "$IMG_DIR" "$LAB_WORK/debs"

# 1. the 6.12 kernel package from bookworm-backports, via a private apt configuration
APT=$LAB_WORK/apt
mkdir -p "$APT"/{lists/partial,archives/partial,etc/preferences.d,etc/apt.conf.d}
cat > "$APT/etc/sources.list" <<EOS
deb [signed-by=$KEYRING] $MIRROR $SUITE main
deb [signed-by=$KEYRING] $MIRROR $SUITE-backports main
EOS
aptq() {
	apt-get -q -o Dir::Etc::SourceList="$APT/etc/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$APT/lists" -o Dir::Cache::Archives="$APT/archives" \
		-o Dir::Etc::Preferences="$APT/etc/preferences" -o Dir::Etc::PreferencesParts="$APT/etc/preferences.d" \
		-o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" "$@"
}
aptc() {
	apt-cache -o Dir::Etc::SourceList="$APT/etc/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$APT/lists" -o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" "$@"
}
aptq update
K612=${K612_PKG:-$(aptc search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | awk '{print $1}' | sort -V | tail -1)}
[ -n "$K612" ] || { echo "build: no linux-image-6.12.*+deb12-amd64 in $SUITE-backports" >&2; exit 1; }
echo "build: 6.12 kernel package $K612"
rm -f "$LAB_WORK"/debs/linux-image-*.deb
(cd "$LAB_WORK/debs" && aptq download "$K612")

# 2. debootstrap (minbase + the package list)
PKGS=$(grep -v '^#' "$HERE/packages.txt" | grep . | paste -sd, -)
rm -rf "$ROOT"
debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$ROOT" "$MIRROR"

# 3. extra kernels: unpack, copy modules and /boot, depmod (bookworm's kmod and mkinitramfs
#    handle 6.12's .ko.xz modules)
for deb in "$LAB_WORK"/debs/linux-image-*.deb; do
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
