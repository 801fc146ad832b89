#!/usr/bin/env bash
# Builds the librdkafka holdfast links, or says to use the system's. Debian 12's
# librdkafka (2.0.2) is too old to trust, so unless pkg-config finds a librdkafka >= 2.12
# outside this checkout, the pinned release is built from a registry's source package:
# npm's @confluentinc/kafka-javascript 1.7.0 carries librdkafka 2.12.1 unmodified in
# package/deps/librdkafka (its files are byte for byte those of the Rust crate
# rdkafka-sys 4.10.0+2.12.1). npm fetches it (Debian 12's npm knows its registry; no host
# is named here), its sha256 is checked, and it is built into .cache/librdkafka/VERSION,
# where the Makefile's pkg-config finds it and links it statically (rdkafka-static.pc).
# A stamp with the pins and configure flags makes a second run a no-op.
#
# usage: tools/librdkafka.sh            ensure it: nothing to do, or fetch + build (~1 min)
#        tools/librdkafka.sh --pc-dir   print the pkg-config directory of the project's
#                                       build when it is the one to use; nothing when the
#                                       system's is
# HOLDFAST_RDKAFKA=auto (default) | own | system forces the choice (system: whatever
# pkg-config finds, even older than 2.12, e.g. Debian's 2.0.2 for an A/B benchmark).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=librdkafka

version=2.12.1
min_system=2.12
npm_spec=@confluentinc/kafka-javascript@1.7.0
npm_file=confluentinc-kafka-javascript-1.7.0.tgz
sha256=aad94f601f7457b99cc76ffcc123250f6fa92d7c2166dc65216a648a04590ca4
# No GSSAPI (Kerberos: another library and nothing holdfast uses); SSL, SASL SCRAM and
# OAUTHBEARER (OpenSSL), zstd and zlib from Debian's -dev packages; lz4 from the copy
# librdkafka carries, so the result does not depend on whether liblz4-dev is installed.
configure_flags=(--disable-gssapi --disable-lz4-ext --enable-ssl --enable-zstd --enable-zlib --enable-curl)
features_needed="gzip snappy ssl sasl_plain sasl_scram sasl_oauthbearer zstd lz4 oidc"

top=$root/.cache/librdkafka
prefix=$top/$version
stamp_want="$version $npm_spec sha256:$sha256 ${configure_flags[*]}"

die() { echo "$me: $*" >&2; exit 1; }

# pkg-config as it is without this checkout's build on its path.
system_pkg_config() {
  local path="" d
  local IFS=:
  for d in ${PKG_CONFIG_PATH:-}; do
    case $d in "$top"/*) ;; *) path=${path:+$path:}$d ;; esac
  done
  PKG_CONFIG_PATH=$path pkg-config "$@"
}

# own | system: which librdkafka the build is to use.
choice() {
  case ${HOLDFAST_RDKAFKA:-auto} in
    own | system) echo "$HOLDFAST_RDKAFKA" ;;
    auto)
      if command -v pkg-config >/dev/null && system_pkg_config --atleast-version="$min_system" rdkafka 2>/dev/null; then
        echo system
      else
        echo own
      fi
      ;;
    *) die "HOLDFAST_RDKAFKA is '$HOLDFAST_RDKAFKA': auto, own or system" ;;
  esac
}

if [ "${1:-}" = --pc-dir ]; then
  [ "$(choice)" = system ] || echo "$prefix/lib/pkgconfig"
  exit 0
fi
[ $# -eq 0 ] || die "usage: tools/librdkafka.sh [--pc-dir]"

if [ "$(choice)" = system ]; then
  system_pkg_config --exists rdkafka 2>/dev/null ||
    die "HOLDFAST_RDKAFKA=system but pkg-config finds no rdkafka (apt-get install librdkafka-dev)"
  exit 0
fi
[ "$(cat "$prefix/.stamp" 2>/dev/null)" = "$stamp_want" ] && exit 0

# One build at a time: several makes (or checkouts' CI runs) may ask at once.
mkdir -p "$top"
exec 9>"$top/.lock"
flock 9
[ "$(cat "$prefix/.stamp" 2>/dev/null)" = "$stamp_want" ] && exit 0

# The build's tools and libraries come from tools/deps.sh's build group (no apt call
# when they are all there).
build_deps_present() {
  local t pc
  for t in npm cc make pkg-config; do command -v "$t" >/dev/null || return 1; done
  for pc in libssl libcrypto libzstd zlib libcurl; do pkg-config --exists "$pc" || return 1; done
}
if ! build_deps_present; then
  bash "$root/tools/deps.sh" build || die "could not install the build's Debian packages"
  build_deps_present || die "npm, a compiler or a -dev package still missing after tools/deps.sh build"
fi

tarball=$top/$npm_file
have_sha() { [ -f "$tarball" ] && [ "$(sha256sum "$tarball" | cut -d' ' -f1)" = "$sha256" ]; }
if ! have_sha; then
  echo "$me: fetching $npm_spec (librdkafka $version source) with npm"
  tmp=$(mktemp -d "$top/npm.XXXXXX")
  (cd "$tmp" && npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false \
    npm pack --silent "$npm_spec" >/dev/null) || { rm -rf "$tmp"; die "npm pack $npm_spec failed"; }
  [ -f "$tmp/$npm_file" ] || { ls "$tmp" >&2; rm -rf "$tmp"; die "npm pack wrote no $npm_file"; }
  mv "$tmp/$npm_file" "$tarball.part"
  rm -rf "$tmp"
  got=$(sha256sum "$tarball.part" | cut -d' ' -f1)
  if [ "$got" != "$sha256" ]; then
    rm -f "$tarball.part"
    die "$npm_file has sha256 $got, pinned $sha256: refusing it"
  fi
  mv "$tarball.part" "$tarball"
fi

src=$top/build-$version
log=$top/build-$version.log
echo "$me: building librdkafka $version into ${prefix#"$root"/} (log: ${log#"$root"/})"
t0=$(date +%s)
rm -rf "$src" "$prefix"
mkdir -p "$src"
tar -xzf "$tarball" -C "$src" --strip-components=3 package/deps/librdkafka
grep -q "RD_KAFKA_VERSION *0x$(printf '%02x%02x%02x' ${version//./ })ff" "$src/src/rdkafka.h" ||
  die "$npm_file does not carry librdkafka $version (src/rdkafka.h)"
fail() { tail -n 30 "$log" >&2; die "$1 failed (full log: $log)"; }
(cd "$src" && ./configure --prefix="$prefix" "${configure_flags[@]}") >"$log" 2>&1 || fail configure
# Only the C library (src/); holdfast uses no C++.
make -C "$src/src" -j"$(nproc)" lib >>"$log" 2>&1 || fail "make lib"
make -C "$src/src" install >>"$log" 2>&1 || fail "make install"
# Static only: with no shared object beside it nothing can link or load it by accident,
# and the binaries need no rpath.
rm -f "$prefix"/lib/librdkafka.so* "$prefix"/lib/librdkafka-static.a

# What was built must be what was pinned, with the features holdfast relies on.
check=$src/check
printf '%s\n' '#include <stdio.h>' '#include <librdkafka/rdkafka.h>' \
  'int main(void) {' '    char f[512]; size_t n = sizeof f;' \
  '    rd_kafka_conf_t *conf = rd_kafka_conf_new();' \
  '    if (rd_kafka_conf_get(conf, "builtin.features", f, &n) != RD_KAFKA_CONF_OK) return 1;' \
  '    printf("%s %s\n", rd_kafka_version_str(), f);' \
  '    rd_kafka_conf_destroy(conf);' '    return 0;' '}' >"$check.c"
# shellcheck disable=SC2046 # pkg-config's words are meant to split
cc -o "$check" "$check.c" $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs rdkafka-static) >>"$log" 2>&1 ||
  fail "linking a test program"
read -r got_version features < <("$check") || die "the test program failed to run"
[ "$got_version" = "$version" ] || die "built librdkafka reports $got_version, not $version"
for f in $features_needed; do
  [[ ,$features, == *,$f,* ]] || die "built librdkafka lacks feature $f (has $features)"
done

echo "$stamp_want" >"$prefix/.stamp"
rm -rf "$src"
echo "$me: librdkafka $version built in $(($(date +%s) - t0)) s ($features)"
