#!/bin/bash
# The lab's private apt configuration (sourced): the host's own mirror and keyring, a suite
# (LAB_APT_SUITE: bookworm, the default, or trixie) and its backports, with lists and archives
# under $LAB_WORK/apt (bookworm) or $LAB_WORK/apt-<suite>. The host's own apt state is never
# touched. Used by the image build and the kernel-module build.
: "${LAB_WORK:?}"
LAB_APT_SUITE=${LAB_APT_SUITE:-bookworm}
LAB_APT=$LAB_WORK/apt
[ "$LAB_APT_SUITE" = bookworm ] || LAB_APT=$LAB_WORK/apt-$LAB_APT_SUITE
_lab_apt_src=/etc/apt/sources.list.d/debian.sources
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' "$_lab_apt_src" 2>/dev/null)}
KEYRING=$(awk '/^Signed-By:/{print $2; exit}' "$_lab_apt_src" 2>/dev/null)
KEYRING=${KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
[ -n "$MIRROR" ] || { echo "lab apt: cannot read the Debian mirror from $_lab_apt_src (set MIRROR=)" >&2; exit 1; }

mkdir -p "$LAB_APT"/{lists/partial,archives/partial,etc/preferences.d,etc/apt.conf.d}
cat > "$LAB_APT/etc/sources.list" <<EOS
deb [signed-by=$KEYRING] $MIRROR $LAB_APT_SUITE main
deb [signed-by=$KEYRING] $MIRROR $LAB_APT_SUITE-backports main
EOS

lab_apt() {
	apt-get -q -o Dir::Etc::SourceList="$LAB_APT/etc/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$LAB_APT/lists" -o Dir::Cache::Archives="$LAB_APT/archives" \
		-o Dir::Etc::Preferences="$LAB_APT/etc/preferences" -o Dir::Etc::PreferencesParts="$LAB_APT/etc/preferences.d" \
		-o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" "$@"
}
lab_apt_cache() {
	apt-cache -o Dir::Etc::SourceList="$LAB_APT/etc/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$LAB_APT/lists" -o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" "$@"
}
# lists older than a day are refreshed once per process
lab_apt_update_once() {
	[ -n "${_lab_apt_updated:-}" ] && return 0
	if [ -z "$(find "$LAB_APT/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
		lab_apt update > /dev/null
	fi
	_lab_apt_updated=1
}
