#!/usr/bin/env bash
# Builds the holdfast Debian package (debian/) into build/deb/ and checks it with
# lintian. dpkg-buildpackage writes its results next to the tree it builds, so the
# build runs on a copy of this checkout's files (tracked and untracked, not ignored)
# under build/deb/, never writing beside the checkout. The version comes from
# `git describe`: a tag vX.Y.Z[-N-gHASH] gives X.Y.Z[+gitN.HASH], an untagged commit
# 0.0.0+git<commit date>.<hash>; a dirty tree adds .dirty. The binaries' --version
# prints the git describe itself (HF_VERSION).
#
# usage: tools/deb.sh   (make deb)   prints the .deb's path last; exit 1 on any failure,
#        lintian's errors and warnings included (HOLDFAST_DEB_LINTIAN=0: no lintian)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=$root/build/deb
me=deb

die() { echo "$me: $*" >&2; exit 1; }

describe=$(git describe --tags --always --dirty 2>/dev/null) || die "not a git checkout: git describe failed"
case $describe in
  v[0-9]* | [0-9]*.[0-9]*)
    version=${describe#v}
    version=${version%-dirty}
    version=$(sed -E 's/-([0-9]+)-g([0-9a-f]+)$/+git\1.\2/' <<<"$version")
    ;;
  *)
    hash=$(git rev-parse --short HEAD)
    version=0.0.0+git$(git log -1 --format=%cd --date=format:%Y%m%d).$hash
    ;;
esac
[ "${describe%-dirty}" = "$describe" ] || version=$version.dirty
[[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "version '$version' (from '$describe') is not a native Debian version"

# The copy: what `git ls-files` sees, less .cache (a symlink to the real one instead:
# librdkafka is built there once, tools/librdkafka.sh) and files deleted but not staged.
src=$out/holdfast-$version
rm -rf "$out"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    [ "$f" != .cache ] && [ -e "$f" ] && printf '%s\0' "$f"
  done | tar --null -T - -cf - | tar -xf - -C "$src"
[ -e .cache ] && ln -s "$(readlink -f .cache)" "$src/.cache"
# The entry's version and date: this commit's (dpkg-buildpackage derives
# SOURCE_DATE_EPOCH from the date, so the package's file times and man pages are the
# commit's and a rebuild of it is the same).
when=$(date -u -R -d "@$(git log -1 --format=%ct)")
sed -i -e "1s/^holdfast ([^)]*)/holdfast ($version)/" \
  -e "0,/^ -- /s/^\( -- .*>  \).*/\1$when/" "$src/debian/changelog"

echo "$me: building holdfast $version in $src"
(cd "$src" && env -u PKG_CONFIG_PATH -u MAKEFLAGS -u MFLAGS -u MAKELEVEL HF_VERSION="$describe" dpkg-buildpackage -b -us -uc -j"$(nproc)") >"$out/build.log" 2>&1 ||
  { tail -n 40 "$out/build.log" >&2; die "dpkg-buildpackage failed: $out/build.log"; }
deb=$(ls "$out"/holdfast_"$version"_*.deb)
changes=$(ls "$out"/holdfast_"$version"_*.changes)

# --fail-on warning: any error or warning fails; overrides (debian/*.lintian-overrides)
# say why each is one. HOLDFAST_DEB_LINTIAN=0 leaves it to the caller (make test-deb
# runs it as one of its checks).
if [ "${HOLDFAST_DEB_LINTIAN:-1}" = 0 ]; then
  echo "$deb"
  exit 0
fi
echo "$me: lintian $changes"
lintian --pedantic --display-info --fail-on error,warning "$changes" | tee "$out/lintian.log" ||
  die "lintian failed (above; $out/lintian.log)"
echo "$me: lintian clean"
echo "$deb"
