#!/usr/bin/env bash
# Scenario 2: restart the broker in the middle of the load.
#
# One processor (p1, all three stages) serves an hfbench steady run; FT_DOWN_AT
# seconds into the load the broker is stopped (`make kafka-down`: controlled
# shutdown) and started again (`make kafka-up`, same data dir). The scenario
# acts as holdfast's supervisor: a processor that exits (non-zero, as it does
# when a transaction cannot complete) is restarted, with a pause between tries
# while the broker is away. Whatever the processor did is reported: rode
# through, or exited and was restarted, and how often.
#
# The broker is shared with every other test on this machine: this scenario is
# only in the full `make test-faults`, and whatever happens (failure, Ctrl-C) an
# EXIT trap brings the broker back up if the scenario took it down.
#
# hfbench is a client that gives up when it cannot deliver for 10 s (its flush
# timeout): if the outage is longer, it exits 1 without a summary. Then the
# check falls back to the topics (every reserve that reached the requests topic
# answered exactly once, reconcile agreeing), nothing may be left pending but
# the reservations whose settle hfbench never sent, and a second hfbench run
# after the restart must pass in full, proving the pipeline serves again.
#
# After the broker is back, the pipeline must answer a probe reserve (hfctl)
# within FT_SERVE_TIMEOUT_S (90): a processor that is alive but serves nothing
# fails the scenario, since a supervisor that restarts on exit cannot see it.
# FT_LIVENESS_RESTART=1 instead restarts it, as a liveness probe would, to go
# on and prove the data consistent.
#
# env: FT_RATE (40), FT_SECONDS (30), FT_DOWN_AT (10), FT_SERVE_TIMEOUT_S (90),
#      FT_LIVENESS_RESTART (0), FT_BROKER_DOWN_S (extra seconds down, 0),
#      FT_KAFKA_DOWN / FT_KAFKA_UP (commands; default make -s kafka-down / kafka-up)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

rate=${FT_RATE:-40}
seconds=${FT_SECONDS:-30}
down_at=${FT_DOWN_AT:-10}
kafka_down=${FT_KAFKA_DOWN:-make -s kafka-down}
kafka_up=${FT_KAFKA_UP:-make -s kafka-up}
skus=300
broker_taken_down=0

broker_back_up() {
  local rc=$?
  if [ "$broker_taken_down" = 1 ]; then
    echo "[broker] EXIT trap: bringing the broker back up"
    $kafka_up || $kafka_up || echo "[broker] WARNING: the broker did not come back up: run make kafka-up" >&2
  fi
  ft_cleanup
  return $rc
}

ft_init broker
trap broker_back_up EXIT
echo '{}' >"$FT_WORK/config.json"

# The supervisor, rate-limited: not more than one restart per 3 s per instance.
declare -A last_restart=()
supervise() {
  local inst=p1 now
  now=$(date +%s)
  hf_alive "$inst" && return 0
  [ $((now - ${last_restart[$inst]:-0})) -ge 3 ] || return 0
  last_restart[$inst]=$now
  hf_supervise "$inst"
}

hf_start p1
bench_seed --skus "$skus" --per-sku 5 --stock 200 --doorbuster-stock 50 --seed 5

bench_start steady --scenario steady --rate "$rate" --seconds "$seconds" --skus "$skus" --seed 201
pid=$BENCH_PID
bench_wait_header steady "$pid"
t_load=$(date +%s)
while [ $(($(date +%s) - t_load)) -lt "$down_at" ]; do
  supervise
  sleep 0.5
done

ft_log "broker restart at t=$(($(date +%s) - t_load))s of the load: $kafka_down"
ft_mark p1 "broker going down"
broker_taken_down=1
t_down=$(now_ms)
$kafka_down | sed 's/^/    | /'
ft_log "broker down after $(($(now_ms) - t_down)) ms; starting it: $kafka_up"
ft_mark p1 "broker down; starting it"
if [ "${FT_BROKER_DOWN_S:-0}" -gt 0 ]; then ft_log "keeping it down for ${FT_BROKER_DOWN_S}s"; sleep "$FT_BROKER_DOWN_S"; fi
$kafka_up | sed 's/^/    | /' || $kafka_up | sed 's/^/    | /' || ft_fail "the broker did not come back up"
broker_taken_down=0
t_up=$(now_ms)
ft_mark p1 "broker up"
ft_log "broker back up: away for $((t_up - t_down)) ms; processor alive: $(hf_alive p1 && echo yes || echo no)"

# probe N: one reserve through the whole pipeline (hfctl, 5 s, one attempt); it
# expires by itself 2 s after being held. True when answered.
probe() {
  "$HFCTL" reserve --reservation "fprobe-$1" --key "fprobe-$1" --sku SKU-00001 --qty 1 \
    --ttl-ms 2000 --timeout-ms 5000 --attempts 1 >>"$FT_WORK/probe.out" 2>&1
}
# serving TIMEOUT_S: the processor answers a probe within TIMEOUT_S.
probes=0
serving() {
  local deadline=$(($(date +%s) + $1))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    supervise
    probes=$((probes + 1))
    probe "$probes" && return 0
    sleep 1
  done
  return 1
}

if serving "${FT_SERVE_TIMEOUT_S:-90}"; then
  ft_log "the pipeline serves again $(($(now_ms) - t_up)) ms after the broker came back (probe #$probes)"
else
  ft_log "processor alive: $(hf_alive p1 && echo yes || echo no), yet no probe answered in ${FT_SERVE_TIMEOUT_S:-90}s after the broker came back; its fatal errors:"
  grep -E '"level":"error"' "$FT_WORK/p1.log" | grep -E 'FATAL|fenced|stopped' | tail -n 5 | cut -c1-300 | sed 's/^/    | /'
  [ "${FT_LIVENESS_RESTART:-0}" = 1 ] ||
    ft_fail "processor hung after the broker restart: alive but not serving, so a supervisor that restarts on exit never acts (FT_LIVENESS_RESTART=1 restarts it like a liveness probe would)"
  ft_log "liveness restart (FT_LIVENESS_RESTART=1): kill -9 and restart p1"
  hf_kill9 p1
  hf_start p1
  serving "${FT_SERVE_TIMEOUT_S:-90}" || ft_fail "still not serving after a restart"
  ft_log "serving again after the liveness restart (probe #$probes)"
fi

# Until hfbench ends: supervise.
while bench_alive "$pid"; do
  supervise
  sleep 0.5
done
rc=0
wait "$pid" || rc=$?
grep '^{"scenario"' "$FT_WORK/bench-steady.out" | tail -n 1 >"$FT_WORK/bench-steady.json" || true
if [ "$rc" = 0 ] && [ -s "$FT_WORK/bench-steady.json" ]; then
  ft_log "hfbench rode through the restart: $(cat "$FT_WORK/bench-steady.json")"
  FT_BENCH_SUMMARIES+=("$FT_WORK/bench-steady.json")
else
  ft_log "hfbench (the client) gave up during the outage (exit $rc${rc:+, its flush timeout}): $(grep -v -e '^  t=' -e '^{' "$FT_WORK/bench-steady.out" | tail -n 2 | tr '\n' ' ')"
  [ "$rc" = 1 ] || ft_fail "hfbench exit $rc (3 = duplicate replies disagreed or oversold)"
  export FT_ALLOW_PARTIAL_BENCH=1
fi

# After the restart the pipeline must serve a full run again.
bench_start after --scenario steady --rate "$rate" --seconds 10 --skus "$skus" --seed 202
bench_finish after "$BENCH_PID"

# Nothing expires while the broker is away: see ft_prove_expiry_allowance.
ft_prove_expiry_allowance "${FT_OUTAGE_EXPIRY_LAG_MS:-45000}"
ft_prove_catches_plants
ft_log "PASS: broker restarted once (away $((t_up - t_down)) ms); processor started ${HF_STARTS[p1]} times, $FT_UNEXPECTED_EXITS exits by itself, $FT_KILLS_DONE liveness restarts"
