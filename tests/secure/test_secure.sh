#!/usr/bin/env bash
# holdfast on a secured cluster: its own broker with SASL over TLS and ACLs
# (tools/kafka/kafka-secure-up.sh, ports 19094/19095, never the shared 9092), holdfast
# running every stage as principal `holdfast`, and a checkout service as `checkout`:
#   - checkout reserves and commits and reads both replies (HELD, COMMITTED);
#   - checkout producing a Hold to holdfast.counter-commands, or a feed to
#     holdfast.stock-feed, gets "Topic authorization failed" and nothing reaches them;
#   - checkout reading an internal topic (holdfast.ledger) is refused;
#   - a wrong password is refused by the broker;
#   - a property holdfast controls in the client configuration stops the start by name.
# Starts and stops its own broker and processor; about a minute.
#
# usage: bash tests/secure/test_secure.sh   (make test-secure; needs build/holdfast, build/hfctl)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
sec=$root/.cache/kafka-secure
work=$root/build/secure
hfctl=${HFCTL_BIN:-build/hfctl}
holdfast=${HOLDFAST_BIN:-build/holdfast}
port=${HOLDFAST_SECURE_PORT:-19094}
export HOLDFAST_BOOTSTRAP=127.0.0.1:$port
unset HOLDFAST_TOPIC_PREFIX HOLDFAST_APP_ID HOLDFAST_KAFKA_CONFIG HOLDFAST_KAFKA_OVERRIDES
failures=0
holdfast_pid=

cleanup() {
  if [ -n "$holdfast_pid" ] && kill -0 "$holdfast_pid" 2>/dev/null; then
    kill -TERM "$holdfast_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$holdfast_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$holdfast_pid" 2>/dev/null || true
  fi
  bash tools/kafka/kafka-secure-down.sh >/dev/null
}
trap cleanup EXIT

ok() { echo "  ok   $*"; }
bad() { echo "  FAIL $*"; failures=$((failures + 1)); }
# as PRINCIPAL hfctl ARGS...: stdout+stderr in $out, exit code in $rc
as() {
  local who=$1; shift
  rc=0
  out=$(HOLDFAST_KAFKA_CONFIG=$sec/$who.properties timeout 60 "$hfctl" "$@" 2>&1) || rc=$?
}

[ -x "$hfctl" ] && [ -x "$holdfast" ] || { echo "build $hfctl and $holdfast first (make)" >&2; exit 1; }
bash tools/kafka/kafka-secure-down.sh >/dev/null # a fresh broker: new certificates and users
bash tools/kafka/kafka-secure-up.sh
rm -rf "$work" && mkdir -p "$work"

echo "== topics (admin), holdfast (all stages, principal holdfast)"
as admin topics apply
[ "$rc" = 0 ] || { echo "$out"; echo "topics apply as admin failed" >&2; exit 1; }
printf '{"kafka_config_file": "%s", "stages": "counter,aggregator,gateway"}\n' \
  "$sec/holdfast.properties" >"$work/holdfast.json"
"$holdfast" run --config "$work/holdfast.json" --state-dir "$work/state" >"$work/holdfast.log" 2>&1 &
holdfast_pid=$!
for _ in $(seq 240); do
  [ "$(grep -c 'partition [0-9]* restored' "$work/holdfast.log" || true)" -ge 24 ] && break
  kill -0 "$holdfast_pid" 2>/dev/null || { tail -20 "$work/holdfast.log"; echo "holdfast exited" >&2; exit 1; }
  sleep 0.25
done

echo "== stock (principal wms), reserve + commit (principal checkout)"
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
as admin tail holdfast.counter-commands
if [ "$rc" = 0 ] && grep -q '"reservation_id":"r1"' <<<"$out" && ! grep -q forged-1 <<<"$out"; then
  ok "holdfast.counter-commands holds r1's commands and no forged-1"
else
  bad "holdfast.counter-commands (rc $rc): $out"
fi
as admin tail holdfast.stock-feed
[ "$rc" = 0 ] && [ "$(grep -c '"type":"StockFeed"' <<<"$out")" = 1 ] \
  && ok "holdfast.stock-feed holds only wms's feed" || bad "holdfast.stock-feed (rc $rc): $out"
as holdfast stock get --warehouse US-NYC --sku SKU-1
grep -q '"available":0' <<<"$out" && grep -q '"on_hand":0' <<<"$out" \
  && ok "the one unit is sold, nothing else arrived" || bad "stock after the sale: $out"

echo "== a wrong password is refused"
sed 's/^sasl.password=.*/sasl.password=not-the-password/' "$sec/checkout.properties" >"$work/wrong.properties"
rc=0
out=$(HOLDFAST_KAFKA_CONFIG=$work/wrong.properties timeout 60 "$hfctl" tail holdfast.replies 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q "Authentication failed" <<<"$out" \
  && ok "wrong password: SASL authentication failed" || bad "wrong password accepted? rc $rc: $out"

echo "== a property holdfast controls stops the start"
printf 'isolation.level=read_uncommitted\n' >>"$work/wrong.properties"
rc=0
out=$(HOLDFAST_KAFKA_CONFIG=$work/wrong.properties timeout 30 "$holdfast" run --state-dir "$work/state2" 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q "'isolation.level' is set by holdfast" <<<"$out" \
  && ok "isolation.level refused at start, by name" || bad "reserved property: rc $rc: $out"

kill -0 "$holdfast_pid" 2>/dev/null && ok "holdfast still running" || bad "holdfast exited (see $work/holdfast.log)"
if grep -q '"level":"error"' "$work/holdfast.log"; then
  bad "holdfast logged errors:"; grep '"level":"error"' "$work/holdfast.log" | head -5
fi
[ "$failures" = 0 ] && echo "secure: all checks passed" || echo "secure: $failures check(s) failed (logs in $work)"
[ "$failures" = 0 ]
