#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# tools/pkgconfig-path.sh PCDIR: run by `meson setup` (meson.build) with
# the directory `meson install` puts foliofs-policy.pc in.  When
# pkg-config does not look there by itself (a prefix other than /usr or
# /usr/local), say how to make `pkg-config --cflags foliofs-policy` find
# it, for building a policy out of the tree (doc/policies.md).  Prints
# nothing otherwise; never fails.
pcdir=$1
[ -n "$pcdir" ] || exit 0
# pkg-config's own directories, then those PKG_CONFIG_PATH adds now.
path=$(pkg-config --variable pc_path pkg-config 2>/dev/null)
IFS=:
for d in $PKG_CONFIG_PATH $path; do
	[ "$d" = "$pcdir" ] && exit 0
done
echo "foliofs: pkg-config does not look in $pcdir, where meson install puts foliofs-policy.pc;"
echo "foliofs: to build a policy against the installed header (doc/policies.md):"
echo "    export PKG_CONFIG_PATH=$pcdir\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
exit 0
