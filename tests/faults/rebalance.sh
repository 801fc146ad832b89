#!/usr/bin/env bash
# Scenario 3: two processors share the partitions; kill -9 one so its partitions
# move to the other, restart it so they move back.
#
# Instances a and b run all three stages with the same app id and their own
# state dirs, so each stage's consumer group has two members and the range
# assignor splits the partitions. Under hfbench steady load:
#   1. kill -9 a. Consumers use static membership (group.instance.id = the
#      transactional id), so a's partitions stay unowned until the broker drops
#      it after session.timeout.ms (10 s); then b is assigned every partition of
#      every stage and restores a's from the changelogs (b never held them).
#      Waited for: b logs "partition N restored" for every partition of every
#      stage after the kill.
#   2. restart a (same instance id and state dir): it rejoins, partitions move
#      back (a restores incrementally from the changelog offsets it stored).
#      Waited for: a restores at least one partition of every stage, b revokes.
#   3. with FT_CYCLES=2 (the full suite), the same with the roles swapped.
# A request whose partition is unowned waits for the takeover, so the kill
# happens early in the load: its replies come 10-20 s late but within hfbench's
# window. Then: idle, reconcile --quiescent 1 PASS, check.py (see lib.sh).
#
# env: FT_CYCLES (1), FT_RATE (40), FT_SECONDS (load; default 22 + 16 per cycle)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

cycles=${FT_CYCLES:-1}
rate=${FT_RATE:-40}
seconds=${FT_SECONDS:-$((22 + 16 * cycles))}
skus=300
# stage:partitions of its changelog, as topics/topics.json sizes them
parts_of() { python3 -c 'import json,sys; print(next(t["partitions"] for t in json.load(open("topics/topics.json"))["topics"] if t["name"]==sys.argv[1]))' "$1"; }
stages=("counter:$(parts_of holdfast.counter-changelog)" "gateway:$(parts_of holdfast.gateway-changelog)" "aggregator:$(parts_of holdfast.aggregator-changelog)")

ft_init rebalance
echo '{}' >"$FT_WORK/config.json"

# restored_since INSTANCE STAGE LINE: the distinct partitions of STAGE the
# instance restored after line LINE of its log, space-separated.
restored_since() {
  tail -n "+$(($3 + 1))" "$FT_WORK/$1.log" 2>/dev/null |
    sed -n "s/.*\"msg\":\"$2: partition \([0-9]*\) restored.*/\1/p" | sort -un | tr '\n' ' '
}
log_lines() { wc -l <"$FT_WORK/$1.log"; }

# wait_for TIMEOUT_S WHAT COMMAND...: polls COMMAND every 0.5 s.
wait_for() {
  local timeout_s=$1 what=$2 t0 deadline; shift 2
  t0=$(date +%s)
  deadline=$((t0 + timeout_s))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || ft_fail "$what: not within ${timeout_s}s"
    hf_supervise_all
    sleep 0.5
  done
  ft_log "$what (after $(($(date +%s) - t0)) s)"
}

# owns_some INSTANCE LINE: restored at least one partition of every stage since LINE.
owns_some() {
  local s
  for s in "${stages[@]}"; do
    [ -n "$(restored_since "$1" "${s%%:*}" "$2")" ] || return 1
  done
}

# owns_all INSTANCE LINE: restored every partition of every stage since LINE.
owns_all() {
  local s n
  for s in "${stages[@]}"; do
    n=$(restored_since "$1" "${s%%:*}" "$2" | wc -w)
    [ "$n" -ge "${s##*:}" ] || return 1
  done
}

# revoked_since INSTANCE LINE: logged a revocation of every stage since LINE.
revoked_since() {
  local s
  for s in "${stages[@]}"; do
    tail -n "+$(($2 + 1))" "$FT_WORK/$1.log" | grep -q "\"msg\":\"${s%%:*}: [0-9]* partitions revoked" || return 1
  done
}

hf_start a
hf_start b
wait_for 120 "a and b both own partitions of every stage" eval 'owns_some a 0 && owns_some b 0'
bench_seed --skus "$skus" --per-sku 5 --stock 200 --doorbuster-stock 50 --seed 9

bench_start steady --scenario steady --rate "$rate" --seconds "$seconds" --skus "$skus" --seed 301
pid=$BENCH_PID
bench_wait_header steady "$pid"
t_load=$(date +%s)

victim=a other=b
for cycle in $(seq "$cycles"); do
  sleep 3 # load flowing through both
  mark=$(log_lines "$other")
  t_kill=$(date +%s)
  hf_kill9 "$victim"
  ft_log "kill -9 $victim at t=$((t_kill - t_load))s of the load"
  wait_for 90 "$other took over every partition after the kill of $victim (session timeout 10 s)" \
    owns_all "$other" "$mark"
  ft_log "takeover took $(($(date +%s) - t_kill)) s"
  mark_v=$(log_lines "$victim")
  mark_o=$(log_lines "$other")
  hf_start "$victim"
  wait_for 90 "partitions moved back to $victim" \
    eval "owns_some $victim $mark_v && revoked_since $other $mark_o"
  ft_log "$victim restored $(for s in "${stages[@]}"; do printf '%s[%s] ' "${s%%:*}" "$(restored_since "$victim" "${s%%:*}" "$mark_v")"; done)"
  tmp=$victim victim=$other other=$tmp
done
load_left=$((t_load + seconds - $(date +%s)))
[ "$load_left" -ge 5 ] || ft_log "warning: the cycles outlasted the load by $((-load_left)) s (raise FT_SECONDS)"

bench_finish steady "$pid"

# A hold expiring while its partition has no owner (session timeout 10 s +
# takeover) is released late: see ft_prove_expiry_allowance.
ft_prove_expiry_allowance "${FT_FAILOVER_EXPIRY_LAG_MS:-20000}"
ft_prove_catches_plants
ft_log "PASS: $cycles kill/takeover/move-back cycle(s), $FT_KILLS_DONE kill -9s, $FT_UNEXPECTED_EXITS exits by themselves"
