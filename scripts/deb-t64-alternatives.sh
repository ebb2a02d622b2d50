#!/usr/bin/env bash
# Gives the .deb's library dependencies that the 64-bit time_t transition renamed an
# alternative with the new name, in the DEBIAN/control file given: built on Debian 12,
# dpkg-shlibdeps (cargo-deb's $auto) writes `librdmacm1 (>= V)`; Ubuntu 24.04 and Debian 13
# ship that library as librdmacm1t64. The result is `librdmacm1t64 (>= V) | librdmacm1 (>= V)`.
#
# Why, when apt could do without: on 64-bit architectures the renamed package also
# Provides the old name at its own version (`librdmacm1 (= 50.0-2...)`, the transition's
# t64:Provides), so apt resolves `librdmacm1 (>= V)` through it. The alternative states the
# dependency in both names for every resolver (some mirror and image tools ignore versioned
# Provides) and for the reader of `apt show iser-guard`. The version bound is the one
# dpkg-shlibdeps computed from the symbols used; the library's soname did not change.
# libibverbs1 and libc6 were not renamed. Idempotent; Depends without a renamed library is
# left as it is. Called by scripts/build-deb.sh; tested by tests/packaging.rs.
set -euo pipefail
control=${1:?usage: deb-t64-alternatives.sh DEBIAN/control}

# old name -> new name, for every library of our Depends the transition renamed.
renamed=(librdmacm1:librdmacm1t64)

for pair in "${renamed[@]}"; do
	old=${pair%%:*} new=${pair#*:}
	# `old` with its version bound, as a whole Depends entry (after "Depends: " or ", ").
	sed -E -i "/^Depends:/ s/(: |, )$old( \\([^)]*\\))?(,|\$)/\\1$new\\2 | $old\\2\\3/" "$control"
done
