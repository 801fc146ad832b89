#!/usr/bin/env bash
# The command-line convention of holdfast, hfctl and hfbench (processor/hf_cli.h),
# checked on the release binaries without a broker: --help and --version exit 0
# with their text on stdout; every command and subcommand's --help lists the
# options scripts and docs use (the list below is the interface: tests/, tools/,
# README); an unknown option or a missing value exits 2 naming it.
set -uo pipefail
bin=${1:-build}
failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_exit CODE CMD...: runs CMD, keeps stdout/stderr in $out/$err.
expect_exit() {
  local want=$1; shift
  checks=$((checks + 1))
  out=$("$@" 2>/tmp/hf-cli-err.$$); local rc=$?
  err=$(cat /tmp/hf-cli-err.$$)
  [ "$rc" = "$want" ] || { fail "'$*' exited $rc, expected $want (stderr: ${err:0:200})"; return 1; }
}

# help_lists "PROG WORDS" OPTION...: --help exits 0, prints on stdout only, and
# names every option.
help_lists() {
  local cmd=$1; shift
  # shellcheck disable=SC2086
  expect_exit 0 $bin/$cmd --help || return
  [ -z "$err" ] || fail "'$cmd --help' wrote to stderr: $err"
  grep -q "^usage: " <<<"$out" || fail "'$cmd --help' prints no usage line"
  for o in "$@" help version; do
    grep -q -- "--$o\b" <<<"$out" || fail "'$cmd --help' does not list --$o"
  done
  # shellcheck disable=SC2086
  expect_exit 0 $bin/$cmd -h && [ -n "$out" ] || fail "'$cmd -h' printed nothing"
}

for b in holdfast hfctl hfbench; do
  expect_exit 0 "$bin/$b" --help && grep -q "^usage: " <<<"$out" || fail "$b --help: no usage"
  expect_exit 0 "$bin/$b" --version
  grep -Eq "^$b( \(holdfast\))? [^ ]+$" <<<"$(head -n 1 <<<"$out")" || fail "$b --version first line: $(head -n 1 <<<"$out")"
  for lib in librdkafka rocksdb avro-c; do
    grep -Eq "^$lib +[0-9]+\.[0-9]+" <<<"$out" || fail "$b --version does not name $lib's version"
  done
  expect_exit 2 "$bin/$b" && [ -n "$err" ] || fail "$b without arguments: no usage on stderr"
done
grep -q "^librdkafka *2\." <<<"$("$bin/holdfast" --version)" || fail "librdkafka is not 2.x at run time"

help_lists "holdfast run" config stages instance state-dir
help_lists "hfctl topics apply" file
help_lists "hfctl send hold" reservation attempt warehouse sku qty
help_lists "hfctl send commit-hold" reservation attempt warehouse sku
help_lists "hfctl send release-hold" reservation attempt warehouse sku reason
help_lists "hfctl stock feed" warehouse sku kind qty seq
help_lists "hfctl stock get" warehouse sku
help_lists "hfctl availability" sku
help_lists "hfctl tail" max
help_lists "hfctl burst" sku warehouses holds producers timeout-ms
help_lists "hfctl reserve" reservation key sku qty lines lat lon ttl-ms campaign reply-to timeout-ms attempts traceparent
help_lists "hfctl commit" reservation key payment reply-to timeout-ms attempts traceparent
help_lists "hfctl release" reservation key reason reply-to timeout-ms attempts traceparent
help_lists "hfctl extend" reservation key by-ms reply-to timeout-ms attempts traceparent
help_lists "hfctl payment" reservation key event payment reason reply-to timeout-ms attempts traceparent
help_lists "hfctl status" reservation
help_lists "hfctl reconcile" quiescent violations settle-attempts expiry-lag-max-ms pairs-max holds-max reservations-max reply-keys-max timeout-ms
help_lists "hfbench seed" skus pairs catalog catalog-s stock per-sku doorbuster-stock warehouses seed timeout-ms plan-only plan-out
help_lists "hfbench run" scenario rate seconds skus zipf doorbuster-stock burst-factor commit-pct abandon-pct late-pct declined-pct canceled-pct ttl-ms dup-pct seed report

# A group word alone lists its subcommands; with --help on stdout and exit 0.
expect_exit 0 "$bin/hfctl" stock --help && grep -q "stock feed" <<<"$out" || fail "hfctl stock --help does not list 'stock feed'"
expect_exit 2 "$bin/hfctl" send && grep -q "send release-hold" <<<"$err" || fail "hfctl send alone does not list its subcommands"

# Mistakes: exit 2, the offending option named, a pointer to --help.
expect_exit 2 "$bin/hfctl" reserve --reservation r --key k --bogus 1 &&
  grep -q -- "unknown option '--bogus'" <<<"$err" && grep -q -- "hfctl reserve --help" <<<"$err" ||
  fail "hfctl reserve --bogus: $err"
expect_exit 2 "$bin/hfctl" availability --sku && grep -q -- "--sku needs a value" <<<"$err" || fail "hfctl availability --sku: $err"
expect_exit 2 "$bin/hfctl" stock feed --warehouse W --sku S && grep -q -- "missing --kind" <<<"$err" || fail "hfctl stock feed without --kind: $err"
expect_exit 2 "$bin/hfctl" reserve --reservation r --key k --sku S --traceparent 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01 &&
  grep -q -- "--traceparent '00-4BF9.*' is not a W3C traceparent" <<<"$err" || fail "hfctl reserve --traceparent (uppercase): $err"
expect_exit 2 "$bin/hfctl" commit --reservation r --key k --payment p --traceparent 00-00000000000000000000000000000000-00f067aa0ba902b7-01 &&
  grep -q -- "is not a W3C traceparent" <<<"$err" || fail "hfctl commit --traceparent (zero trace-id): $err"
expect_exit 2 "$bin/hfctl" payment --reservation r --key evt-1 --payment p --event refunded &&
  grep -q -- "--event 'refunded' is not one of processing" <<<"$err" || fail "hfctl payment --event refunded: $err"
expect_exit 2 "$bin/hfbench" run --commit-pct 60 --abandon-pct 25 --declined-pct 20 &&
  grep -q -- "must not exceed 100" <<<"$err" || fail "hfbench run with fates over 100%: $err"
expect_exit 2 "$bin/hfctl" frobnicate && grep -q "unknown command 'frobnicate'" <<<"$err" || fail "hfctl frobnicate: $err"
expect_exit 2 "$bin/holdfast" run --stagez counter && grep -q -- "unknown option '--stagez'" <<<"$err" || fail "holdfast run --stagez: $err"
expect_exit 2 "$bin/holdfast" serve && grep -q "unknown command" <<<"$err" || fail "holdfast serve: $err"
expect_exit 2 "$bin/hfbench" run --rate fast && grep -q -- "--rate must be an integer" <<<"$err" || fail "hfbench run --rate fast: $err"
expect_exit 2 "$bin/hfbench" seed --scenario steady && grep -q -- "unknown option '--scenario'" <<<"$err" || fail "hfbench seed --scenario: $err"
expect_exit 2 "$bin/hfbench" seed --per-sku 50 --warehouses /dev/null ||
  fail "hfbench seed with an empty warehouses file"
# hfbench seed's plan without a broker (--plan-only): the uniform plan is the one
# it always was (its digest pinned), a zipf plan is fixed by --seed, places each
# SKU at 1..all distinct warehouses of the file with >= 1 unit each, and --pairs N
# plans exactly N pairs besides the doorbuster's 5.
plan=$(mktemp -d)
expect_exit 0 "$bin/hfbench" seed --plan-only && grep -q "digest d1936da8a9bf3433$" <<<"$out" ||
  fail "hfbench seed --plan-only: the default uniform plan changed: $out"
expect_exit 0 "$bin/hfbench" seed --catalog zipf --pairs 20000 --seed 7 --plan-only --plan-out "$plan/a.tsv" &&
  grep -q " 20000 pairs (1\.\.[0-9]* warehouses a SKU" <<<"$out" || fail "hfbench seed zipf --pairs 20000: $out"
zipf_line=$out
expect_exit 0 "$bin/hfbench" seed --catalog zipf --pairs 20000 --seed 7 --plan-only --plan-out "$plan/b.tsv" &&
  [ "$out" = "$zipf_line" ] && cmp -s "$plan/a.tsv" "$plan/b.tsv" || fail "hfbench seed zipf: the same --seed planned twice differs"
expect_exit 0 "$bin/hfbench" seed --catalog zipf --pairs 20000 --seed 8 --plan-only --plan-out "$plan/c.tsv" &&
  ! cmp -s "$plan/a.tsv" "$plan/c.tsv" || fail "hfbench seed zipf: --seed 7 and --seed 8 planned the same"
python3 -c 'import json; [print(w["id"]) for w in json.load(open("config/warehouses.json"))["warehouses"]]' >"$plan/wh"
awk -F'\t' 'FILENAME == ARGV[1] { wh[$1] = 1; nwh++; next }
  $1 == "DOORBUSTER" { door++; next }
  { pairs++; n[$1]++; if (seen[$1 FS $2]++) bad = bad " duplicate " $1 " at " $2
    if (!($2 in wh)) bad = bad " unknown warehouse " $2; if ($3 !~ /^[0-9]+$/ || $3 < 1) bad = bad " units " $3 " at " $1 }
  END { for (s in n) { skus++; if (n[s] > nwh) bad = bad " " s " at " n[s] " warehouses"; if (n[s] > max) max = n[s] }
        if (pairs != 20000 || door != 5) bad = bad " pairs " pairs " doorbuster " door
        if (max < 10) bad = bad " no SKU at 10 or more warehouses (max " max ")"
        if (skus * 2 > pairs) bad = bad " " skus " SKUs: mean below 2 warehouses"
        print bad }' "$plan/wh" "$plan/a.tsv" >"$plan/check"
[ -z "$(cat "$plan/check")" ] || fail "hfbench seed zipf plan:$(cat "$plan/check")"
expect_exit 0 "$bin/hfbench" seed --per-sku 3 --pairs 10 --plan-only --plan-out "$plan/u.tsv" &&
  [ "$(grep -vc DOORBUSTER "$plan/u.tsv")" = 10 ] && grep -q $'^SKU-00003\t' "$plan/u.tsv" &&
  ! grep -q $'^SKU-00004\t' "$plan/u.tsv" || fail "hfbench seed uniform --pairs 10 --per-sku 3: $out"
expect_exit 2 "$bin/hfbench" seed --skus 10 --pairs 10 --plan-only && grep -q -- "--skus or --pairs, not both" <<<"$err" || fail "hfbench seed --skus --pairs: $err"
expect_exit 2 "$bin/hfbench" seed --catalog pareto --plan-only && grep -q -- "--catalog must be uniform or zipf" <<<"$err" || fail "hfbench seed --catalog pareto: $err"
expect_exit 2 "$bin/hfbench" seed --catalog zipf --per-sku 5 --plan-only && grep -q -- "--per-sku is for --catalog uniform" <<<"$err" || fail "hfbench seed zipf --per-sku: $err"
expect_exit 2 "$bin/hfbench" seed --catalog-s 1.2 --plan-only && grep -q -- "--catalog-s is for --catalog zipf" <<<"$err" || fail "hfbench seed --catalog-s without zipf: $err"
expect_exit 2 "$bin/hfbench" seed --catalog zipf --catalog-s x --plan-only && grep -q -- "--catalog-s must be a number" <<<"$err" || fail "hfbench seed --catalog-s x: $err"
rm -rf "$plan"
# --option=value works as well as --option value (getopt_long).
expect_exit 2 "$bin/hfbench" run --rate=0 && grep -q -- "--rate must be" <<<"$err" || fail "hfbench run --rate=0: $err"

# Every setting is checked at start, before anything is consumed: a stage's
# settings by its init (processor/stage.h), which runs before any task thread,
# any Kafka client or any state DB exists. So a bad value fails `holdfast run`
# at once with exit 2 and a message naming the key, even with no broker at all
# (the bootstrap below refuses every connection), and no state dir is made.
cfgdir=$(mktemp -d)
# bad_setting NAME STAGES JSON NEEDLE: holdfast run with JSON as its config.
bad_setting() {
  local name=$1 stages=$2 json=$3 needle=$4
  printf '%s\n' "$json" >"$cfgdir/cfg-$name.json"
  local began=$SECONDS
  HOLDFAST_BOOTSTRAP=127.0.0.1:1 expect_exit 2 timeout -k 2 10 "$bin/holdfast" run \
    --config "$cfgdir/cfg-$name.json" --stages "$stages" --state-dir "$cfgdir/state-$name" ||
    return
  grep -qF -- "$needle" <<<"$err" || fail "$name: stderr does not say '$needle': ${err:0:300}"
  [ $((SECONDS - began)) -le 5 ] || fail "$name: took $((SECONDS - began)) s to fail"
  [ ! -e "$cfgdir/state-$name" ] || fail "$name: a state dir was made before the check"
}
printf '{"SKU-1": {"low": 5, "high": 2}}\n' >"$cfgdir/overrides-inverted.json"
bad_setting late-policy counter,aggregator,gateway '{"late_payment_policy": "refnd"}' \
  "late_payment_policy: 'refnd' is not one of refund, rereserve"
bad_setting framing aggregator '{"output_framing": "avro"}' "output_framing 'avro' must be"
bad_setting framing-no-registry gateway '{"output_framing": "confluent"}' \
  "output_framing 'confluent' needs schema_registry_url"
bad_setting registry-url counter '{"schema_registry_url": "sr:8081"}' \
  "schema_registry_url 'sr:8081' must start with http://"
# A registry that does not answer is not a bad setting: exit 1, before any state
# dir, saying what to do (docs/SCHEMA_REGISTRY.md).
printf '{"output_framing": "confluent", "schema_registry_url": "http://127.0.0.1:1"}\n' \
  >"$cfgdir/cfg-registry-down.json"
if HOLDFAST_BOOTSTRAP=127.0.0.1:1 expect_exit 1 timeout -k 2 20 "$bin/holdfast" run \
  --config "$cfgdir/cfg-registry-down.json" --stages aggregator --state-dir "$cfgdir/state-registry-down"; then
  grep -qF "Start the registry or correct schema_registry_url" <<<"$err" ||
    fail "registry down: stderr does not say what to do: ${err:0:300}"
  [ ! -e "$cfgdir/state-registry-down" ] || fail "registry down: a state dir was made"
fi
bad_setting warehouses gateway '{"warehouses_file": "/nonexistent/warehouses.json"}' \
  "warehouses_file: "
bad_setting campaigns gateway '{"campaign_ttls": "flash=5m"}' "campaign_ttls: "
bad_setting campaigns-shape gateway '{"campaign_ttls": "flash"}' "campaign_ttls: 'flash' is not name=ms"
bad_setting overrides-missing aggregator '{"signal_overrides_file": "/nonexistent/overrides.json"}' \
  "signal_overrides_file: "
bad_setting overrides-inverted aggregator "{\"signal_overrides_file\": \"$cfgdir/overrides-inverted.json\"}" \
  "signal_overrides_file $cfgdir/overrides-inverted.json: SKU 'SKU-1' needs"
bad_setting retentions gateway '{"reservation_retention_ms": 1000, "idempotency_retention_ms": 2000}' \
  "reservation_retention_ms 1000 must be at least idempotency_retention_ms 2000"
bad_setting stage-name counter,gatewy '{}' "stages: unknown stage 'gatewy'"
bad_setting stage-twice counter,gateway,counter '{}' "stages: 'counter' is listed twice"
# The gateway's init (the routing view, waiting up to 15 s for a broker) runs
# after the other stages' whatever the order of --stages: the aggregator's bad
# file is found at once.
bad_setting stages-order gateway,aggregator '{"signal_overrides_file": "/nonexistent/overrides.json"}' \
  "aggregator: signal_overrides_file: "
# The HTTP front checks its settings the same way: exit 2 naming the key, before
# any Kafka client exists.
bad_http() {
  local name=$1 json=$2 needle=$3
  shift 3
  printf '%s\n' "$json" >"$cfgdir/http-$name.json"
  local began=$SECONDS
  HOLDFAST_BOOTSTRAP=127.0.0.1:1 expect_exit 2 timeout -k 2 10 env "$@" "$bin/holdfast" http \
    --config "$cfgdir/http-$name.json" --state-dir "$cfgdir/state-http-$name" || return
  grep -qF -- "$needle" <<<"$err" || fail "http $name: stderr does not say '$needle': ${err:0:300}"
  [ $((SECONDS - began)) -le 5 ] || fail "http $name: took $((SECONDS - began)) s to fail"
  [ ! -e "$cfgdir/state-http-$name" ] || fail "http $name: a state dir was made before the check"
}
bad_http bind '{"http_bind": "localhost"}' "http_bind 'localhost' must be an IPv4 address"
bad_http short-secret '{"webhook_secrets": "short"}' "webhook_secrets: secret 1:"
bad_http three-secrets '{"webhook_secrets": "aaaaaaaaaaaaaaaa1,aaaaaaaaaaaaaaaa2,aaaaaaaaaaaaaaaa3"}' \
  "webhook_secrets: secret 3:"
bad_http env-secret '{}' "webhook_secrets: secret 1:" HOLDFAST_WEBHOOK_SECRETS=tooshort
bad_http port '{"http_port": 70000}' "config 'http_port' must be an integer in [0, 65535]"
bad_http timeout '{"http_reply_timeout_ms": 5}' "config 'http_reply_timeout_ms' must be an integer"
# Listeners and TLS (docs/HTTP.md): the files are checked before any Kafka client.
bad_http webhook-bind '{"http_webhook_bind": "provider.example"}' \
  "http_webhook_bind 'provider.example' must be an IPv4 address"
bad_http ops-port '{"http_ops_port": -2}' "config 'http_ops_port' must be an integer in [-1, 65535]"
bad_http same-port '{"http_webhook_port": 9001, "http_ops_port": 9001}' \
  "http_webhook_port and http_ops_port are both 9001"
bad_http tls-key-only '{"http_tls_key_file": "/nonexistent/tls.key"}' \
  "http_tls_key_file is set but http_tls_cert_file is not"
bad_http tls-unreadable '{"http_tls_cert_file": "/nonexistent/tls.pem", "http_tls_key_file": "/nonexistent/tls.key"}' \
  "'/nonexistent/tls.pem' cannot be read: No such file or directory"
bad_http mtls-no-tls '{"http_tls_client_ca_file": "/nonexistent/ca.pem"}' \
  "http_tls_client_ca_file is set but http_tls_cert_file is not"
bad_http mtls-ops-on-checkout '{"http_tls_cert_file": "/nonexistent/tls.pem", "http_tls_key_file": "/nonexistent/tls.key", "http_tls_client_ca_file": "/nonexistent/ca.pem", "http_webhook_port": 9001}' \
  "Set http_ops_port to give them their own listener"
rm -rf "$cfgdir"
expect_exit 2 "$bin/holdfast" http --port 99999 && grep -q -- "--port '99999' must be an integer" <<<"$err" ||
  fail "holdfast http --port 99999: $err"
expect_exit 0 "$bin/holdfast" http --routes && grep -qx "POST /v1/webhooks/payments" <<<"$out" ||
  fail "holdfast http --routes does not list the webhook: $out"
expect_exit 0 "$bin/holdfast" http --help && grep -q -- "--routes" <<<"$out" || fail "holdfast http --help: $out"

# Every option hfctl's handlers read is declared in some command's table (hf_cli
# asserts it at run time: an undeclared read is a crash, found too late).
used=$(grep -o '\(opt\|need\|opt_int64\)(c, "[a-z-]*"' tools/hfctl.c | sed 's/.*"\(.*\)"/\1/' | sort -u)
declared=$(grep -o '"[a-z-]*", \("[^"]*"\|NULL\), \(true\|false\)' tools/hfctl.c | sed 's/^"\([^"]*\)".*/\1/' | sort -u)
checks=$((checks + 1))
undeclared=$(comm -23 <(echo "$used") <(echo "$declared"))
[ -z "$undeclared" ] || fail "hfctl reads options no command declares: $undeclared"

rm -f /tmp/hf-cli-err.$$
echo "cli: $checks invocations, $failures failures"
[ "$failures" = 0 ]
