#!/usr/bin/env bash
# The operations kit (ops/prometheus/holdfast.rules.yml, ops/grafana/holdfast.json,
# docs/OPERATIONS.md) against a real Prometheus (Debian's 2.42 `prometheus`) and blackbox
# exporter scraping a running holdfast: `holdfast run` (all stages, metrics_port) and a
# `holdfast http` front, on the shared broker with a topic prefix of this run's own.
# Prometheus runs from this script with its own config and data in the temp dir, on a
# free 127.0.0.1 port, scrape and evaluation interval 1 s. The rules it loads are the
# shipped file with every `for:` set to 2s and every range window to 15s
# (`prom.py shorten`): the expressions are the shipped ones, only their time scale
# shrinks so that an alert fires and resolves within the test. Checks:
#   rules-check      promtool check rules on the shipped and the shortened file, promtool
#                    check config; the shipped links point at docs/OPERATIONS.md sections
#   rules-loaded     Prometheus loaded every rule and evaluates each with health ok
#   alerts-fire-resolve  provoked for real, seen firing through /api/v1/alerts, then resolved:
#                    - HoldfastTargetDown and HoldfastUnhealthy: `holdfast run` SIGSTOPped
#                      for 10 s (a stalled process: its scrape and /healthz probe time out)
#                    - HoldfastExpiryLagOverBound: holds due during that stall expire > 5 s late
#                    - HoldfastDeadLetters: a stock feed the counter must refuse (an ADJUST
#                      below zero) goes to holdfast.dead-letters
#                    - HoldfastHttpOverloaded: 50 concurrent reserves at a front with
#                      http_inflight_max 2 (503 + Retry-After)
#                    - HoldfastReserveBusy: the reserves hfbench sent during the stall waited
#                      more than reserve_deadline_ms by the time the gateway read them: shed BUSY
#   rule-series      every series each rule reads (name and matchers) and each recorded series
#                    exists in Prometheus, after the events above made the event-only ones
#   dashboard        every panel target of the dashboard ($__rate_interval = 1m) returns a
#                    non-empty result
# About 45 s. Logs under a temp dir, printed (and kept) on failure.
#
# usage: bash tests/ops/test_ops.sh   (make test-ops; needs build/holdfast, build/hfctl,
#        build/hfbench, a broker at HOLDFAST_BOOTSTRAP, prometheus, promtool,
#        prometheus-blackbox-exporter, curl, python3 with yaml: tools/deps.sh ops python)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
HOLDFAST=${HOLDFAST_BIN:-build/holdfast}
HFCTL=${HFCTL_BIN:-build/hfctl}
HFBENCH=${HFBENCH_BIN:-build/hfbench}
export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
unset HOLDFAST_KAFKA_CONFIG HOLDFAST_KAFKA_OVERRIDES HOLDFAST_WEBHOOK_SECRETS HOLDFAST_STATE_DIR
prefix="op$$-$(($(date +%s%3N) % 100000))."
export HOLDFAST_TOPIC_PREFIX=$prefix HOLDFAST_APP_ID=${prefix}app
work=$(mktemp -d /tmp/hf-ops.XXXXXX)
suite=ops
rules=ops/prometheus/holdfast.rules.yml
dashboard=ops/grafana/holdfast.json
prom="python3 tests/ops/prom.py"
for_short=2s window_short=15s # the shortened `for:` and range windows
stall_s=10                    # how long `holdfast run` is SIGSTOPped
# The alerts provoked; HoldfastReserveBusy reads holdfast_replies_total.
expected=(HoldfastTargetDown HoldfastUnhealthy HoldfastExpiryLagOverBound HoldfastDeadLetters HoldfastHttpOverloaded
  HoldfastReserveBusy)
# shellcheck source=tests/http/lib.sh
source "$root/tests/http/lib.sh"
lib_traps

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_http URL SECONDS: the URL answers 200.
wait_http() {
  for _ in $(seq $(($2 * 5))); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
    sleep 0.2
  done
  return 1
}

# ---- setup
require_setup curl python3 prometheus promtool prometheus-blackbox-exporter
python3 -c 'import yaml' 2>/dev/null || die "python3-yaml is needed (tools/deps.sh python)"
echo "== prefix $prefix, logs in $work"
run_metrics_port=$(free_port) prom_port=$(free_port) bb_port=$(free_port)
prom_url=http://127.0.0.1:$prom_port

# `holdfast run` with its metrics port (start_pipeline's process, with a config file).
"$HFCTL" topics apply >"$work/topics.out" 2>&1 || die "hfctl topics apply: $(tail -n 3 "$work/topics.out")"
printf '{"metrics_port": %s}\n' "$run_metrics_port" >"$work/run.json"
"$HOLDFAST" run --config "$work/run.json" --stages counter,aggregator,gateway --instance p1 \
  --state-dir "$work/state-run" >"$work/run.log" 2>&1 &
run_pid=$!
stop_pids+=("$run_pid")
"$HFBENCH" seed --skus 20 --stock 40 >"$work/seed.log" 2>&1 || die "hfbench seed: $(tail -n 3 "$work/seed.log")"
wait_http "http://127.0.0.1:$run_metrics_port/readyz" 30 || die "holdfast run not ready: $(tail -n 5 "$work/run.log")"
# A front whose ops routes share its checkout listener (http_ops_port -1), at most 2
# requests waiting for the pipeline.
start_front f1 '{"http_inflight_max": 2}'
front_port=$port

prometheus-blackbox-exporter --config.file=ops/prometheus/blackbox.example.yml \
  --web.listen-address="127.0.0.1:$bb_port" >"$work/blackbox.log" 2>&1 &
stop_pids+=($!)

$prom shorten "$rules" "$work/rules.yml" "$for_short" "$window_short" ||
  die "prom.py shorten $rules failed"
# The shipped example's jobs and relabelling, with this run's targets.
$prom config ops/prometheus/prometheus.example.yml "$work/prometheus.yml" "$work/rules.yml" \
  "127.0.0.1:$run_metrics_port" "127.0.0.1:$front_port" "127.0.0.1:$bb_port" ||
  die "prom.py config failed"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom-data" \
  --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.retention.time=1h \
  >"$work/prometheus.log" 2>&1 &
stop_pids+=($!)
wait_http "$prom_url/-/ready" 30 || die "prometheus not ready: $(tail -n 5 "$work/prometheus.log")"
$prom targets "$prom_url" 4 30 >"$work/targets.out" || die "targets: $(cat "$work/targets.out")"
echo "== pipeline, front (port $front_port), blackbox, prometheus ($prom_url) up in $SECONDS s"

# ---- 1. the rules files
begin "rules-check: promtool check rules (shipped and shortened) and configs; runbook links resolve"
promtool check rules "$rules" >"$work/check-rules.out" 2>&1
rc=$?
need "promtool check rules $rules: $(tail -n 3 "$work/check-rules.out")" is "$rc" 0
promtool check rules "$work/rules.yml" >"$work/check-short.out" 2>&1
rc=$?
need "promtool check rules (shortened): $(tail -n 3 "$work/check-short.out")" is "$rc" 0
for conf in ops/prometheus/prometheus.example.yml "$work/prometheus.yml"; do
  promtool check config "$conf" >"$work/check-config.out" 2>&1
  rc=$?
  need "promtool check config $conf: $(tail -n 3 "$work/check-config.out")" is "$rc" 0
done
prometheus-blackbox-exporter --config.check --config.file=ops/prometheus/blackbox.example.yml \
  >"$work/check-blackbox.out" 2>&1
rc=$?
need "blackbox exporter --config.check: $(tail -n 2 "$work/check-blackbox.out")" is "$rc" 0
python3 - "$rules" docs/OPERATIONS.md >"$work/links.out" 2>&1 <<'PY'
import re, sys, yaml
rules = [r for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"] if "alert" in r]
doc = open(sys.argv[2]).read()
anchors = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#+ (.*)$", doc, re.M)}
bad = []
for r in rules:
    url = r.get("annotations", {}).get("runbook_url", "")
    if not r.get("annotations", {}).get("summary"):
        bad.append(f"{r['alert']}: no summary")
    if not url.startswith("docs/OPERATIONS.md#") or url.split("#", 1)[1] not in anchors:
        bad.append(f"{r['alert']}: runbook_url {url!r} is no section of docs/OPERATIONS.md")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
rc=$?
need "runbook links: $(cat "$work/links.out")" is "$rc" 0
end

begin "rules-loaded: Prometheus loaded and evaluates every rule (health ok)"
$prom rules "$prom_url" "$rules" 20 >"$work/rules.out" 2>&1
rc=$?
need "$(cat "$work/rules.out")" is "$rc" 0
end

# ---- 2. provoke alerts, all at once: a watcher records every state Prometheus reports
$prom watch "$prom_url" "$work/alerts.jsonl" &
stop_pids+=($!)
begin "alerts-fire-resolve: a stalled process, dead letters, an overloaded front, BUSY: each fires, then resolves"
phase0=$SECONDS
# Traffic: reserves, commits, releases, expiries (1.5 s TTL) and a flash sale's sold-out
# doorbuster, for the dashboard; the stall falls in its middle.
"$HFBENCH" run --scenario flash-sale --rate 100 --seconds 16 --skus 20 --burst-factor 3 \
  --ttl-ms 1500 >"$work/bench.log" 2>&1 &
bench_pid=$!
stop_pids+=("$bench_pid")
# Dead letters: an ADJUST that would take on_hand below zero (new feed epoch 1, seq 1).
avail=$("$HFCTL" availability --sku SKU-00001 2>"$work/avail.err")
wh=$(jget 'd["warehouses"][0]["warehouse_id"]' "$avail")
"$HFCTL" stock feed --warehouse "$wh" --sku SKU-00001 --kind ADJUST --qty -1000000 --seq 1 \
  --epoch 1 >"$work/feed.out" 2>&1 || why+=("hfctl stock feed: $(cat "$work/feed.out" "$work/avail.err")")
# An overloaded front: 50 reserves at once, 2 may wait for the pipeline.
mkdir -p "$work/burst"
for i in $(seq 50); do
  curl -s -o /dev/null -w '%{http_code}\n' --max-time 15 -X POST -H "Idempotency-Key: k-ov$i" \
    -d "{\"reservation_id\":\"ov$i\",\"lines\":[{\"sku\":\"SKU-00002\",\"qty\":1}]}" \
    "http://127.0.0.1:$front_port/v1/reservations" >"$work/burst/$i.code" &
done
wait_burst() { for f in "$work"/burst/*.code; do [ -s "$f" ] || return 1; done; }
for _ in $(seq 100); do wait_burst && break; sleep 0.2; done
n503=$(cat "$work"/burst/*.code | grep -c '^503$')
need "the front answered no 503 to 50 concurrent reserves with http_inflight_max 2: $(sort "$work"/burst/*.code | uniq -c | tr '\n' ' ')" \
  test "$n503" -gt 0
# The stall: `holdfast run` stopped, then continued.
sleep 2
kill -STOP "$run_pid"
stall_at=$SECONDS
sleep "$stall_s"
kill -CONT "$run_pid"
echo "== stalled $((SECONDS - stall_at)) s; front 503s: $n503 of 50"
# Each expected alert seen firing, then none of them pending or firing.
deadline=$((SECONDS + 90))
until $prom timeline "$work/alerts.jsonl" "${expected[@]}" >"$work/timeline.out" 2>&1; do
  [ "$SECONDS" -lt "$deadline" ] || break
  sleep 1
done
$prom timeline "$work/alerts.jsonl" "${expected[@]}" >"$work/timeline.out" 2>&1
rc=$?
need "alerts (shortened for: $for_short, windows $window_short): $(cat "$work/timeline.out")" is "$rc" 0
sed 's/^/    /' "$work/timeline.out"
echo "    (phase took $((SECONDS - phase0)) s)"
end
wait "$bench_pid" 2>/dev/null

# ---- 3. every series the rules read, every dashboard query
begin "rule-series: every series each rule reads or records exists in Prometheus"
$prom series "$prom_url" "$work/rules.yml" >"$work/series.out" 2>&1
rc=$?
need "$(cat "$work/series.out")" is "$rc" 0
end

begin "dashboard: every panel query of $dashboard is non-empty against the live Prometheus"
$prom dashboard "$prom_url" "$dashboard" 1m >"$work/dashboard.out" 2>&1
rc=$?
need "$(cat "$work/dashboard.out")" is "$rc" 0
end

echo "ops: $((checks - failures)) of $checks checks passed in $SECONDS s"
[ "$failures" = 0 ]
