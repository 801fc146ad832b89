#!/usr/bin/env bash
# Scenario 1: kill -9 the full pipeline under load, repeatedly.
#
# One `holdfast run --stages counter,aggregator,gateway` (instance p1) serves
# hfbench: a steady run, then (unless FT_FLASH=0) a flash sale on the doorbuster.
# While each runs, the processor is kill -9'd at random moments (a random gap of
# FT_GAP_MIN..FT_GAP_MAX s after the previous restart) and restarted at once with
# the same --instance and state dir; kills stop FT_KILL_MARGIN s before the load
# ends so the last restart can answer within hfbench's reply window (hfbench
# does not retry a reserve; a reply that comes after it exits counts as lost).
# Then: idle, reconcile --quiescent 1 PASS, check.py (see lib.sh).
#
# env: FT_KILLS (total kills, default 10), FT_RATE (steady reserves/s, 60),
#      FT_SECONDS (steady run, 40), FT_FLASH (1), FT_FLASH_SECONDS (15),
#      FT_GAP_MIN/FT_GAP_MAX (2/5), FT_KILL_MARGIN (4), FT_SKUS (500),
#      FT_ESCROW (0; 1: the doorbuster and the three most popular SKUs are served
#      from allotments, docs/ESCROW.md, so the kills land in the middle of
#      refills, returns, rebalances and one-hop holds)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

kills_target=${FT_KILLS:-10}
rate=${FT_RATE:-60}
seconds=${FT_SECONDS:-40}
flash=${FT_FLASH:-1}
flash_seconds=${FT_FLASH_SECONDS:-15}
gap_min=${FT_GAP_MIN:-2}
gap_max=${FT_GAP_MAX:-5}
margin=${FT_KILL_MARGIN:-4}
skus=${FT_SKUS:-500}
escrow=${FT_ESCROW:-0}
doorbuster=50

ft_init kill9
# Late payments are re-reserved, so the kills also land in the middle of
# re-reservations (hfbench --late-pct: payments after the hold expired); the
# steady run's mix has payment events too (--declined-pct: payment.failed, then
# another card pays; --canceled-pct: payment.canceled releases).
if [ "$escrow" = 1 ]; then
  # Small refills and a short idle return: many allotment records per second.
  echo '{"late_payment_policy": "rereserve", "escrow_skus": "DOORBUSTER,SKU-00000,SKU-00001,SKU-00002",
         "escrow_refill_min_units": 3, "escrow_refill_max_units": 20, "escrow_idle_return_ms": 1000,
         "escrow_scarce_units": 5}' >"$FT_WORK/config.json"
  ft_log "escrow on: DOORBUSTER and SKU-00000..2 served from allotments"
else
  echo '{"late_payment_policy": "rereserve"}' >"$FT_WORK/config.json"
fi
hf_start p1
bench_seed --skus "$skus" --per-sku 5 --stock 200 --doorbuster-stock "$doorbuster" --seed 7

# run_with_kills NAME KILLS LOAD_SECONDS HFBENCH-ARGS...: hfbench in the
# background, up to KILLS kill -9s while its load lasts.
run_with_kills() {
  local name=$1 kills=$2 load_s=$3; shift 3
  local t0 n=0 next kill_until
  bench_start "$name" "$@"
  local pid=$BENCH_PID
  # The load starts after hfbench's warm-up, when it prints its header (seen
  # here with the first progress line, about 1 s later); its last reserve is
  # due load_s after that.
  bench_wait_header "$name" "$pid"
  t0=$(date +%s)
  kill_until=$((t0 + load_s - margin))
  next=$((t0 + $(rand_between "$gap_min" "$gap_max")))
  while [ "$n" -lt "$kills" ] && bench_alive "$pid"; do
    hf_supervise_all
    if [ "$(date +%s)" -ge "$next" ]; then
      [ "$next" -le "$kill_until" ] || break
      hf_kill9 p1
      hf_start p1
      n=$((n + 1))
      ft_log "kill -9 #$FT_KILLS_DONE at t=$(($(date +%s) - t0))s of $name; restarted p1"
      next=$(($(date +%s) + $(rand_between "$gap_min" "$gap_max")))
    fi
    sleep 0.2
  done
  bench_finish "$name" "$pid"
}

steady_kills=$kills_target
flash_kills=0
if [ "$flash" = 1 ]; then
  flash_kills=$((kills_target / 3))
  steady_kills=$((kills_target - flash_kills))
fi

run_with_kills steady "$steady_kills" "$seconds" --scenario steady --rate "$rate" \
  --seconds "$seconds" --skus "$skus" --late-pct 5 --declined-pct 5 --canceled-pct 5 --seed 101
if [ "$flash" = 1 ]; then
  # The doorbuster burst (burst-factor x stock reserves within 2 s) starts 2 s in.
  run_with_kills flash "$flash_kills" "$flash_seconds" --scenario flash-sale \
    --rate "$((rate / 2))" --seconds "$flash_seconds" --skus "$skus" \
    --doorbuster-stock "$doorbuster" --burst-factor 10 --seed 102
fi

ft_prove
ft_prove_catches_plants
ft_log "PASS: survived $FT_KILLS_DONE kill -9s (processor started ${HF_STARTS[p1]} times, $FT_UNEXPECTED_EXITS exits it did by itself)"
echo "$FT_KILLS_DONE" >"$FT_WORK/kills"
