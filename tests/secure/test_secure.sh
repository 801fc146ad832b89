#!/usr/bin/env bash
# holdfast on a secured cluster: its own broker (tools/kafka/kafka-secure-up.sh; SASL_SSL
# on 19094, mutual TLS on 19096, controller on 19095, never the shared 9092) with SCRAM
# users, client certificates from a test CA, and ACLs. Principals: holdfast (every stage),
# checkout (a checkout service), wms (the stock feed), admin (the operator).
#   SCRAM-SHA-512 over TLS, the documented default:
#   - holdfast runs every stage; wms feeds; checkout reserves and commits (HELD, COMMITTED);
#   - checkout producing a Hold to holdfast.counter-commands, or a feed to
#     holdfast.stock-feed, gets "Topic authorization failed" and nothing reaches them;
#     checkout reading an internal topic (holdfast.ledger) is refused;
#   - a wrong password: hfctl and `holdfast run` stop within seconds, non-zero, saying the
#     login was refused and which properties to check.
#   Mutual TLS (a certificate CN=<principal>, mapped to User:<principal>):
#   - holdfast restarted with its certificate; wms feeds, checkout reserves and commits a
#     second reservation; checkout's certificate gets checkout's ACLs (a Hold to
#     holdfast.counter-commands is refused);
#   - a certificate CN=holdfast from a CA the broker does not trust is refused, saying
#     what to check.
#   And: a property holdfast controls in the client configuration stops the start by name.
# Starts and stops its own broker and processor; about 30 s. Keys and certificates live
# in .cache/kafka-secure/ (the broker's) and build/secure/ (this test's), never in git.
#
# usage: bash tests/secure/test_secure.sh   (make test-secure; needs build/holdfast, build/hfctl)
# shellcheck disable=SC2015 # ok() only echoes, so "check && ok ... || bad ..." is an if-else
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
sec=$root/.cache/kafka-secure
work=$root/build/secure
hfctl=${HFCTL_BIN:-build/hfctl}
holdfast=${HOLDFAST_BIN:-build/holdfast}
unset HOLDFAST_BOOTSTRAP HOLDFAST_TOPIC_PREFIX HOLDFAST_APP_ID HOLDFAST_KAFKA_CONFIG \
  HOLDFAST_KAFKA_OVERRIDES
failures=0
holdfast_pid=
ready_timeout_s=60

stop_holdfast() {
  if [ -n "$holdfast_pid" ] && kill -0 "$holdfast_pid" 2>/dev/null; then
    kill -TERM "$holdfast_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$holdfast_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$holdfast_pid" 2>/dev/null || true
  fi
  holdfast_pid=
}
cleanup() {
  stop_holdfast
  bash tools/kafka/kafka-secure-down.sh >/dev/null
}
trap cleanup EXIT

ok() { echo "  ok   $*"; }
bad() { echo "  FAIL $*"; failures=$((failures + 1)); }
die() { echo "secure: $*" >&2; exit 1; }
# bootstrap_of CONFIG: the listener a client configuration is for (mutual TLS when its
# security.protocol is SSL).
bootstrap_of() {
  if grep -q '^security.protocol=SSL$' "$1"; then cat "$sec/bootstrap-mtls"; else cat "$sec/bootstrap"; fi
}
# as WHO hfctl ARGS...: hfctl with client configuration WHO (a principal's file in
# .cache/kafka-secure, e.g. checkout or checkout-mtls, or a path); stdout+stderr in $out,
# exit code in $rc.
as() {
  local cfg=$1; shift
  [[ $cfg == */* ]] || cfg=$sec/$cfg.properties
  rc=0
  out=$(HOLDFAST_BOOTSTRAP=$(bootstrap_of "$cfg") HOLDFAST_KAFKA_CONFIG=$cfg \
    timeout 60 "$hfctl" "$@" 2>&1) || rc=$?
}
# start_holdfast CONFIG LOG: holdfast running every stage with client configuration
# CONFIG, in the background ($holdfast_pid), until every changelog partition of every
# stage is restored.
start_holdfast() {
  local cfg=$1 log=$2
  printf '{"kafka_config_file": "%s", "stages": "counter,aggregator,gateway"}\n' "$cfg" \
    >"$work/holdfast.json"
  HOLDFAST_BOOTSTRAP=$(bootstrap_of "$cfg") "$holdfast" run --config "$work/holdfast.json" \
    --state-dir "$work/state" >"$log" 2>&1 &
  holdfast_pid=$!
  local restored
  for _ in $(seq $((ready_timeout_s * 4))); do
    restored=$(grep -c 'partition [0-9]* restored' "$log" 2>/dev/null) || true # no log yet: ""
    [ "${restored:-0}" -ge "$restores" ] && return 0
    kill -0 "$holdfast_pid" 2>/dev/null || { tail -20 "$log"; die "holdfast exited (log $log)"; }
    sleep 0.25
  done
  tail -20 "$log"
  die "holdfast restored fewer than $restores partitions in ${ready_timeout_s}s (log $log)"
}

[ -x "$hfctl" ] && [ -x "$holdfast" ] || die "build $hfctl and $holdfast first (make)"
command -v openssl >/dev/null || die "needs openssl"
# One "partition N restored" line per changelog partition of each stage.
restores=$(python3 - "$root/topics/topics.json" <<'EOF'
import json, sys
changelogs = {"holdfast.counter-changelog", "holdfast.aggregator-changelog", "holdfast.gateway-changelog"}
print(sum(t["partitions"] for t in json.load(open(sys.argv[1]))["topics"] if t["name"] in changelogs))
EOF
)
bash tools/kafka/kafka-secure-down.sh >/dev/null # a fresh broker: new certificates and users
bash tools/kafka/kafka-secure-up.sh
rm -rf "$work" && mkdir -p "$work" && chmod 700 "$work"

echo "== SCRAM-SHA-512: topics (admin), holdfast (all stages, principal holdfast)"
as admin topics apply
[ "$rc" = 0 ] || { echo "$out"; die "topics apply as admin failed"; }
start_holdfast "$sec/holdfast.properties" "$work/holdfast.log"

echo "== SCRAM-SHA-512: stock (principal wms), reserve + commit (principal checkout)"
as wms stock feed --warehouse US-NYC --sku SKU-1 --kind RECEIVE --qty 1 --seq 1
[ "$rc" = 0 ] && ok "wms feeds holdfast.stock-feed" || bad "wms stock feed: $out"
for _ in $(seq 40); do
  as holdfast stock get --warehouse US-NYC --sku SKU-1
  grep -q '"available":1' <<<"$out" && break
  sleep 0.25
done
as checkout reserve --reservation r1 --key k1 --sku SKU-1 --qty 1
[ "$rc" = 0 ] && grep -q '"outcome":"HELD"' <<<"$out" && ok "checkout reserve r1: HELD" \
  || bad "checkout reserve: rc $rc: $out"
as checkout commit --reservation r1 --key c1 --payment p1
[ "$rc" = 0 ] && grep -q '"outcome":"COMMITTED"' <<<"$out" && ok "checkout commit r1: COMMITTED" \
  || bad "checkout commit: rc $rc: $out"

echo "== checkout is refused on internal topics"
as checkout send hold --reservation forged-1 --warehouse US-NYC --sku SKU-1 --qty 1
[ "$rc" != 0 ] && grep -q "Topic authorization failed" <<<"$out" \
  && ok "Hold to holdfast.counter-commands: Topic authorization failed" \
  || bad "checkout wrote holdfast.counter-commands? rc $rc: $out"
as checkout stock feed --warehouse US-NYC --sku SKU-1 --kind RECEIVE --qty 50 --seq 2
[ "$rc" != 0 ] && grep -q "Topic authorization failed" <<<"$out" \
  && ok "feed to holdfast.stock-feed: Topic authorization failed" \
  || bad "checkout wrote holdfast.stock-feed? rc $rc: $out"
as checkout tail holdfast.ledger
[ "$rc" != 0 ] && grep -q "Topic authorization failed" <<<"$out" \
  && ok "read of holdfast.ledger: Topic authorization failed" \
  || bad "checkout read holdfast.ledger? rc $rc: $out"

echo "== a wrong SCRAM password is refused, saying what to check"
sed 's/^sasl.password=.*/sasl.password=not-the-password/' "$sec/checkout.properties" >"$work/wrong.properties"
SECONDS=0
as "$work/wrong.properties" tail holdfast.replies
[ "$rc" != 0 ] && grep -q "hfctl tail: .*the broker refused this client's SASL login: .*check sasl.mechanisms, and sasl.username and sasl.password" <<<"$out" \
  && ok "hfctl: login refused, check sasl.username and sasl.password (${SECONDS}s)" \
  || bad "wrong password (hfctl): rc $rc: $out"
# The checkout client (hfctl reserve, hfbench) and the HTTP front meet the refusal on
# their own paths (the reply reader; the reply topic's admin request), not hfctl tail's.
SECONDS=0
as "$work/wrong.properties" reserve --reservation wrong-1 --key wrong-1 --sku SKU-1 --attempts 1 --timeout-ms 5000
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "refused this client's SASL login" <<<"$out" \
  && ok "hfctl reserve: login refused (${SECONDS}s)" \
  || bad "wrong password (hfctl reserve): rc $rc after ${SECONDS}s: $out"
rc=0
SECONDS=0
out=$(HOLDFAST_BOOTSTRAP=$(cat "$sec/bootstrap") HOLDFAST_KAFKA_CONFIG=$work/wrong.properties \
  timeout 30 "$holdfast" http --port 0 --instance wrong-http --state-dir "$work/state-wrong-http" 2>&1) || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "refused this client's SASL login" <<<"$out" \
  && ok "holdfast http: exit $rc in ${SECONDS}s, login refused" \
  || bad "wrong password (holdfast http): rc $rc after ${SECONDS}s: $(grep -v '"comp":"librdkafka"' <<<"$out" | tail -5)"
sed 's/^sasl.password=.*/sasl.password=not-the-password/' "$sec/holdfast.properties" >"$work/wrong-holdfast.properties"
printf '{"kafka_config_file": "%s", "stages": "counter,aggregator,gateway"}\n' \
  "$work/wrong-holdfast.properties" >"$work/wrong.json"
rc=0
SECONDS=0
out=$(HOLDFAST_BOOTSTRAP=$(cat "$sec/bootstrap") timeout 30 "$holdfast" run --config "$work/wrong.json" \
  --instance wrong --state-dir "$work/state-wrong" 2>&1) || rc=$?
# Under 30 s: before, the start waited out init_transactions' minute ("Timed out").
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "the broker refused this client's SASL login: in the client configuration $work/wrong-holdfast.properties, check" <<<"$out" \
  && ok "holdfast run: exit $rc in ${SECONDS}s, login refused, names the file to fix" \
  || bad "wrong password (holdfast run): rc $rc after ${SECONDS}s: $(grep -v '"comp":"librdkafka"' <<<"$out" | tail -5)"

echo "== mutual TLS: holdfast restarted with its certificate (CN=holdfast)"
stop_holdfast
start_holdfast "$sec/holdfast-mtls.properties" "$work/holdfast-mtls.log"
as wms-mtls stock feed --warehouse US-NYC --sku SKU-1 --kind RECEIVE --qty 1 --seq 2
[ "$rc" = 0 ] && ok "wms (certificate) feeds holdfast.stock-feed" || bad "wms-mtls stock feed: $out"
for _ in $(seq 40); do
  as holdfast-mtls stock get --warehouse US-NYC --sku SKU-1
  grep -q '"available":1' <<<"$out" && break
  sleep 0.25
done
grep -q '"available":1' <<<"$out" && ok "holdfast (certificate) reads its changelog: 1 available" \
  || bad "stock over mutual TLS: rc $rc: $out"
as checkout-mtls reserve --reservation r2 --key k2 --sku SKU-1 --qty 1
[ "$rc" = 0 ] && grep -q '"outcome":"HELD"' <<<"$out" && ok "checkout (certificate) reserve r2: HELD" \
  || bad "checkout-mtls reserve: rc $rc: $out"
as checkout-mtls commit --reservation r2 --key c2 --payment p2
[ "$rc" = 0 ] && grep -q '"outcome":"COMMITTED"' <<<"$out" \
  && ok "checkout (certificate) commit r2: COMMITTED" || bad "checkout-mtls commit: rc $rc: $out"
as checkout-mtls send hold --reservation forged-2 --warehouse US-NYC --sku SKU-1 --qty 1
[ "$rc" != 0 ] && grep -q "Topic authorization failed" <<<"$out" \
  && ok "checkout (certificate) Hold to holdfast.counter-commands: Topic authorization failed" \
  || bad "checkout-mtls wrote holdfast.counter-commands? rc $rc: $out"

echo "== a certificate from an unknown CA is refused"
# The same subject as holdfast's own certificate, signed by a CA the broker never saw.
rogue=$work/rogue
mkdir -p "$rogue"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=rogue-ca" \
  -keyout "$rogue/ca.key" -out "$rogue/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/O=holdfast-secure-test/CN=holdfast" \
  -keyout "$rogue/holdfast.key" -out "$rogue/holdfast.csr" 2>/dev/null
openssl x509 -req -in "$rogue/holdfast.csr" -CA "$rogue/ca.crt" -CAkey "$rogue/ca.key" \
  -CAcreateserial -days 1 -out "$rogue/holdfast.crt" 2>/dev/null
sed -e "s|^ssl.certificate.location=.*|ssl.certificate.location=$rogue/holdfast.crt|" \
  -e "s|^ssl.key.location=.*|ssl.key.location=$rogue/holdfast.key|" \
  "$sec/holdfast-mtls.properties" >"$rogue/holdfast.properties"
SECONDS=0
as "$rogue/holdfast.properties" stock get --warehouse US-NYC --sku SKU-1
[ "$rc" != 0 ] && grep -q "the broker refused this client's TLS handshake: .*check that ssl.certificate.location and ssl.key.location" <<<"$out" \
  && ! grep -q '"available"' <<<"$out" \
  && ok "CN=holdfast from another CA: TLS handshake refused, check the certificate (${SECONDS}s)" \
  || bad "rogue certificate: rc $rc: $out"

echo "== what reached the topics (admin)"
as admin tail holdfast.counter-commands
if [ "$rc" = 0 ] && grep -q '"reservation_id":"r1"' <<<"$out" && grep -q '"reservation_id":"r2"' <<<"$out" \
  && ! grep -q forged- <<<"$out"; then
  ok "holdfast.counter-commands holds r1's and r2's commands and nothing forged"
else
  bad "holdfast.counter-commands (rc $rc): $out"
fi
as admin tail holdfast.stock-feed
[ "$rc" = 0 ] && [ "$(grep -c '"type":"StockFeed"' <<<"$out")" = 2 ] \
  && ok "holdfast.stock-feed holds only wms's two feeds" || bad "holdfast.stock-feed (rc $rc): $out"
as holdfast stock get --warehouse US-NYC --sku SKU-1
grep -q '"available":0' <<<"$out" && grep -q '"on_hand":0' <<<"$out" \
  && ok "both units sold, nothing else arrived" || bad "stock after the sales: $out"

echo "== a property holdfast controls stops the start"
printf 'isolation.level=read_uncommitted\n' >>"$work/wrong.properties"
rc=0
out=$(HOLDFAST_BOOTSTRAP=$(cat "$sec/bootstrap") HOLDFAST_KAFKA_CONFIG=$work/wrong.properties \
  timeout 30 "$holdfast" run --state-dir "$work/state2" 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q "'isolation.level' is set by holdfast" <<<"$out" \
  && ok "isolation.level refused at start, by name" || bad "reserved property: rc $rc: $out"

kill -0 "$holdfast_pid" 2>/dev/null && ok "holdfast still running" || bad "holdfast exited (see $work/holdfast-mtls.log)"
for log in "$work/holdfast.log" "$work/holdfast-mtls.log"; do
  if grep -q '"level":"error"' "$log"; then
    bad "holdfast logged errors ($log):"; grep '"level":"error"' "$log" | head -5
  fi
done
[ "$failures" = 0 ] && echo "secure: all checks passed" || echo "secure: $failures check(s) failed (logs in $work)"
[ "$failures" = 0 ]
