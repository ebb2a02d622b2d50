#!/bin/bash
# Host prerequisites for the lab, from Debian's packages.
# QEMU's system emulator is *extracted* (dpkg -x) into $LAB_WORK/qemu instead of installed: on
# hosts that carry a newer qemu-utils (e.g. from backports), qemu-system-common of the stable
# release declares Breaks against it, so dpkg cannot install both. Only its shared libraries and
# firmware packages are installed system-wide.
set -euo pipefail
: "${LAB_WORK:?}"
mkdir -p "$LAB_WORK"/{debs,qemu,fw}
stamp=$LAB_WORK/qemu/.setup-done
# the irdma-like rdma_rxe (kmod/build.sh) is built with the compiler Debian's kernels were
# built with (gcc-12 on bookworm), against unpacked headers
kmod_need=()
for p in gcc-12 make patch binutils xz-utils; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || kmod_need+=("$p")
done
if ((${#kmod_need[@]})); then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${kmod_need[@]}"
fi
if [ -f "$stamp" ] && [ -x "$LAB_WORK/qemu/usr/bin/qemu-system-x86_64" ]; then
	"$LAB_WORK/qemu/usr/bin/qemu-system-x86_64" --version | head -1
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
	debootstrap cpio zstd xz-utils e2fsprogs seabios ipxe-qemu qemu-system-data python3 \
	libaio1 libbpf1 libcapstone4 libfdt1 libfuse3-3 libibverbs1 libjpeg62-turbo libnuma1 \
	libpixman-1-0 libpmem1 libpng16-16 librdmacm1 libsasl2-2 libseccomp2 libslirp0 liburing2 \
	libvdeplug2 libasound2 libbrlapi0.8 libcacard0 libcap-ng0 libepoxy0 libgbm1 libsndio7.0 \
	libspice-server1 libusb-1.0-0 libusbredirparser1
if dpkg -s qemu-system-x86 >/dev/null 2>&1; then
	mkdir -p "$LAB_WORK/qemu/usr/bin"
	ln -sf /usr/bin/qemu-system-x86_64 "$LAB_WORK/qemu/usr/bin/qemu-system-x86_64"
else
	rm -f "$LAB_WORK"/debs/qemu-system-x86_*.deb "$LAB_WORK"/debs/qemu-system-common_*.deb
	(cd "$LAB_WORK/debs" && apt-get download qemu-system-x86 qemu-system-common)
	for d in "$LAB_WORK"/debs/qemu-system-x86_*.deb "$LAB_WORK"/debs/qemu-system-common_*.deb; do
		dpkg -x "$d" "$LAB_WORK/qemu"
	done
fi
# firmware search directory for qemu -L: SeaBIOS, qemu-system-data's blobs, iPXE option ROMs
ln -sf /usr/share/seabios/* "$LAB_WORK/fw/"
ln -sf /usr/share/qemu/* "$LAB_WORK/fw/" 2>/dev/null || true
for f in /usr/lib/ipxe/qemu/*.rom; do ln -sf "$f" "$LAB_WORK/fw/"; done
"$LAB_WORK/qemu/usr/bin/qemu-system-x86_64" --version | head -1
touch "$stamp"
