#!/usr/bin/env bash
# The operations kit (ops/prometheus/holdfast.rules.yml, ops/grafana/holdfast.json,
# docs/OPERATIONS.md) against a real Prometheus (Debian's 2.42 `prometheus`) and blackbox
# exporter scraping a running holdfast: two `holdfast run` processes (p1: counter and
# aggregator, p2: gateway; each with its metrics_port) and a `holdfast http` front, on the
# shared broker with a topic prefix of this run's own. Prometheus runs from this script
# with its own config and data in the temp dir, on a free 127.0.0.1 port, scrape and
# evaluation interval 1 s. The rules it loads are the shipped file with every `for:` set
# to 2s, every range window to 15s and every `..._age_seconds > N` threshold to N/20
# (`prom.py shorten`): the expressions are the shipped ones, only their time scale
# shrinks so that an alert fires and resolves within the test. Checks:
#   rules-check      promtool check rules on the shipped and the shortened file, promtool
#                    check config; the shipped links point at docs/OPERATIONS.md sections
#   rules-loaded     Prometheus loaded every rule and evaluates each with health ok
#   alerts-fire-resolve  provoked for real, seen firing through /api/v1/alerts, then resolved:
#                    - HoldfastTargetDown and HoldfastUnhealthy: p1 SIGSTOPped for 10 s (a
#                      stalled process: its scrape and /healthz probe time out)
#                    - HoldfastStageStalled and HoldfastUnhealthy, at the same time: p2's
#                      gateway task hangs in a transaction commit
#                      (HOLDFAST_FAULT_HANG_COMMIT) while the rest of p2 goes on: its
#                      loop age grows, its /healthz answers 503, both alerts fire while p2
#                      is up; p2's watchdog exits it (HOLDFAST_TASK_STALL_EXIT_MS, exit 4),
#                      the test starts it again and they resolve
#                    - HoldfastExpiryLagOverBound: holds due during the hang expire > 5 s late
#                    - HoldfastDeadLetters: a stock feed the counter must refuse (an ADJUST
#                      below zero) goes to holdfast.dead-letters
#                    - HoldfastHttpOverloaded: 50 concurrent reserves at a front with
#                      http_inflight_max 2 (503 + Retry-After)
#                    - HoldfastReserveBusy: the reserves hfbench sent during the hang waited
#                      more than reserve_deadline_ms by the time the gateway read them: shed BUSY
#   consumer-lag     holdfast_consumer_lag_records on the requests topic was above 0 after
#                    the hang (the restarted gateway reads its backlog in batches of 20
#                    records) and is back to 0 at the end
#   rule-series      every series each rule reads (name and matchers) and each recorded series
#                    has a finite point while the traffic ran, after the events above made
#                    the event-only ones
#   dashboard        every panel target of the dashboard ($__rate_interval = 1m) has a finite
#                    point (not NaN: a ratio of 0/0) while the traffic ran
# About 50 s. Logs under a temp dir, printed (and kept) on failure.
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
age_scale=0.05                # ..._age_seconds thresholds: 60 s -> 3 s, 120 s -> 6 s
stall_s=10                    # how long p1 is SIGSTOPped
hang_exit_ms=12000            # p2's watchdog exits it this long after its gateway hangs
# The alerts provoked; HoldfastReserveBusy reads holdfast_replies_total.
expected=(HoldfastTargetDown HoldfastUnhealthy HoldfastStageStalled HoldfastExpiryLagOverBound
  HoldfastDeadLetters HoldfastHttpOverloaded HoldfastReserveBusy)
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
now() { date +%s.%N; }
echo "== prefix $prefix, logs in $work"
run_metrics_port=$(free_port) gw_metrics_port=$(free_port) prom_port=$(free_port) bb_port=$(free_port)
prom_url=http://127.0.0.1:$prom_port
gw_healthz=http://127.0.0.1:$gw_metrics_port/healthz

# Two `holdfast run` processes with their metrics ports: p1 the counter and aggregator,
# p2 the gateway, whose first transaction commit after $work/hang appears never returns
# and whose watchdog exits it hang_exit_ms after that. /healthz answers 503 after 2 s
# without a loop.
"$HFCTL" topics apply >"$work/topics.out" 2>&1 || die "hfctl topics apply: $(tail -n 3 "$work/topics.out")"
printf '{"metrics_port": %s, "health_loop_stall_ms": 2000}\n' "$run_metrics_port" >"$work/run.json"
printf '{"metrics_port": %s, "health_loop_stall_ms": 2000}\n' "$gw_metrics_port" >"$work/gw.json"
# The gateway started again after the hang: its backlog read 20 records a transaction,
# so that it takes a few seconds and its consumer lag is seen above 0.
printf '{"metrics_port": %s, "health_loop_stall_ms": 2000, "batch_records_max": 20}\n' \
  "$gw_metrics_port" >"$work/gw-again.json"
"$HOLDFAST" run --config "$work/run.json" --stages counter,aggregator --instance p1 \
  --state-dir "$work/state-run" >"$work/run.log" 2>&1 &
run_pid=$!
stop_pids+=("$run_pid")
# start_gateway CONFIG LOG: p2, its pid in gw_pid.
start_gateway() {
  HOLDFAST_FAULT_HANG_COMMIT="$work/hang" HOLDFAST_TASK_STALL_EXIT_MS=$hang_exit_ms \
    "$HOLDFAST" run --config "$1" --stages gateway --instance p2 --state-dir "$work/state-gw" \
    >"$2" 2>&1 &
  gw_pid=$!
  stop_pids+=("$gw_pid")
}
start_gateway "$work/gw.json" "$work/gw.log"
"$HFBENCH" seed --skus 20 --stock 40 >"$work/seed.log" 2>&1 || die "hfbench seed: $(tail -n 3 "$work/seed.log")"
wait_http "http://127.0.0.1:$run_metrics_port/readyz" 30 || die "holdfast run p1 not ready: $(tail -n 5 "$work/run.log")"
wait_http "http://127.0.0.1:$gw_metrics_port/readyz" 30 || die "holdfast run p2 not ready: $(tail -n 5 "$work/gw.log")"
# A front whose ops routes share its checkout listener (http_ops_port -1), at most 2
# requests waiting for the pipeline.
start_front f1 '{"http_inflight_max": 2}'
front_port=$port

prometheus-blackbox-exporter --config.file=ops/prometheus/blackbox.example.yml \
  --web.listen-address="127.0.0.1:$bb_port" >"$work/blackbox.log" 2>&1 &
stop_pids+=($!)

$prom shorten "$rules" "$work/rules.yml" "$for_short" "$window_short" "$age_scale" ||
  die "prom.py shorten $rules failed"
# The shipped example's jobs and relabelling, with this run's targets.
$prom config ops/prometheus/prometheus.example.yml "$work/prometheus.yml" "$work/rules.yml" \
  "127.0.0.1:$run_metrics_port,127.0.0.1:$gw_metrics_port" "127.0.0.1:$front_port" "127.0.0.1:$bb_port" ||
  die "prom.py config failed"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom-data" \
  --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.retention.time=1h \
  >"$work/prometheus.log" 2>&1 &
stop_pids+=($!)
wait_http "$prom_url/-/ready" 30 || die "prometheus not ready: $(tail -n 5 "$work/prometheus.log")"
$prom targets "$prom_url" 6 30 >"$work/targets.out" || die "targets: $(cat "$work/targets.out")"
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
begin "alerts-fire-resolve: a stalled process, a hung task, dead letters, an overloaded front, BUSY: each fires, then resolves"
phase0=$SECONDS t_traffic=$(now)
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
# At once: p1 stopped for stall_s, then continued; p2's gateway hung in its next commit,
# p2 polled on /healthz meanwhile (the first 503 kept).
sleep 2
t_hang=$(now)
: >"$work/hang"
kill -STOP "$run_pid"
stall_at=$SECONDS
until [ $((SECONDS - stall_at)) -ge "$stall_s" ]; do
  if [ ! -s "$work/gw-503.txt" ]; then
    code=$(curl -s -o "$work/gw-healthz.txt" -w '%{http_code}' --max-time 1 "$gw_healthz")
    [ "$code" = 503 ] && cp "$work/gw-healthz.txt" "$work/gw-503.txt"
  fi
  sleep 0.5
done
kill -CONT "$run_pid"
echo "== p1 stalled $((SECONDS - stall_at)) s; front 503s: $n503 of 50"
# p2's watchdog ends it (exit 4); it is started again at once.
for _ in $(seq 200); do kill -0 "$gw_pid" 2>/dev/null || break; sleep 0.1; done
t_exit=$(now)
if kill -0 "$gw_pid" 2>/dev/null; then
  why+=("p2 still running $((SECONDS - stall_at)) s after its gateway hung (watchdog at $hang_exit_ms ms)")
  stop_pid "$gw_pid"
else
  wait "$gw_pid"
  rc=$?
  need "p2 exited $rc after its gateway hung, not 4 (the stall watchdog): $(tail -n 3 "$work/gw.log")" \
    is "$rc" 4
  need "p2's log does not say the watchdog ended it: $(tail -n 3 "$work/gw.log")" \
    grep -q 'shows no sign of life' "$work/gw.log"
fi
[ -e "$work/hang" ] && why+=("$work/hang still there: p2's gateway never reached a commit to hang in")
start_gateway "$work/gw-again.json" "$work/gw-again.log"
echo "== p2's gateway hung $(python3 -c "print(f'{$t_exit - $t_hang:.1f}')") s, p2 started again"
need "p2's /healthz never answered 503 while its gateway hung" test -s "$work/gw-503.txt"
need "p2's /healthz 503 does not name the stuck gateway task: $(cat "$work/gw-503.txt" 2>/dev/null)" \
  grep -q 'gateway task.*no loop completed' "$work/gw-503.txt"
# Both fired while p2 was up: an episode begun after the hang and before the exit, so
# /healthz's 503 and the loop age, not an unreachable process.
$prom fired "$work/alerts.jsonl" HoldfastStageStalled "$t_hang" "$t_exit" stage=gateway \
  "instance=127.0.0.1:$gw_metrics_port" >"$work/fired.out" 2>&1 ||
  why+=("HoldfastStageStalled for the hung gateway: $(cat "$work/fired.out")")
$prom fired "$work/alerts.jsonl" HoldfastUnhealthy "$t_hang" "$t_exit" "instance=$gw_healthz" \
  >>"$work/fired.out" 2>&1 || why+=("HoldfastUnhealthy through p2's /healthz: $(cat "$work/fired.out")")
sed 's/^/  (p2 up)/' "$work/fired.out"
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
t_end=$(now)

begin "consumer-lag: the gateway's lag on ${prefix}holdfast.requests above 0 after the hang, 0 at the end"
requests_lag="holdfast_consumer_lag_records{stage=\"gateway\", topic=\"${prefix}holdfast.requests\"}"
window_s=$(python3 -c "import math; print(math.ceil($t_end - $t_hang) + 1)")
peak=$($prom value "$prom_url" "max(max_over_time(${requests_lag}[${window_s}s]))" 2>&1)
need "max_over_time of the requests topic's lag over the hang and after it is $peak, not above 0" \
  python3 -c "import sys; sys.exit(0 if float('$peak') > 0 else 1)"
last=none
for _ in $(seq 20); do
  last=$($prom value "$prom_url" "max(${requests_lag})" 2>&1)
  [ "$last" = 0 ] && break
  sleep 0.5
done
need "the requests topic's lag is $last at the end, not back to 0" test "$last" = 0
echo "    peak lag $peak records, now $last"
end

# ---- 3. every series the rules read, every dashboard query
begin "rule-series: every series each rule reads or records has a finite point while the traffic ran"
$prom series "$prom_url" "$work/rules.yml" "$t_traffic" "$t_end" >"$work/series.out" 2>&1
rc=$?
need "$(cat "$work/series.out")" is "$rc" 0
tail -n 1 "$work/series.out" | sed 's/^/    /'
end

begin "dashboard: every panel query of $dashboard has a finite point against the live Prometheus"
$prom dashboard "$prom_url" "$dashboard" 1m "$t_traffic" "$t_end" >"$work/dashboard.out" 2>&1
rc=$?
need "$(cat "$work/dashboard.out")" is "$rc" 0
sed 's/^/    /' "$work/dashboard.out"
end

echo "ops: $((checks - failures)) of $checks checks passed in $SECONDS s"
[ "$failures" = 0 ]
