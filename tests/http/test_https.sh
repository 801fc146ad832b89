#!/usr/bin/env bash
# `holdfast http` serving TLS itself (docs/HTTP.md, "Listeners" and "TLS"), driven
# with curl and openssl against the real pipeline on the shared broker (a topic
# prefix and app id of this run's own), as tests/http/test_http.sh does. A
# throwaway CA, server certificates and client certificates are made with openssl
# into the run's temp dir. Each check is one behaviour an operator relies on:
#   https-lifecycle    over HTTPS: reserve 201 HELD, signed webhook (on the webhook
#                      listener) 200 COMMITTED, GET COMMITTED; plain HTTP to the TLS port
#                      gets no answer; the served certificate is the configured one
#   tls-versions       TLS 1.3 and 1.2 handshakes succeed; TLS 1.1 and 1.0 (offered
#                      with every cipher, @SECLEVEL=0) are refused
#   listeners          the webhook is 404 on the checkout listener, the checkout routes
#                      404 on the webhook listener, /metrics /healthz /readyz only on the
#                      ops listener (plain HTTP, 127.0.0.1)
#   rotate-under-load  reserves on kept-alive and on fresh connections while the files
#                      are replaced and SIGHUP sent: every request answered 201, the
#                      kept-alive connection never dropped and still busy at the SIGHUP;
#                      connections accepted before the SIGHUP but whose handshake comes
#                      after it get the certificate current at their accept (the old
#                      one: their credentials outlive the listener's reference) and an
#                      answer; afterwards the new certificate (serial, SHA-256) is served
#   reload-broken      a SIGHUP with a broken certificate file keeps the current one
#                      (logged), and requests go on
#   mtls               http_tls_client_ca_file: a client certificate from the CA works; no
#                      certificate, one from another CA, or a serverAuth-only one from the
#                      same CA gets no answer (handshake refused); one log line for the
#                      refusals (rate-limited), holdfast_http_tls_refused_total counts
#                      them; the webhook listener asks none
#   bad-config         key without certificate, unreadable file, a key that is not the
#                      certificate's, a certificate file without a certificate, a client
#                      CA without TLS, mutual TLS with the ops routes on the checkout
#                      listener: exit 2 naming what to fix, nothing served; the ops routes
#                      on a checkout listener beyond loopback: a warning at start
#   reconcile          hfctl reconcile --quiescent 1 PASS over everything above
# About 30 s. Logs under a temp dir, printed (and kept) on failure.
# HOLDFAST_HTTP_BIN=build/san/holdfast runs the fronts (not the pipeline) from the
# sanitizer build, where a use after free of a rotated certificate is an ASan
# report; make test-https runs it both ways.
#
# usage: bash tests/http/test_https.sh   (make test-https; needs build/holdfast,
#        build/hfctl, build/hfbench, a broker at HOLDFAST_BOOTSTRAP, curl, openssl, python3)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
HOLDFAST=${HOLDFAST_BIN:-build/holdfast}
# The fronts under test (holdfast http); the pipeline is $HOLDFAST.
FRONT=${HOLDFAST_HTTP_BIN:-$HOLDFAST}
HFCTL=${HFCTL_BIN:-build/hfctl}
HFBENCH=${HFBENCH_BIN:-build/hfbench}
export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
unset HOLDFAST_KAFKA_CONFIG HOLDFAST_KAFKA_OVERRIDES HOLDFAST_WEBHOOK_SECRETS HOLDFAST_STATE_DIR
prefix="hts$$-$(($(date +%s%3N) % 100000))."
export HOLDFAST_TOPIC_PREFIX=$prefix HOLDFAST_APP_ID=${prefix}app
work=$(mktemp -d /tmp/hf-https.XXXXXX)
pki=$work/pki
secret=whsec_test_$(openssl rand -hex 16)
run_pid= f1_pid= f2_pid= f3_pid= preopen_pid=
load_pids=()
suite=https
# shellcheck source=tests/http/lib.sh
source "$root/tests/http/lib.sh"
cleanup() {
  local rc=$?
  stop_pids+=(${preopen_pid:+"$preopen_pid"} ${load_pids[@]+"${load_pids[@]}"})
  lib_cleanup "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- certificates: a CA, two server certificates (the second is the rotation's,
# with its own key), a client certificate from the CA, one from another CA, and a
# server certificate (serverAuth only) from the CA presented as a client's.
newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# issue NAME CN SERIAL CA [EXTFILE]: NAME.key, NAME.pem signed by CA.{pem,key}
issue() {
  newkey "$pki/$1.key" &&
    openssl req -new -key "$pki/$1.key" -subj "/CN=$2" -out "$pki/$1.csr" 2>/dev/null &&
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$4.pem" -CAkey "$pki/$4.key" -set_serial "$3" \
      -days 2 ${5:+-extfile "$5"} -out "$pki/$1.pem" 2>/dev/null
}
make_pki() {
  mkdir -p "$pki" || return 1
  local ca
  for ca in ca other-ca; do
    newkey "$pki/$ca.key" &&
      openssl req -x509 -key "$pki/$ca.key" -subj "/CN=holdfast test $ca" -days 2 \
        -out "$pki/$ca.pem" 2>/dev/null || return 1
  done
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$pki/server.ext"
  printf 'extendedKeyUsage=clientAuth\n' >"$pki/client.ext"
  issue server-a 127.0.0.1 0x0A01 ca "$pki/server.ext" &&
    issue server-b 127.0.0.1 0x0B02 ca "$pki/server.ext" &&
    issue client checkout 0x0C01 ca "$pki/client.ext" &&
    issue intruder checkout 0x0D01 other-ca "$pki/client.ext" &&
    issue serveronly checkout 0x0E01 ca "$pki/server.ext"
}
# The files the front reads, replaced by the rotation.
install_cert() { # NAME: live.pem, live.key := NAME's (each file replaced in one rename)
  cp "$pki/$1.pem" "$pki/live.pem.tmp" && mv "$pki/live.pem.tmp" "$pki/live.pem" &&
    cp "$pki/$1.key" "$pki/live.key.tmp" && mv "$pki/live.key.tmp" "$pki/live.key"
}
fingerprint_of() { openssl x509 -noout -serial -fingerprint -sha256 -in "$1" | tr '\n' ' '; }
# served_cert PORT: the serial and SHA-256 of the certificate the server presents
served_cert() {
  openssl s_client -connect "127.0.0.1:$1" -servername localhost </dev/null 2>/dev/null |
    openssl x509 -noout -serial -fingerprint -sha256 2>/dev/null | tr '\n' ' '
}

# handshake PORT OPENSSL_ARGS...: succeeds when the TLS handshake does
handshake() {
  local port=$1
  shift
  openssl s_client -connect "127.0.0.1:$port" -servername localhost "$@" </dev/null >/dev/null 2>&1
}
# Connections accepted now, handshaken later: prints "SERIAL STATUS" per connection
# (the certificate it was served, the answer to a GET), or "error ...".
# args: PORT CA COUNT READY_FILE GO_FILE
preopen_py='import os, socket, ssl, sys, time
port, ca, n, ready, go = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
socks = [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(n)]
open(ready, "w").close()
for _ in range(600):
    if os.path.exists(go):
        break
    time.sleep(0.05)
ctx = ssl.create_default_context(cafile=ca)
for s in socks:
    try:
        t = ctx.wrap_socket(s, server_hostname="localhost")
        serial = t.getpeercert()["serialNumber"]
        t.sendall(b"GET /v1/reservations/r1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = t.recv(4096)
            if not chunk:
                break
            data += chunk
        status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "none"
        print(serial, status)
    except Exception as e:
        print("error", type(e).__name__, str(e)[:100].replace(" ", "_"))'

# ---- HTTP and JSON helpers (as test_http.sh's, on a URL)
# req URL METHOD PATH [CURL ARGS...]: $code, $body, $rc (curl's exit status)
req() {
  local base=$1 method=$2 path=$3 out
  shift 3
  rc=0
  out=$(curl -s -X "$method" -o "$work/body" -w '%{http_code}' --max-time 15 \
    --cacert "$pki/ca.pem" "$@" "$base$path") || rc=$?
  code=$out
  body=$(cat "$work/body" 2>/dev/null)
  rm -f "$work/body"
}
fails() { ! "$@"; }
has() { grep -q "$@"; }
lacks_error() { [ -f "$1" ] && ! grep -q '"level":"error"' "$1"; }
reserve() { # BASE RID SKU [CURL ARGS...]
  local base=$1 rid=$2 sku=$3
  shift 3
  req "$base" POST /v1/reservations -H "Idempotency-Key: k-$rid" \
    -d "{\"reservation_id\":\"$rid\",\"lines\":[{\"sku\":\"$sku\",\"qty\":1}]}" "$@"
}
payment_event() { # EVENT_ID RID PAYMENT_ID
  printf '{"id":"%s","type":"payment.succeeded","created":%s,"data":{"reservation_id":"%s","payment_id":"%s"}}' \
    "$1" "$(date +%s)" "$2" "$3"
}
status_until() { # BASE RID KIND [CURL ARGS...]
  local base=$1 rid=$2 kind=$3
  shift 3
  for _ in $(seq 30); do
    req "$base" GET "/v1/reservations/$rid" "$@"
    [ "$code" = 200 ] && [ "$(jget 'd["kind"]')" = "$kind" ] && return 0
    sleep 0.1
  done
  return 1
}

# start_front NAME CONFIG_JSON: a `holdfast http` whose three listeners are on
# ports the kernel picks; sets $pid, $checkout, $webhook, $ops (base URLs).
listener_url() { # LOG KIND: the URL the KIND listener logged
  grep -so "\"$2 listener on https\?://127.0.0.1:[0-9]*" "$1" | grep -o 'https\?://.*' | head -n 1
}
start_front() {
  local name=$1
  printf '%s\n' "$2" >"$work/$name.json"
  HOLDFAST_WEBHOOK_SECRETS=$secret "$FRONT" http --port 0 --instance "$name" \
    --state-dir "$work/state-$name" --config "$work/$name.json" >"$work/$name.log" 2>&1 &
  pid=$! checkout= webhook= ops=
  stop_pids+=("$pid")
  for _ in $(seq 300); do
    grep -q 'holdfast http listening on' "$work/$name.log" && break
    kill -0 "$pid" 2>/dev/null || die "holdfast http $name exited: $(tail -n 5 "$work/$name.log")"
    sleep 0.1
  done
  checkout=$(listener_url "$work/$name.log" checkout)
  webhook=$(listener_url "$work/$name.log" webhook)
  ops=$(listener_url "$work/$name.log" ops)
  [ -n "$checkout" ] && [ -n "$webhook" ] && [ -n "$ops" ] ||
    die "holdfast http $name: not three listeners after 30 s: $(grep -o '"msg":"[^"]*listen[^"]*"' "$work/$name.log")"
  for _ in $(seq 150); do
    req "$ops" GET /readyz
    [ "$code" = 200 ] && return 0
    sleep 0.2
  done
  die "holdfast http $name: /readyz $code after 30 s: $body"
}

# ---- setup: certificates, topics, the pipeline, stock
[ -x "$FRONT" ] || die "$FRONT is missing: run 'make release san'"
require_setup curl openssl python3
echo "== prefix $prefix, logs in $work"
make_pki || die "openssl could not make the test certificates"
install_cert server-a || die "cannot install server-a as the live certificate"
start_pipeline 4 100000
start_front f1 "{\"http_tls_cert_file\": \"$pki/live.pem\", \"http_tls_key_file\": \"$pki/live.key\",
  \"http_webhook_port\": 0, \"http_ops_port\": 0}"
f1_pid=$pid c1=$checkout w1=$webhook o1=$ops
echo "== pipeline and front f1 ready in $SECONDS s: checkout $c1, webhook $w1, ops $o1"

# ---- 1. a reservation's life over HTTPS
begin "https-lifecycle: reserve 201, signed webhook 200 COMMITTED, GET COMMITTED, all over TLS"
need "checkout listener URL $c1 is not https" has '^https://' <<<"$c1"
need "webhook listener URL $w1 is not https" has '^https://' <<<"$w1"
need "ops listener URL $o1 is not plain http" has '^http://' <<<"$o1"
reserve "$c1" r1 SKU-00001
need "reserve r1 over https: $code $body (curl exit $rc; expected 201 HELD)" \
  is "$code $(jget 'd["outcome"]')" "201 HELD"
ev1=$(payment_event evt-r1 r1 pay-r1)
req "$w1" POST /v1/webhooks/payments -H "Holdfast-Signature: $(tests/http/sign.sh "$secret" "$ev1")" -d "$ev1"
need "webhook evt-r1 over https: $code $body (curl exit $rc; expected 200 COMMITTED)" \
  is "$code $(jget 'd["outcome"]')" "200 COMMITTED"
status_until "$c1" r1 COMMITTED || why+=("GET r1: $code $body (expected kind COMMITTED within 3 s)")
req "${c1/https:/http:}" GET /v1/reservations/r1
need "plain HTTP to the TLS port was answered: $code $body" is "$code" 000
served=$(served_cert "${c1##*:}")
need "served certificate '$served' is not server-a's '$(fingerprint_of "$pki/server-a.pem")'" \
  is "$served" "$(fingerprint_of "$pki/server-a.pem")"
end

# ---- 1b. protocol versions
begin "tls-versions: TLS 1.3 and 1.2 handshake; TLS 1.1 and 1.0 refused"
p1=${c1##*:}
need "a TLS 1.3 handshake failed" handshake "$p1" -tls1_3
need "a TLS 1.2 handshake failed" handshake "$p1" -tls1_2
need "a TLS 1.1 handshake succeeded" fails handshake "$p1" -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0'
need "a TLS 1.0 handshake succeeded" fails handshake "$p1" -tls1 -cipher 'DEFAULT:@SECLEVEL=0'
need "a TLS 1.1 handshake on the webhook listener succeeded" \
  fails handshake "${w1##*:}" -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0'
req "$c1" GET /v1/reservations/r1 --tlsv1.0 --tls-max 1.1 --ciphers 'DEFAULT:@SECLEVEL=0'
need "curl over TLS 1.0/1.1 was answered: $code $body (curl exit $rc)" is "$code" 000
end

# ---- 2. each route on its own listener
begin "listeners: webhook 404 on checkout, checkout routes 404 on webhook, ops routes only on ops"
req "$c1" POST /v1/webhooks/payments -H "Holdfast-Signature: $(tests/http/sign.sh "$secret" "$ev1")" -d "$ev1"
need "webhook on the checkout listener: $code $body (expected 404 no_route)" \
  is "$code $(jget 'd["code"]')" "404 no_route"
reserve "$w1" r2 SKU-00001
need "reserve on the webhook listener: $code $body (expected 404 no_route)" \
  is "$code $(jget 'd["code"]')" "404 no_route"
for path in /metrics /healthz /readyz; do
  req "$c1" GET "$path"
  need "GET $path on the checkout listener: $code (expected 404)" is "$code" 404
  req "$w1" GET "$path"
  need "GET $path on the webhook listener: $code (expected 404)" is "$code" 404
done
req "$o1" GET /metrics
need "GET /metrics on the ops listener: $code (expected 200 with holdfast_http_requests_total)" \
  has -q '^holdfast_http_requests_total ' <<<"$body"
req "$o1" GET /v1/reservations/r1
need "GET /v1/reservations/r1 on the ops listener: $code (expected 404)" is "$code" 404
end

# ---- 3. rotation under load
begin "rotate-under-load: SIGHUP with new files while reserving; every request 201; new certificate served"
# One curl over one kept-alive connection: 400 reserves in sequence (a connection
# in flight across the rotation), and 4 loops of one fresh connection per reserve
# (handshakes on both sides of it). Each request writes its status to a file.
keep_cfg=$work/keepalive.curl
for i in $(seq 400); do
  printf 'url = "%s/v1/reservations"\ncacert = "%s"\nheader = "Idempotency-Key: k-ka%d"\n' "$c1" "$pki/ca.pem" "$i"
  printf 'data = "{\\"reservation_id\\":\\"ka%d\\",\\"lines\\":[{\\"sku\\":\\"SKU-00002\\",\\"qty\\":1}]}"\n' "$i"
  printf 'output = "/dev/null"\nwrite-out = "%%{http_code} %%{num_connects}\\n"\nsilent\n'
  [ "$i" = 400 ] || printf 'next\n'
done >"$keep_cfg"
# Line-buffered: the lines written so far are the requests answered so far.
(stdbuf -oL curl -K "$keep_cfg" >"$work/keepalive.codes" 2>"$work/keepalive.err") &
load_pids+=($!)
ka_pid=$!
for w in 1 2 3 4; do
  (
    i=0
    while [ ! -e "$work/stop-load" ] && [ $i -lt 2000 ]; do
      i=$((i + 1))
      curl -s -o /dev/null -w '%{http_code}\n' --max-time 15 --cacert "$pki/ca.pem" \
        -H "Idempotency-Key: k-w$w-$i" -X POST "$c1/v1/reservations" \
        -d "{\"reservation_id\":\"w$w-$i\",\"lines\":[{\"sku\":\"SKU-00003\",\"qty\":1}]}"
      [ $? = 0 ] || echo "curl-failed"
    done >"$work/fresh-$w.codes"
  ) &
  load_pids+=($!)
done
# Connections accepted by the listener before the SIGHUP, handshaken after it:
# each holds the credentials current at its accept, which the reload must not
# free under it (the sanitizer run would see a use after free).
python3 -c "$preopen_py" "${c1##*:}" "$pki/ca.pem" 4 "$work/preopen.ready" "$work/preopen.go" \
  >"$work/preopen.out" 2>&1 &
preopen_pid=$!
sleep 2
install_cert server-b
reloads=$(grep -c 'the checkout listener reloaded its TLS files' "$work/f1.log")
# The state of the load right at the SIGHUP.
before=$(cat "$work"/fresh-*.codes "$work/keepalive.codes" 2>/dev/null | wc -l)
ka_before=$(wc -l <"$work/keepalive.codes")
kill -0 "$ka_pid" 2>/dev/null && ka_running=yes || ka_running=no
preopen_ready=no
[ -e "$work/preopen.ready" ] && kill -0 "$preopen_pid" 2>/dev/null && preopen_ready=yes
kill -HUP "$f1_pid"
for _ in $(seq 100); do
  [ "$(grep -c 'the checkout listener reloaded its TLS files' "$work/f1.log")" -gt "$reloads" ] && break
  sleep 0.05
done
touch "$work/preopen.go"
wait "$preopen_pid"
preopen_pid=
sleep 2
touch "$work/stop-load"
wait "$ka_pid"
for p in "${load_pids[@]}"; do wait "$p" 2>/dev/null; done
load_pids=()
total=$(cat "$work"/fresh-*.codes "$work/keepalive.codes" | wc -l)
bad=$(cat "$work"/fresh-*.codes | grep -cv '^201$')
ka_bad=$(grep -cv '^201 ' "$work/keepalive.codes")
ka_connects=$(awk '{ s += $2 } END { print s + 0 }' "$work/keepalive.codes")
echo "        $total requests ($before before the SIGHUP), $(wc -l <"$work/keepalive.codes") on one kept-alive connection"
need "fresh-connection requests not answered 201: $bad ($(cat "$work"/fresh-*.codes | sort | uniq -c | tr '\n' ' '))" is "$bad" 0
need "kept-alive requests: $(wc -l <"$work/keepalive.codes") answered of 400, $ka_bad not 201 ($(cut -d' ' -f1 "$work/keepalive.codes" | sort | uniq -c | tr '\n' ' ')) $(head -c 300 "$work/keepalive.err")" \
  is "$(wc -l <"$work/keepalive.codes") $ka_bad" "400 0"
need "the kept-alive curl had finished before the SIGHUP (make it longer)" is "$ka_running" yes
need "the kept-alive connection answered $ka_before requests before the SIGHUP (expected some, and some after)" \
  test "$ka_before" -gt 0 -a "$ka_before" -lt 400
need "the pre-opened connections were not open at the SIGHUP: $(head -c 300 "$work/preopen.out")" \
  is "$preopen_ready" yes
old_serial=$(openssl x509 -noout -serial -in "$pki/server-a.pem" | cut -d= -f2)
need "connections accepted before the SIGHUP, handshaken after: '$(tr '\n' ';' <"$work/preopen.out")' (expected 4 × '$old_serial 200': the certificate current at their accept, and an answer)" \
  is "$(sort "$work/preopen.out" | uniq -c | tr -s ' ')" " 4 $old_serial 200"
need "the kept-alive curl opened $ka_connects connections (expected 1: the rotation dropped it)" is "$ka_connects" 1
need "load too short to span the SIGHUP: $before requests before it, $total in all" \
  test "$before" -gt 20 -a "$total" -gt $((before + 20))
need "f1.log does not show the reload" has -q 'reloaded its TLS files: now sha256' "$work/f1.log"
served=$(served_cert "${c1##*:}")
need "after the SIGHUP the served certificate is '$served', not server-b's '$(fingerprint_of "$pki/server-b.pem")'" \
  is "$served" "$(fingerprint_of "$pki/server-b.pem")"
served=$(served_cert "${w1##*:}")
need "the webhook listener serves '$served' after the SIGHUP, not server-b's" \
  is "$served" "$(fingerprint_of "$pki/server-b.pem")"
end

# ---- 4. a broken file on reload
begin "reload-broken: SIGHUP with a truncated certificate keeps the current one, logged"
head -c 100 "$pki/server-a.pem" >"$pki/live.pem"
kill -HUP "$f1_pid"
for _ in $(seq 30); do has -q 'TLS reload failed' "$work/f1.log" && break; sleep 0.1; done
need "f1.log does not say the reload failed" has -q 'checkout listener: TLS reload failed, still serving the previous' "$work/f1.log"
served=$(served_cert "${c1##*:}")
need "after a failed reload the served certificate is '$served', not server-b's" \
  is "$served" "$(fingerprint_of "$pki/server-b.pem")"
reserve "$c1" r5 SKU-00001
need "reserve after a failed reload: $code $body (expected 201)" is "$code" 201
install_cert server-b
end

# ---- 5. mutual TLS
begin "mtls: client certificate from the CA works; none, or another CA's, refused; webhook asks none"
start_front f2 "{\"http_tls_cert_file\": \"$pki/server-a.pem\", \"http_tls_key_file\": \"$pki/server-a.key\",
  \"http_tls_client_ca_file\": \"$pki/ca.pem\", \"http_webhook_port\": 0, \"http_ops_port\": 0}"
f2_pid=$pid c2=$checkout w2=$webhook
mine=(--cert "$pki/client.pem" --key "$pki/client.key")
theirs=(--cert "$pki/intruder.pem" --key "$pki/intruder.key")
servers=(--cert "$pki/serveronly.pem" --key "$pki/serveronly.key")
o2=$ops
# The intruder first: its refusal is the one logged with its reason, the next
# ones within 10 s are only counted.
reserve "$c2" m3 SKU-00001 "${theirs[@]}"
need "reserve with another CA's client certificate was answered: $code $body (curl exit $rc)" is "$code" 000
reserve "$c2" m1 SKU-00001 "${mine[@]}"
need "reserve with the CA's client certificate: $code $body (curl exit $rc; expected 201 HELD)" \
  is "$code $(jget 'd["outcome"]')" "201 HELD"
status_until "$c2" m1 HELD "${mine[@]}" || why+=("GET m1 with the client certificate: $code $body")
reserve "$c2" m2 SKU-00001
need "reserve without a client certificate was answered: $code $body (curl exit $rc)" is "$code" 000
req "$c2" GET /v1/reservations/m1 --tlsv1.2 --tls-max 1.2 "${theirs[@]}"
need "TLS 1.2 with another CA's client certificate was answered: $code $body (curl exit $rc)" is "$code" 000
reserve "$c2" m4 SKU-00001 "${servers[@]}"
need "reserve with a serverAuth-only certificate from the CA was answered: $code $body (curl exit $rc)" is "$code" 000
req "$c2" GET /v1/reservations/m1 --tlsv1.2 --tls-max 1.2 "${servers[@]}"
need "TLS 1.2 with a serverAuth-only certificate from the CA was answered: $code $body (curl exit $rc)" is "$code" 000
need "f2.log does not say why the intruder was refused" has -q 'TLS handshake refused: client certificate refused' "$work/f2.log"
need "f2.log has $(grep -c 'TLS handshake refused' "$work/f2.log") lines of refused handshakes within 10 s (expected 1)" \
  is "$(grep -c 'TLS handshake refused' "$work/f2.log")" 1
req "$o2" GET /metrics
refused=$(grep '^holdfast_http_tls_refused_total ' <<<"$body" | cut -d' ' -f2)
need "holdfast_http_tls_refused_total is '$refused' (expected 4: two intruder, two serverAuth-only handshakes)" \
  is "$refused" 4
need "f2.log has $(grep -c 'libmicrohttpd:' "$work/f2.log") lines from libmicrohttpd for the failed handshakes within 10 s (expected 1)" \
  is "$(grep -c 'libmicrohttpd:' "$work/f2.log")" 1
ev2=$(payment_event evt-m1 m1 pay-m1)
req "$w2" POST /v1/webhooks/payments -H "Holdfast-Signature: $(tests/http/sign.sh "$secret" "$ev2")" -d "$ev2"
need "webhook without a client certificate on the webhook listener: $code $body (expected 200 COMMITTED)" \
  is "$code $(jget 'd["outcome"]')" "200 COMMITTED"
end

# ---- 6. bad settings exit 2 at start
begin "bad-config: each bad TLS setting exits 2 naming the key or file to fix"
# bad JSON EXPECTED_PATTERN
bad() {
  printf '%s\n' "$1" >"$work/bad.json"
  local out brc=0
  out=$(timeout 20 "$FRONT" http --port 0 --instance bad --state-dir "$work/state-bad" \
    --config "$work/bad.json" 2>&1) || brc=$?
  need "config $1: exit $brc (expected 2): $(head -c 300 <<<"$out")" is "$brc" 2
  need "config $1: message '$(head -c 300 <<<"$out")' lacks '$2'" has -q -- "$2" <<<"$out"
}
bad "{\"http_tls_key_file\": \"$pki/server-a.key\"}" 'http_tls_key_file is set but http_tls_cert_file is not'
bad "{\"http_tls_cert_file\": \"$pki/server-a.pem\", \"http_tls_key_file\": \"$pki/missing.key\"}" "missing.key' cannot be read"
bad "{\"http_tls_cert_file\": \"$pki/server-a.pem\", \"http_tls_key_file\": \"$pki/server-b.key\"}" 'is not the key of the certificate'
bad "{\"http_tls_cert_file\": \"$pki/server-a.key\", \"http_tls_key_file\": \"$pki/server-a.key\"}" 'holds no usable PEM certificate'
bad "{\"http_tls_client_ca_file\": \"$pki/ca.pem\"}" 'mutual TLS needs TLS'
bad "{\"http_tls_cert_file\": \"$pki/server-a.pem\", \"http_tls_key_file\": \"$pki/server-a.key\", \"http_tls_client_ca_file\": \"$pki/server-a.key\", \"http_webhook_port\": 0, \"http_ops_port\": 0}" 'http_tls_client_ca_file'
bad "{\"http_tls_cert_file\": \"$pki/server-a.pem\", \"http_tls_key_file\": \"$pki/server-a.key\", \"http_tls_client_ca_file\": \"$pki/ca.pem\", \"http_webhook_port\": 0}" 'Set http_ops_port'
bad "{\"http_webhook_port\": 18080, \"http_ops_port\": 18080}" 'give each listener its own port'
end

# ---- 7. the ops routes beyond loopback
begin "public-ops: http_ops_port -1 with http_bind 0.0.0.0 starts, with a warning naming http_ops_port"
printf '{"http_bind": "0.0.0.0", "http_port": 0}\n' >"$work/f3.json"
"$FRONT" http --port 0 --instance f3 --state-dir "$work/state-f3" --config "$work/f3.json" \
  >"$work/f3.log" 2>&1 &
f3_pid=$!
for _ in $(seq 300); do
  grep -q 'holdfast http listening on' "$work/f3.log" && break
  kill -0 "$f3_pid" 2>/dev/null || break
  sleep 0.1
done
need "f3 did not start: $(tail -n 3 "$work/f3.log")" has -q 'holdfast http listening on' "$work/f3.log"
need "f3.log has no warning that the ops routes are public" \
  has -q '"level":"warn".*http_ops_port is -1: /metrics /healthz /readyz are served on the checkout listener' "$work/f3.log"
stop_pid "$f3_pid"
need "f1.log (http_bind 127.0.0.1, its own ops listener) warns of public ops routes" \
  fails has -q 'http_ops_port is -1' "$work/f1.log"
end

# ---- the whole run reconciles
begin "reconcile: hfctl reconcile --quiescent 1 PASS"
stop_pid "$f2_pid"
stop_pid "$f1_pid"
f2_pid= f1_pid=
reconcile_run
need "reconcile counts committed $(jget 'd["counts"]["committed"]' "$(cat "$work/verdict.json")"), expected 2 (r1, m1)" \
  is "$(jget 'd["counts"]["committed"]' "$(cat "$work/verdict.json")")" 2
for f in run f2; do
  need "$f.log has errors: $(grep '"level":"error"' "$work/$f.log" | head -n 3)" \
    lacks_error "$work/$f.log"
done
# A sanitizer build reports there (ASan, UBSan; LeakSanitizer at exit).
for f in run f1 f2 f3; do
  need "$f.log has a sanitizer report: $(grep -m 3 'Sanitizer\|runtime error:' "$work/$f.log")" \
    fails grep -q 'Sanitizer\|runtime error:' "$work/$f.log"
done
end

echo "https: $checks checks, $failures failures"
[ "$failures" = 0 ]
