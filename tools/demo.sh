#!/usr/bin/env bash
# make demo: from a fresh clone to a verdict. Installs what is missing, starts the
# local broker (unless one is already up), creates this run's topics, starts
# holdfast with all three stages, seeds a catalog over the 50-warehouse network,
# runs a short flash sale with live progress, then replays every topic with
# `hfctl reconcile` and prints its verdict. Stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "dependencies and build"
bash tools/deps.sh
make -s release

export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
started_kafka=0
host=${HOLDFAST_BOOTSTRAP%:*}; port=${HOLDFAST_BOOTSTRAP##*:}
if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  say "starting a local Apache Kafka broker"
  make -s kafka-up
  started_kafka=1
fi

run=demo-$(date +%Y%m%d-%H%M%S)
export HOLDFAST_TOPIC_PREFIX="$run."
export HOLDFAST_APP_ID="$run"
workdir=build/demo/$run
mkdir -p "$workdir"
holdfast_pid=
cleanup() {
  if [ -n "$holdfast_pid" ]; then kill "$holdfast_pid" 2>/dev/null || true; wait "$holdfast_pid" 2>/dev/null || true; fi
  if [ "$started_kafka" = 1 ]; then make -s kafka-down; fi
}
trap cleanup EXIT

say "topics ($run.holdfast.*)"
build/hfctl topics apply > "$workdir/topics.json"
echo "  $(wc -l < "$workdir/topics.json") topics ready (topics/topics.json)"

say "holdfast run --stages counter,aggregator,gateway   (log: $workdir/holdfast.log)"
# A payment that comes after its hold expired re-reserves the lines if stock allows.
# Nothing is pinned: the doorbuster's rush switches it to escrow by itself
# (escrow_auto_reserves_s, docs/ESCROW.md), where each gateway partition holds
# shoppers against its own allotment in one hop; its last 10 units go direct.
cat > "$workdir/config.json" <<'JSON'
{"late_payment_policy": "rereserve",
 "escrow_refill_min_units": 5, "escrow_refill_max_units": 20, "escrow_scarce_units": 10}
JSON
build/holdfast run --stages counter,aggregator,gateway --state-dir "$workdir/state" \
  --config "$workdir/config.json" 2>"$workdir/holdfast.log" &
holdfast_pid=$!

say "seeding: 1,000 SKUs at 5 of the 50 warehouses each, and a DOORBUSTER with 100 units"
build/hfbench seed --skus 1000 --per-sku 5 --stock 200 --doorbuster-stock 100

say "flash sale: 100 reserves/s for 15 s over the catalog, plus 2,000 shoppers for the doorbuster (escrow by itself) in 2 s, then 20/s latecomers"
echo "  (3 % of shoppers pay after their hold expired: late_payments in the summary)"
set +e
build/hfbench run --scenario flash-sale --rate 100 --seconds 15 --skus 1000 \
  --doorbuster-stock 100 --burst-factor 20 --door-tail-rate 20 --late-pct 3 \
  --report "$workdir/report.json"
bench=$?
set -e
bash tools/plot-report.sh "$workdir/report.json" || echo "  (no plots: bash tools/deps.sh plot installs gnuplot)"

say "reconcile: replaying every topic and checking every invariant"
set +e
build/hfctl reconcile | tee "$workdir/verdict.json"
verdict=${PIPESTATUS[0]}
set -e

python3 - "$workdir/verdict.json" "$workdir/report.json" <<'PY' || true
import json, sys
v = json.load(open(sys.argv[1])).get("counts", {})
s = json.load(open(sys.argv[2])).get("summary", {})
d = s.get("doorbuster") or {}
n = s.get("reserves") or 0
print(f"\n  reserves: {n}, answered BUSY {s.get('busy', '?')}"
      f"{' (%.1f %%)' % (100.0 * s.get('busy', 0) / n) if n else ''}, "
      f"reserve p50/p99 {s.get('reserve_ms', {}).get('p50', '?')}/{s.get('reserve_ms', {}).get('p99', '?')} ms")
print(f"\n  doorbuster: {d.get('units_committed', '?')} of {d.get('stock', '?')} units sold, "
      f"oversold {d.get('oversold', '?')}, SOLD_OUT signalled "
      f"{d.get('sold_out_signal_after_last_hold_ms', '?')} ms after the last unit was held")
print(f"  escrow: {v.get('escrow_grants', 0)} grants ({v.get('escrow_granted_units', 0)} units), "
      f"{v.get('escrow_sales', 0)} sales from allotments, {v.get('escrow_returns', 0)} returns, "
      f"{v.get('escrow_recalls', 0)} recalls")
PY
echo
echo "report: $workdir/report.json (+ -latency.png, -doorbuster.png)"
echo "verdict: $workdir/verdict.json   log: $workdir/holdfast.log"
if [ "$bench" = 0 ] && [ "$verdict" = 0 ]; then
  say "verdict: PASS — nothing oversold, lost or duplicated"
else
  say "verdict: FAIL (hfbench exit $bench, reconcile exit $verdict)"
  exit 1
fi
