#!/usr/bin/env bash
# API keys and rate limits of `holdfast http` (processor/http/api_keys.c,
# api_auth.c; docs/HTTP.md, API keys) driven with curl against the real pipeline
# on the shared broker, as tests/http/test_http.sh does (a topic prefix and app id
# of this run's own, a front on a port the kernel picks, keys made with
# tools/api-key.sh). Each check is one behaviour a caller or an operator relies on:
#   no-key            no Authorization, a garbled one, an unknown secret: 401 +
#                     WWW-Authenticate: Bearer, on every checkout route; the webhook
#                     and the ops routes need no key
#   scope             a read key reserving, committing, releasing: 403; reading: 200
#   reserve           a reserve key: 201 HELD; GET shows its id (api_key_id); another
#                     key with the release scope releases it (no ownership check)
#   revoke            a key removed from the file is refused (401) after SIGHUP; a bad
#                     file on SIGHUP keeps the keys in use and logs the line; so does a
#                     file caught half written (no final newline)
#   rate-limit        a key over its rate (1/s, burst 2; five reserves at once): 201 201,
#                     then 429 + Retry-After >= 1, while another key is unaffected; a
#                     token back after a second
#   metrics           holdfast_http_{unauthorized,forbidden,rate_limited}_total count
#                     the refusals; holdfast_http_api_keys the keys in use
#   nothing-sent      holdfast.requests holds no record of any refused request (every
#                     one, 401, 403 and 429, has a refused-* id), and exactly one of each
#                     allowed one (the rate-limited key's too); the Reserve and the ledger's HELD
#                     event name the key that reserved (api_key_id), and so does the
#                     RELEASED event of a reservation another key released
#   reconcile         hfctl reconcile --quiescent 1 PASS (one api_key_id on every ledger
#                     event of a reservation, among the rest)
# About 30 s. Logs under a temp dir, printed (and kept) on failure.
#
# usage: bash tests/http/test_auth.sh   (make test-http-auth; needs build/holdfast,
#        build/hfctl, build/hfbench, a broker at HOLDFAST_BOOTSTRAP, curl, openssl, python3)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
HOLDFAST=${HOLDFAST_BIN:-build/holdfast}
HFCTL=${HFCTL_BIN:-build/hfctl}
HFBENCH=${HFBENCH_BIN:-build/hfbench}
export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
unset HOLDFAST_KAFKA_CONFIG HOLDFAST_KAFKA_OVERRIDES HOLDFAST_WEBHOOK_SECRETS HOLDFAST_STATE_DIR
prefix="ha$$-$(($(date +%s%3N) % 100000))."
export HOLDFAST_TOPIC_PREFIX=$prefix HOLDFAST_APP_ID=${prefix}app
work=$(mktemp -d /tmp/hf-auth.XXXXXX)
secret=whsec_test_$(openssl rand -hex 16)
run_pid= f1_pid=
suite=auth
webhook_secrets=$secret
# shellcheck source=tests/http/lib.sh
source "$root/tests/http/lib.sh"
lib_traps

# ---- HTTP and JSON helpers (lib.sh has the shared ones)

# http METHOD PATH [CURL ARGS...] against the front: $code, $body, $hdrs (no CRs).
http() {
  local method=$1 path=$2 out
  shift 2
  : >"$work/hdrs"
  out=$(curl -s -X "$method" -o "$work/body" -D "$work/hdrs" -w '%{http_code}' \
    --max-time 15 "$@" "http://127.0.0.1:$port$path")
  code=$out
  body=$(cat "$work/body" 2>/dev/null)
  hdrs=$(tr -d '\r' <"$work/hdrs")
}
header() { sed -n "s/^$1: *//ip" <<<"$hdrs" | head -n 1; } # header NAME: its value in $hdrs
bearer() { printf 'Authorization: Bearer %s' "$1"; }
# reserve_as SECRET RID: POST /v1/reservations with that key ("": none).
reserve_as() {
  local auth=()
  [ -n "$1" ] && auth=(-H "$(bearer "$1")")
  http POST /v1/reservations "${auth[@]}" -H "Idempotency-Key: k-$2" \
    -d "{\"reservation_id\":\"$2\",\"lines\":[{\"sku\":\"SKU-00001\",\"qty\":1}]}"
}
metric() { # NAME: the value of an unlabelled metric
  http GET /metrics
  awk -v n="$1" '$1 == n { print $2 }' <<<"$body"
}
tail_topic() { # NAME: the committed records of <prefix>NAME into $work/NAME.jsonl
  timeout 60 "$HFCTL" tail "${prefix}$1" >"$work/$1.jsonl" 2>"$work/tail.err" ||
    die "hfctl tail ${prefix}$1: $(cat "$work/tail.err")"
}
# records_like FILE PY_EXPR: how many records' values (v) satisfy the expression.
records_like() {
  python3 - "$work/$1" "$2" <<'EOF'
import json, sys
n = 0
for line in open(sys.argv[1]):
    v = json.loads(line)["value"]
    n += bool(eval(sys.argv[2], {"v": v}))
print(n)
EOF
}
# new_key ID SCOPES [RATE [BURST]]: a keys-file line into $work/keys.d/ID, the secret echoed.
new_key() {
  mkdir -p "$work/keys.d"
  bash tools/api-key.sh "$@" >"$work/keys.d/$1" 2>"$work/keys.d/$1.secret" || die "tools/api-key.sh $*"
  sed 's/.*: //' "$work/keys.d/$1.secret"
}
# write_keys ID...: the keys file with those keys' lines.
write_keys() {
  { echo "# test_auth.sh keys"; for id in "$@"; do cat "$work/keys.d/$id"; done; } >"$work/keys.tmp"
  mv "$work/keys.tmp" "$work/keys.txt"
}
# sighup_until PATTERN: SIGHUP the front, wait for PATTERN's next match in its log (5 s).
sighup_until() {
  local before
  before=$(grep -c "$1" "$work/f1.log")
  kill -HUP "$f1_pid"
  for _ in $(seq 50); do
    [ "$(grep -c "$1" "$work/f1.log")" -gt "$before" ] && return 0
    sleep 0.1
  done
  return 1
}

# ---- setup: topics, the pipeline, stock, keys, the front
require_setup curl openssl python3
echo "== prefix $prefix, logs in $work"
start_pipeline 3 50
buyer=$(new_key buyer reserve,commit,release,read)
reader=$(new_key reader read)
slow=$(new_key slow reserve,read 1 2)
leaver=$(new_key leaver reserve,read)
# new_key dies inside $( ): a key that is not a secret means it failed.
for k in "$buyer" "$reader" "$slow" "$leaver"; do
  [[ $k =~ ^[[:graph:]]{16,}$ && $k != FAIL* ]] || die "tools/api-key.sh made no key: $k"
done
write_keys buyer reader slow leaver
start_front f1 "{\"http_api_keys_file\": \"$work/keys.txt\"}"
f1_pid=$pid
stop_pids+=("$f1_pid")
echo "== pipeline and front (port $port) ready in $SECONDS s"

# ---- 1. no key, a garbled one, an unknown one
begin "no-key: 401 + WWW-Authenticate: Bearer on every checkout route; webhook and ops need none"
unauth0=$(metric holdfast_http_unauthorized_total)
reserve_as "" refused-nokey
need "reserve without a key: $code $body (expected 401 unauthorized)" \
  is "$code $(jget 'd["code"]')" "401 unauthorized"
need "401 without 'WWW-Authenticate: Bearer ...': $hdrs" grep -qi '^www-authenticate: Bearer' <<<"$hdrs"
http POST /v1/reservations -H 'Authorization: Basic dXNlcjpwYXNz' \
  -d '{"reservation_id":"refused-basic","lines":[{"sku":"SKU-00001","qty":1}]}'
need "Basic credentials: $code (expected 401)" is "$code" 401
need "garbled: no error=\"invalid_token\" in WWW-Authenticate: $(header www-authenticate)" \
  grep -q 'invalid_token' <<<"$(header www-authenticate)"
reserve_as "hf_not_a_key_anyone_was_given_0000" refused-unknown
need "unknown secret: $code $body (expected 401)" is "$code" 401
# refused-* ids and bodies the routes would take: were the key not checked, these
# would reach holdfast.requests, where the nothing-sent check looks for them.
http GET /v1/reservations/refused-nokey-get
need "GET /v1/reservations/{id} without a key: $code (expected 401)" is "$code" 401
http POST /v1/reservations/refused-nokey-c/commit -d '{"payment_id":"p-refused"}'
need "commit without a key: $code (expected 401)" is "$code" 401
http POST /v1/reservations/refused-nokey-r/release -d '{"reason":"abandoned"}'
need "release without a key: $code (expected 401)" is "$code" 401
http POST /v1/reservations/refused-nokey-x/extend -H 'Idempotency-Key: x-refused' -d '{"extend_by_ms":60000}'
need "extend without a key: $code (expected 401)" is "$code" 401
http GET /v1/availability/SKU-00001
need "GET /v1/availability/{sku} without a key: $code (expected 401)" is "$code" 401
http GET /healthz
need "/healthz needs no key: $code" is "$code" 200
http POST /v1/webhooks/payments -d '{}'
need "webhook without a key is judged by its signature: $code $body (expected 401 missing)" \
  is "$code $(jget 'd["code"]')" "401 missing"
unauth1=$(metric holdfast_http_unauthorized_total)
need "holdfast_http_unauthorized_total went $unauth0 -> $unauth1 (expected +8)" \
  is "$((${unauth1:-0} - ${unauth0:-0}))" 8
end

# ---- 2. a key without the route's scope
begin "scope: a read key reserving, committing, releasing: 403; reading: 200"
forb0=$(metric holdfast_http_forbidden_total)
reserve_as "$reader" refused-reader
need "read key reserving: $code $body (expected 403 forbidden)" is "$code $(jget 'd["code"]')" "403 forbidden"
need "403 does not name the key and scope: $body" grep -q "reader.*reserve" <<<"$body"
http POST /v1/reservations/refused-reader-c/commit -H "$(bearer "$reader")" -d '{"payment_id":"p1"}'
need "read key committing: $code (expected 403)" is "$code" 403
http POST /v1/reservations/refused-reader-r/release -H "$(bearer "$reader")" -d '{}'
need "read key releasing: $code (expected 403)" is "$code" 403
http GET /v1/availability/SKU-00001 -H "$(bearer "$reader")"
need "read key reading availability: $code $body (expected 200)" is "$code" 200
forb1=$(metric holdfast_http_forbidden_total)
need "holdfast_http_forbidden_total went $forb0 -> $forb1 (expected +3)" \
  is "$((${forb1:-0} - ${forb0:-0}))" 3
end

# ---- 3. a reserve key
begin "reserve: a reserve key 201 HELD; GET by a read key 200; another key releases it (no ownership)"
reserve_as "$buyer" ok-buyer
need "buyer reserving: $code $body (expected 201 HELD)" is "$code $(jget 'd["outcome"]')" "201 HELD"
reserve_as "$leaver" ok-leaver
need "leaver reserving: $code $body (expected 201 HELD)" is "$code $(jget 'd["outcome"]')" "201 HELD"
for _ in $(seq 30); do
  http GET /v1/reservations/ok-buyer -H "$(bearer "$reader")"
  [ "$code" = 200 ] && break
  sleep 0.1
done
need "GET ok-buyer with the read key: $code $body (expected 200)" is "$code" 200
need "GET ok-buyer: api_key_id $(jget 'd.get("api_key_id")') (expected buyer, who reserved it)" \
  is "$(jget 'd.get("api_key_id")')" buyer
# Scopes name routes, not reservations (docs/HTTP.md, "No ownership"): the buyer key
# releases what the leaver key reserved; the ledger still names leaver (nothing-sent).
reserve_as "$leaver" ok-handoff
need "leaver reserving ok-handoff: $code $body (expected 201 HELD)" is "$code $(jget 'd["outcome"]')" "201 HELD"
http POST /v1/reservations/ok-handoff/release -H "$(bearer "$buyer")" -d '{"reason":"abandoned"}'
need "buyer releasing leaver's ok-handoff: $code $body (expected 200 RELEASED)" \
  is "$code $(jget 'd["outcome"]')" "200 RELEASED"
end

# ---- 4. revoke with SIGHUP; a bad file keeps the keys
begin "revoke: a key removed from the file is refused after SIGHUP; a bad file keeps the keys in use"
write_keys buyer reader slow
sighup_until "API keys reloaded: 3" || why+=("no 'API keys reloaded: 3' in the log after SIGHUP")
reserve_as "$leaver" refused-revoked
need "revoked key reserving: $code $body (expected 401)" is "$code" 401
reserve_as "$buyer" ok-buyer-2
need "buyer after the reload: $code $body (expected 201)" is "$code" 201
cp "$work/keys.txt" "$work/keys.good"
{ cat "$work/keys.good"; echo "broken-line nothex read"; } >"$work/keys.txt"
sighup_until "keys in use stay" || why+=("no 'keys in use stay' in the log after a bad file's SIGHUP")
need "the log does not name the bad line: $(grep 'keys in use stay' "$work/f1.log" | tail -n 1)" \
  grep -q "line 5" <<<"$(grep 'keys in use stay' "$work/f1.log" | tail -n 1)"
reserve_as "$buyer" ok-buyer-3
need "buyer after a bad file's reload: $code $body (expected 201)" is "$code" 201
reserve_as "$leaver" refused-revoked-2
need "revoked key after a bad file's reload: $code (expected 401)" is "$code" 401
# Caught half written, cut just before a newline: it would parse with fewer keys (slow
# gone). Refused whole; the 3 keys stay (the gauge below).
head -n 3 "$work/keys.good" | head -c -1 >"$work/keys.txt"
sighup_until "keys in use stay" || why+=("no 'keys in use stay' in the log after a half-written file's SIGHUP")
need "the log does not say the file ends without a newline: $(grep 'keys in use stay' "$work/f1.log" | tail -n 1)" \
  grep -q "ends without a newline" <<<"$(grep 'keys in use stay' "$work/f1.log" | tail -n 1)"
mv "$work/keys.good" "$work/keys.txt"
http GET /metrics
need "holdfast_http_api_keys: $(awk '$1 == "holdfast_http_api_keys" { print $2 }' <<<"$body") (expected 3)" \
  is "$(awk '$1 == "holdfast_http_api_keys" { print $2 }' <<<"$body")" 3
end

# ---- 5. rate limit
begin "rate-limit: a key over its rate 429 + Retry-After; another key unaffected; a token back after 1 s"
rl0=$(metric holdfast_http_rate_limited_total)
# Five reserves at once: the burst of 2 passes, then the bucket is empty (a token
# comes back after a second: the two reserves take tens of ms). The refused ones
# have refused-* ids: nothing-sent proves they never reached holdfast.requests, and
# that ok-slow-1 and -2 did.
codes= limited=0 retry= limited_body=
for i in 1 2 3 4 5; do
  if [ "$i" -le 2 ]; then rid=ok-slow-$i; else rid=refused-limited-$i; fi
  reserve_as "$slow" "$rid"
  codes="$codes $code"
  if [ "$code" = 429 ]; then
    limited=$((limited + 1))
    [ -n "$retry" ] || { retry=$(header retry-after) limited_body=$body; }
  fi
done
need "slow key (1/s, burst 2), five reserves at once: $codes (expected 201 201 429 429 429)" \
  is "$codes" " 201 201 429 429 429"
need "slow key, five at once: $limited answered 429 (expected 3)" is "$limited" 3
need "429 body: $limited_body (expected rate_limited)" is "$(jget 'd["code"]' "$limited_body")" rate_limited
need "429 Retry-After '$retry' (expected an integer >= 1)" [ "${retry:-0}" -ge 1 ]
for i in 1 2 3 4 5; do
  http GET /v1/availability/SKU-00001 -H "$(bearer "$reader")"
  need "reader while slow is limited, request $i: $code (expected 200)" is "$code" 200
done
sleep "${retry:-1}"
reserve_as "$slow" ok-slow-after
need "slow key reserving after Retry-After: $code $body (expected 201)" is "$code" 201
rl1=$(metric holdfast_http_rate_limited_total)
need "holdfast_http_rate_limited_total went $rl0 -> $rl1 (expected +$limited)" \
  is "$((${rl1:-0} - ${rl0:-0}))" "$limited"
end

# ---- 6. nothing sent for a refused request; the key id in the ledger
begin "nothing-sent: no refused request on holdfast.requests; one of each allowed; key ids in the ledger"
sleep 0.5 # a request, had one been sent, is on the topic in tens of ms
tail_topic holdfast.requests
n=$(records_like holdfast.requests.jsonl 'v.get("reservation_id", "").startswith("refused-")')
need "holdfast.requests holds $n records of refused requests (expected 0)" is "$n" 0
for rid in ok-buyer ok-leaver ok-buyer-2 ok-buyer-3 ok-slow-1 ok-slow-2 ok-slow-after; do
  n=$(records_like holdfast.requests.jsonl "v.get('reservation_id') == '$rid'")
  need "holdfast.requests holds $n records for $rid (expected 1)" is "$n" 1
done
n=$(records_like holdfast.requests.jsonl "v.get('reservation_id') == 'ok-buyer' and v.get('api_key_id') == 'buyer'")
need "the Reserve of ok-buyer does not carry api_key_id 'buyer'" is "$n" 1
tail_topic holdfast.ledger
for pair in ok-buyer:buyer ok-leaver:leaver ok-handoff:leaver ok-slow-1:slow; do
  n=$(records_like holdfast.ledger.jsonl \
    "v.get('reservation_id') == '${pair%:*}' and v.get('kind') == 'HELD' and v.get('api_key_id') == '${pair#*:}'")
  need "the ledger's HELD of ${pair%:*} does not name key '${pair#*:}' ($n)" is "$n" 1
done
n=$(records_like holdfast.requests.jsonl "v.get('reservation_id') == 'ok-handoff'")
need "holdfast.requests holds $n records for ok-handoff (expected 2: the Reserve, the Release)" is "$n" 2
n=$(records_like holdfast.ledger.jsonl \
  "v.get('reservation_id') == 'ok-handoff' and v.get('kind') == 'RELEASED' and v.get('api_key_id') == 'leaver'")
need "the ledger's RELEASED of ok-handoff does not name leaver, who reserved it ($n; buyer released it)" is "$n" 1
end

# ---- 7. the run reconciles
begin "reconcile: hfctl reconcile --quiescent 1 PASS (one api_key_id per reservation among the rest)"
reconcile_run
need "reconcile counts released $(jget 'd["counts"]["released"]' "$(cat "$work/verdict.json")"), expected 1 (ok-handoff)" \
  is "$(jget 'd["counts"]["released"]' "$(cat "$work/verdict.json")")" 1
end

echo "== $checks checks, $failures failed ($SECONDS s)"
[ "$failures" = 0 ]
