#!/usr/bin/env bash
# Installs the Debian packages holdfast needs to build, test, lint, fuzz and run its local
# Kafka broker. Each machine (a developer's, CI's) starts from stock Debian 12, so the
# project installs its own tools. A machine that already has everything makes no apt call.
#
# usage: tools/deps.sh [GROUP...]   groups: build clang lint kafka python plot http ops deb
#        (default: all but deb, which only `make deb` and `make test-deb` need)
set -euo pipefail

declare -A why=(
  [build]="compile and unit-test the processor; npm and -dev packages to build librdkafka (tools/librdkafka.sh)"
  [clang]="libFuzzer harnesses and sanitizer builds"
  [lint]="make format-check and make lint (valgrind: the callgrind client header bench_gateway_cpu.c includes, and make bench-gateway-cpu)"
  [kafka]="run the local Kafka broker from Maven Central jars"
  [python]="test and tooling scripts; python3-venv: the pinned Schemathesis of make test-http-contract"
  [plot]="PNG plots of hfbench reports (tools/plot-report.sh)"
  [http]="the HTTP front's curl-level tests (make test-http: curl, openssl) and load runs (make bench-http: wrk)"
  [ops]="make test-ops: a real Prometheus (2.42, with promtool) and blackbox exporter load ops/prometheus/ rules (their services are not started: the test runs its own)"
  [deb]="the Debian package (make deb: dpkg-buildpackage, debhelper, lintian; make test-deb: systemd-analyze verify)"
)
declare -A pkgs=(
  [build]="build-essential pkg-config librocksdb-dev libavro-dev libjansson-dev libcmocka-dev libmicrohttpd-dev libgnutls28-dev libssl-dev libcurl4-openssl-dev libzstd-dev zlib1g-dev npm"
  [clang]="clang-14 libclang-rt-14-dev"
  [lint]="clang-format-14 clang-tidy-14 cppcheck valgrind"
  [kafka]="openjdk-17-jre-headless maven"
  [python]="python3 python3-yaml python3-venv"
  [plot]="gnuplot-nox"
  [http]="wrk curl openssl"
  [ops]="prometheus prometheus-blackbox-exporter"
  [deb]="dpkg-dev debhelper fakeroot lintian systemd"
)

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(build clang lint kafka python plot http ops)

# A package needed only for its command is present when that command is: a machine whose
# Node.js came from elsewhere (NodeSource's nodejs bundles npm and conflicts with
# Debian's npm package) has npm without the Debian package.
declare -A by_command=([npm]=npm)

installed() {
  if [ -n "${by_command[$1]:-}" ] && command -v "${by_command[$1]}" >/dev/null; then return 0; fi
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=()
for g in "${groups[@]}"; do
  [ -n "${pkgs[$g]:-}" ] || { echo "deps: unknown group '$g'" >&2; exit 2; }
  for p in ${pkgs[$g]}; do
    if ! installed "$p"; then
      echo "deps: will install $p (${why[$g]})"
      missing+=("$p")
    fi
  done
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all present (${groups[*]})"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: not root and no sudo; install as root: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
# Stock images ship without package lists; update once, only now that we need them.
if ! "${sudo[@]}" apt-get update -q; then
  echo "deps: apt-get update failed" >&2; exit 1
fi
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  echo "deps: apt-get install failed for: ${missing[*]}" >&2; exit 1
fi
echo "deps: installed ${missing[*]}"
