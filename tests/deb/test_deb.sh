#!/usr/bin/env bash
# The Debian package as an operator gets it (make deb: build/deb/holdfast_*.deb),
# unpacked with dpkg -x into a temp dir (never installed onto this machine), run from
# there against the broker at HOLDFAST_BOOTSTRAP with a topic prefix of its own:
#   lintian          lintian --pedantic: no error, no warning (infos allowed)
#   contents         binaries, man pages, /etc/holdfast files as conffiles, both units,
#                    the sysusers.d user; no librdkafka in Depends (linked static)
#   units-verify     systemd-analyze verify of both units (their binary paths pointed at
#                    the unpacked tree; systemd is not PID 1 here, so nothing starts):
#                    no complaint at all; the settings the package promises (user,
#                    Restart=on-failure, ProtectSystem=strict, NoNewPrivileges, state
#                    under /var/lib/holdfast); systemd-analyze security exposure <= 2.0
#   version          the unpacked holdfast, hfctl, hfbench --version: this checkout's git
#                    describe, librdkafka linked static; every shared library resolves
#   files-missing    from a directory with neither ./topics/topics.json nor an installed
#                    one, hfctl topics apply fails naming the file; holdfast run --stages
#                    gateway exits 2 naming the warehouses file
#   run-reserve      hfctl topics apply from an empty working directory takes the
#                    packaged topics.json (HOLDFAST_SYSCONFDIR: the unpacked etc/holdfast);
#                    holdfast-run@all's ExecStart, its Environment= and holdfast.env, run
#                    from the unpacked tree (state in the temp dir); stock fed, then one
#                    hfctl reserve answered HELD
#   http-reserve     holdfast-http's ExecStart the same way (plus --port 0: 8080 may be
#                    taken here), its packaged http.json: POST /v1/reservations 201 HELD
#   stop             SIGTERM stops both with exit 0 (what the units' stop expects)
#   sysusers         the package's sysusers.d file, applied by systemd-sysusers to a
#                    scratch root: a holdfast system user, no login, home /var/lib/holdfast
# About 30 s with make deb's build (make test-deb). Logs in a temp dir, printed (and kept) on failure.
#
# usage: bash tests/deb/test_deb.sh [DEB]   (make test-deb; default: the newest
#        build/deb/holdfast_*.deb; needs lintian, systemd-analyze, a broker)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
unset HOLDFAST_KAFKA_CONFIG HOLDFAST_KAFKA_OVERRIDES HOLDFAST_WEBHOOK_SECRETS HOLDFAST_STATE_DIR \
  HOLDFAST_SYSCONFDIR HOLDFAST_INSTANCE
prefix="hd$$-$(($(date +%s%3N) % 100000))."
work=$(mktemp -d /tmp/hf-deb.XXXXXX)
suite=deb
# shellcheck source=tests/http/lib.sh
source "$root/tests/http/lib.sh"
lib_traps

deb=${1:-}
if [ -z "$deb" ]; then
  for f in build/deb/holdfast_*.deb; do [ -e "$f" ] && { [ -z "$deb" ] || [ "$f" -nt "$deb" ]; } && deb=$f; done
fi
[ -f "$deb" ] || die "no package: run 'make deb' (or pass the .deb)"
changes=${deb%.deb}.changes
[ -f "$changes" ] || changes=$deb
for t in lintian systemd-analyze systemd-sysusers dpkg-deb curl; do command -v "$t" >/dev/null || die "$t is needed: bash tools/deps.sh deb"; done
(exec 3<>"/dev/tcp/${HOLDFAST_BOOTSTRAP%:*}/${HOLDFAST_BOOTSTRAP##*:}") 2>/dev/null ||
  die "no Kafka broker at $HOLDFAST_BOOTSTRAP ('make kafka-up')"
# absent PATTERN TEXT: TEXT has no line matching PATTERN.
absent() { ! grep -q -- "$1" <<<"$2"; }
pkg=$work/pkg
dpkg-deb -x "$deb" "$pkg" || die "dpkg -x $deb failed"
dpkg-deb -e "$deb" "$work/control" || die "dpkg -e $deb failed"
units=$pkg/lib/systemd/system
etc=$pkg/etc/holdfast
echo "$suite: $deb unpacked in $pkg, topic prefix $prefix"

# ---- lintian
begin lintian
lintian --pedantic --fail-on error,warning "$changes" >"$work/lintian.log" 2>&1
rc=$?
need "lintian exit $rc: $(grep -E '^[EW]:' "$work/lintian.log" | head -n 10)" is "$rc" 0
need "an error or warning: $(grep -E '^[EW]:' "$work/lintian.log" | head -n 5)" lacks -E '^[EW]:' "$work/lintian.log"
end

# ---- contents
begin contents
for f in usr/bin/holdfast usr/bin/hfctl usr/bin/hfbench; do
  need "$f missing or not executable" test -x "$pkg/$f"
done
for p in holdfast hfctl hfbench; do
  need "man page of $p missing" test -s "$pkg/usr/share/man/man1/$p.1.gz"
  # The page is the binary's own help: its subcommands' options are in it.
  need "man page of $p lacks its --help text" \
    grep -q -- 'print this help and exit' <(zcat "$pkg/usr/share/man/man1/$p.1.gz" | sed 's/\\-/-/g')
done
for f in topics.json warehouses.json run-all.json http.json holdfast.env; do
  need "etc/holdfast/$f missing" test -s "$etc/$f"
  need "/etc/holdfast/$f not a conffile" grep -qx "/etc/holdfast/$f" "$work/control/conffiles"
done
need "packaged topics.json differs from topics/topics.json" cmp -s "$etc/topics.json" topics/topics.json
need "packaged warehouses.json differs from config/warehouses.json" cmp -s "$etc/warehouses.json" config/warehouses.json
need "no holdfast user in sysusers.d" grep -q '^u holdfast ' "$pkg/usr/lib/sysusers.d/holdfast.conf"
need "holdfast-run@.service missing" test -s "$units/holdfast-run@.service"
need "holdfast-http.service missing" test -s "$units/holdfast-http.service"
# The ops kit travels with the package: the rules' runbook links and the scrape jobs.
need "the runbook (OPERATIONS.md) missing" test -s "$pkg/usr/share/doc/holdfast/OPERATIONS.md.gz"
for f in holdfast.rules.yml prometheus.example.yml blackbox.example.yml holdfast.json; do
  need "examples/$f missing" test -s "$pkg/usr/share/doc/holdfast/examples/$f"
done
# An upgrade restarts only the stage sets that run (an instance an operator stopped
# stays stopped); a removal stops them all.
need "the postinst does not try-restart the holdfast-run@ instances on upgrade" \
  grep -q "deb-systemd-invoke try-restart 'holdfast-run@\*.service'" "$work/control/postinst"
need "the postinst restarts stopped holdfast-run@ instances (restart, not try-restart)" \
  lacks -E 'deb-systemd-invoke (re)?start "' "$work/control/postinst"
for script in postinst prerm postrm; do
  need "the $script is not valid sh: $(sh -n "$work/control/$script" 2>&1)" sh -n "$work/control/$script"
done
need "the prerm does not stop the holdfast-run@ instances on removal" \
  grep -q "deb-systemd-invoke stop 'holdfast-run@\*.service'" "$work/control/prerm"
depends=$(dpkg-deb -f "$deb" Depends)
need "Depends names librdkafka (it is linked static): $depends" absent rdkafka "$depends"
need "Depends lacks the libraries (dh_shlibdeps): $depends" grep -q librocksdb <<<"$depends"
end

# ---- units-verify
# The units as installed, with /usr/bin/ pointed at the unpacked binaries (verify
# checks that ExecStart's program exists and is executable) and MANPATH at the
# unpacked pages (it checks Documentation=man:...). The template as instance "all".
begin units-verify
mkdir -p "$work/units"
sed "s#=/usr/bin/#=$pkg/usr/bin/#" "$units/holdfast-http.service" >"$work/units/holdfast-http.service"
sed "s#=/usr/bin/#=$pkg/usr/bin/#" "$units/holdfast-run@.service" >"$work/units/holdfast-run@all.service"
for u in holdfast-http.service holdfast-run@all.service; do
  MANPATH=$pkg/usr/share/man systemd-analyze verify "$work/units/$u" >"$work/verify-$u.log" 2>&1
  rc=$?
  need "systemd-analyze verify $u exit $rc: $(cat "$work/verify-$u.log")" is "$rc" 0
  need "systemd-analyze verify $u complains: $(head -n 5 "$work/verify-$u.log")" test ! -s "$work/verify-$u.log"
  for d in User=holdfast Restart=on-failure ProtectSystem=strict NoNewPrivileges=yes \
    StateDirectory=holdfast Environment=HOLDFAST_STATE_DIR=/var/lib/holdfast; do
    need "$u lacks $d" grep -qx "$d" "$work/units/$u"
  done
  systemd-analyze security --offline=true "$work/units/$u" >"$work/security-$u.log" 2>&1
  exposure=$(grep -o 'Overall exposure level for [^:]*: [0-9.]*' "$work/security-$u.log" | awk '{print $NF}')
  echo "        $u: systemd-analyze security exposure ${exposure:-?}"
  need "$u exposure '${exposure:-none}' is over 2.0" awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 2.0) }'
done
end

# ---- version
begin version
want=$(git describe --tags --always --dirty 2>/dev/null)
for p in holdfast hfctl hfbench; do
  out=$("$pkg/usr/bin/$p" --version 2>&1)
  rc=$?
  need "$p --version exit $rc" is "$rc" 0
  need "$p --version says '$(head -n 1 <<<"$out")', not $want (a package of another tree? make deb)" \
    grep -qE "^$p( \(holdfast\))? $want\$" <(head -n 1 <<<"$out")
  need "$p --version: librdkafka not linked static: $out" grep -q 'linked static' <<<"$out"
  libs=$(ldd "$pkg/usr/bin/$p" 2>&1)
  need "$p: a shared library does not resolve: $(grep 'not found' <<<"$libs")" absent 'not found' "$libs"
done
end

# ---- files-missing
begin files-missing
mkdir -p "$work/empty" "$work/nowhere"
out=$(cd "$work/empty" && HOLDFAST_TOPIC_PREFIX=$prefix HOLDFAST_SYSCONFDIR=$work/nowhere \
  "$pkg/usr/bin/hfctl" topics apply 2>&1)
rc=$?
need "hfctl topics apply with no topics file: exit $rc" test "$rc" != 0
need "hfctl topics apply with no topics file does not name it: $out" grep -q 'topics/topics.json' <<<"$out"
out=$(cd "$work/empty" && HOLDFAST_TOPIC_PREFIX=$prefix HOLDFAST_APP_ID=${prefix}app \
  HOLDFAST_SYSCONFDIR=$work/nowhere timeout 60 "$pkg/usr/bin/holdfast" run --stages gateway \
  --state-dir "$work/state-missing" 2>&1)
rc=$?
need "holdfast run --stages gateway with no warehouses file: exit $rc, not 2" is "$rc" 2
need "holdfast run with no warehouses file does not name it: $(tail -n 2 <<<"$out")" \
  grep -q 'config/warehouses.json' <<<"$out"
end

# ---- run-reserve
# holdfast-run@all as systemd would start it, from the unpacked tree: its ExecStart
# (specifiers %i and %H resolved, /usr/bin and /etc/holdfast pointed at the tree), its
# Environment= lines, then holdfast.env's (EnvironmentFile= comes after Environment=),
# then what this test must change: the topic prefix and app id of its own, the state
# dir in the temp dir.
host=$(hostname)
# unit_command UNIT INSTANCE: sets exec_start and env_args as systemd would for it.
unit_command() {
  local unit=$1 inst=$2 kv
  exec_start=$(sed -n 's/^ExecStart=//p' "$unit" |
    sed "s/%i/$inst/g; s/%H/$host/g; s#/usr/bin/#$pkg/usr/bin/#g; s#/etc/holdfast/#$etc/#g")
  env_args=()
  while IFS= read -r kv; do env_args+=("$(sed "s/%i/$inst/g; s/%H/$host/g" <<<"$kv")"); done \
    < <(sed -n 's/^Environment=//p' "$unit")
  while IFS= read -r kv; do env_args+=("$kv"); done < <(grep -E '^[A-Z_]+=' "$etc/holdfast.env")
  env_args+=("HOLDFAST_TOPIC_PREFIX=$prefix" "HOLDFAST_APP_ID=${prefix}app" "HOLDFAST_STATE_DIR=$work/state"
    "HOLDFAST_BOOTSTRAP=$HOLDFAST_BOOTSTRAP" "HOLDFAST_SYSCONFDIR=$etc")
  echo "        ${unit##*/} ExecStart: $exec_start"
}
# stop_and_wait PID: SIGTERM, then its exit status in $rc (124: still running after 30 s).
stop_and_wait() {
  kill -TERM "$1" 2>/dev/null
  rc=124
  for _ in $(seq 300); do
    kill -0 "$1" 2>/dev/null || { wait "$1"; rc=$?; return; }
    sleep 0.1
  done
}

begin run-reserve
unit_command "$units/holdfast-run@.service" all
# The packaged run-all.json serves metrics on 127.0.0.1:9464, as the examples' scrape
# job expects: another process on it would make this run fail for the wrong reason.
if (exec 3<>/dev/tcp/127.0.0.1/9464) 2>/dev/null; then
  die "port 9464 (the packaged run-all.json's metrics_port) is in use: stop what listens there"
fi
mkdir -p "$work/cwd"
ctl() { (cd "$work/cwd" && env "${env_args[@]}" "$pkg/usr/bin/hfctl" "$@"); }
ctl topics apply >"$work/topics.log" 2>&1
rc=$?
need "hfctl topics apply (packaged topics.json) exit $rc: $(tail -n 3 "$work/topics.log")" is "$rc" 0
need "hfctl topics apply did not create ${prefix}holdfast.requests" grep -q "${prefix}holdfast.requests" "$work/topics.log"
# shellcheck disable=SC2086 # ExecStart is a command line: split as systemd does (no quotes in it)
(cd "$work/cwd" && exec env "${env_args[@]}" $exec_start) >"$work/run.log" 2>&1 &
run_pid=$!
stop_pids+=("$run_pid")
ctl stock feed --warehouse US-NYC --sku SKU-DEB --kind RECEIVE --qty 10 --seq 1 >"$work/feed.log" 2>&1
rc=$?
need "hfctl stock feed exit $rc: $(tail -n 3 "$work/feed.log")" is "$rc" 0
# The routing view shows the stock once the counter and aggregator have run.
seen=
for _ in $(seq 120); do
  kill -0 "$run_pid" 2>/dev/null || break
  ctl availability --sku SKU-DEB >"$work/availability.json" 2>/dev/null &&
    grep -q 'US-NYC' "$work/availability.json" && seen=1 && break
  sleep 0.5
done
need "holdfast exited: $(tail -n 5 "$work/run.log")" kill -0 "$run_pid"
need "no availability for SKU-DEB within 60 s: $(cat "$work/availability.json" 2>/dev/null)" test -n "$seen"
ctl reserve --reservation r-deb-1 --key k-deb-1 --sku SKU-DEB --qty 2 >"$work/reserve.json" 2>"$work/reserve.log"
rc=$?
need "hfctl reserve exit $rc: $(cat "$work/reserve.json" "$work/reserve.log")" is "$rc" 0
need "reserve not HELD: $(cat "$work/reserve.json")" grep -q '"HELD"' "$work/reserve.json"
need "run.log does not show the packaged run-all.json's stages" \
  grep -q "running stages 'counter,aggregator,gateway' as instance $host-all" "$work/run.log"
curl -sf -o "$work/metrics.txt" http://127.0.0.1:9464/metrics
rc=$?
need "the packaged holdfast-run@all serves no /metrics on 127.0.0.1:9464 (curl exit $rc)" is "$rc" 0
need "its /metrics does not count the HELD reply (holdfast_replies_total)" \
  grep -Eq '^holdfast_replies_total\{.*request="reserve",outcome="held"\} [1-9]' "$work/metrics.txt"
end

# ---- http-reserve
begin http-reserve
unit_command "$units/holdfast-http.service" ""
# shellcheck disable=SC2086 # as above
(cd "$work/cwd" && exec env "${env_args[@]}" $exec_start --port 0) >"$work/http.log" 2>&1 &
http_pid=$!
stop_pids+=("$http_pid")
port=
for _ in $(seq 300); do
  port=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$work/http.log" | grep -o '[0-9]*$')
  [ -n "$port" ] && break
  kill -0 "$http_pid" 2>/dev/null || break
  sleep 0.1
done
need "holdfast http not listening: $(tail -n 3 "$work/http.log")" test -n "$port"
need "holdfast http not on the packaged http.json's 127.0.0.1 or not instance $host" \
  grep -q "listening on http://127.0.0.1:$port/ (instance $host," "$work/http.log"
ready=
for _ in $(seq 150); do
  [ -n "$port" ] || break
  ready=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")
  [ "$ready" = 200 ] && break
  sleep 0.2
done
need "/readyz $ready" is "$ready" 200
code=$(curl -s -o "$work/http-reserve.json" -w '%{http_code}' -X POST "http://127.0.0.1:$port/v1/reservations" \
  -H 'Idempotency-Key: k-deb-http' -d '{"reservation_id": "r-deb-http", "lines": [{"sku": "SKU-DEB", "qty": 1}]}')
need "POST /v1/reservations $code: $(cat "$work/http-reserve.json")" is "$code" 201
need "POST /v1/reservations not HELD: $(cat "$work/http-reserve.json")" grep -q '"HELD"' "$work/http-reserve.json"
end

# ---- stop
begin stop
stop_and_wait "$http_pid"
need "SIGTERM: holdfast http exit $rc, not 0: $(tail -n 3 "$work/http.log")" is "$rc" 0
stop_and_wait "$run_pid"
need "SIGTERM: holdfast run exit $rc, not 0: $(tail -n 3 "$work/run.log")" is "$rc" 0
end

# ---- sysusers
begin sysusers
mkdir -p "$work/sysroot/etc"
systemd-sysusers --root="$work/sysroot" "$pkg/usr/lib/sysusers.d/holdfast.conf" >"$work/sysusers.log" 2>&1
rc=$?
need "systemd-sysusers exit $rc: $(cat "$work/sysusers.log")" is "$rc" 0
entry=$(grep '^holdfast:' "$work/sysroot/etc/passwd" 2>/dev/null)
IFS=: read -r _ _ uid _ _ home shell <<<"$entry"
need "no holdfast user made: $(cat "$work/sysusers.log")" test -n "$entry"
need "holdfast uid '$uid' is not a system uid (< 1000)" test "${uid:-1000}" -lt 1000
need "holdfast home '$home', not /var/lib/holdfast" is "$home" /var/lib/holdfast
need "holdfast shell '$shell' allows a login" grep -q nologin <<<"$shell"
need "no holdfast group made" grep -q '^holdfast:' "$work/sysroot/etc/group"
end

echo "$suite: $checks checks, $failures failed"
[ "$failures" = 0 ]
