#!/usr/bin/env bash
# make demo: from a fresh clone to a verdict. Installs what is missing, starts the
# local broker (unless one is already up), creates this run's topics, starts the
# processor, seeds a doorbuster SKU across five warehouses, fires a burst of
# concurrent holds at it with live progress, prints the final stock and the
# verdict, then stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "dependencies"
bash tools/deps.sh
make -s release

export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
started_kafka=0
host=${HOLDFAST_BOOTSTRAP%:*}; port=${HOLDFAST_BOOTSTRAP##*:}
if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  say "starting a local Kafka broker"
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

say "topics ($run.*)"
build/hfctl topics apply | sed 's/^/  /'

say "processor: holdfast run --stages counter (log: $workdir/holdfast.log)"
build/holdfast run --stages counter --state-dir "$workdir/state" 2>"$workdir/holdfast.log" &
holdfast_pid=$!

say "seeding DOORBUSTER: 40 units in each of W1..W5"
for w in W1 W2 W3 W4 W5; do
  build/hfctl stock feed --warehouse "$w" --sku DOORBUSTER --kind RECEIVE --qty 40 --seq 1 >/dev/null
done
for i in $(seq 1 60); do
  n=$(build/hfctl tail "$run.holdfast.stock-levels" | grep -c DOORBUSTER || true)
  [ "$n" -ge 5 ] && break
  sleep 0.5
done

say "flash sale: 5,000 shoppers grab one unit each, 8 concurrent producers"
set +e
build/hfctl burst --sku DOORBUSTER --warehouses W1,W2,W3,W4,W5 --holds 5000 --producers 8 | tee "$workdir/verdict.txt"
verdict=${PIPESTATUS[0]}
set -e

say "final stock (committed counters, read from the changelog)"
for w in W1 W2 W3 W4 W5; do
  build/hfctl stock get --warehouse "$w" --sku DOORBUSTER | sed 's/^/  /'
done

if [ "$verdict" = 0 ] && grep -q '"verdict":"PASS"' "$workdir/verdict.txt" \
   && grep -q '"held":200,' "$workdir/verdict.txt"; then
  say "verdict: PASS — exactly the 200 units in stock were held, no stock level ever went negative"
else
  say "verdict: FAIL — see $workdir/verdict.txt and $workdir/holdfast.log"
  exit 1
fi
