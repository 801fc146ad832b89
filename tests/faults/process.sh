#!/usr/bin/env bash
# Holdfast-process faults among three processes (issue 14): a, b and c run all
# three stages with one app id and their own state dirs, over topics with
# FT_PARTITIONS (3) partitions per co-partitioned topic, so the range assignor
# gives each process a partition of every stage and each process's standby
# follows the other two (standby_replicas 1, the default; FT_CONFIG overrides
# the processes' config). Under hfbench steady load, FT_CYCLES times:
#   FT_MODE=kill  kill -9 one process (FT_VICTIM rotate: a, b, c, a, ...;
#                 random: any). After the session timeout (3 s) the other two
#                 are assigned its partitions and restore only the tail their
#                 standbys had not applied. FT_DOWN_S (6) after the kill it is
#                 restarted with the same instance id and state dir.
#   FT_MODE=stop  SIGSTOP one process for FT_DOWN_S (6 s, past the session
#                 timeout): the others take its partitions over; then SIGCONT.
#                 It finds itself out of the group: a transaction it had open
#                 is fenced or aborted, it rejoins (or exits and is restarted by
#                 the supervisor: counted), and applies nothing twice.
#   FT_MODE=mixed kill -9 in odd cycles, SIGSTOP in even ones (the reduced
#                 form for `make test`: FT_CYCLES=2).
# Each cycle waits until every partition of every stage has an owner again and
# the load flows through all three before the next fault.
#
# Takeover time of a partition: from the fault (kill -9 or SIGSTOP, epoch ms)
# to the "first record applied after assignment" line of its new owner.
# Then: idle, reconcile --quiescent 1 with the strict 5 s expiry bound
# (FT_EXPIRY_LAG_MS raises it: the strict replay is then reported, and may
# fail on expiry_late only), check.py. The report line (and report.json):
# faults survived, takeover p50/max, expiry lag max/p99 (gateway, counter),
# reserves unanswered, reconcile verdict.
#
# env: FT_MODE (kill), FT_CYCLES (3), FT_VICTIM (rotate), FT_DOWN_S (6),
#      FT_GAP_S (3: the pause before each fault, once all partitions are owned),
#      FT_RATE (40), FT_SECONDS (load; default 30 + 20 per cycle),
#      FT_PARTITIONS (3), FT_CONFIG ('{}'), FT_EXPIRY_LAG_MS (unset: strict)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mode=${FT_MODE:-kill}
cycles=${FT_CYCLES:-3}
victims=${FT_VICTIM:-rotate}
down_s=${FT_DOWN_S:-6}
gap_s=${FT_GAP_S:-3}
rate=${FT_RATE:-40}
seconds=${FT_SECONDS:-$((30 + 20 * cycles))}
parts=${FT_PARTITIONS:-3}
skus=300
insts=(a b c)
stage_names=(counter gateway aggregator)
case $mode in kill | stop | mixed) ;; *) echo "FT_MODE must be kill, stop or mixed" >&2; exit 2 ;; esac

# The topics file with $parts partitions for every topic but the dead letters.
mkdir -p build/faults
topics_file="build/faults/topics-$$-p$parts.json"
python3 - "$parts" >"$topics_file" <<'EOF'
import json, sys
doc = json.load(open("topics/topics.json"))
for t in doc["topics"]:
    if t["name"] != "holdfast.dead-letters":
        t["partitions"] = int(sys.argv[1])
json.dump(doc, sys.stdout, indent=1)
EOF
export FT_TOPICS_FILE=$topics_file
ft_init "process-$mode"
rm -f "$topics_file"
default_config='{}'
echo "${FT_CONFIG:-$default_config}" >"$FT_WORK/config.json"

log_lines() { wc -l <"$FT_WORK/$1.log"; }

# current INSTANCE STAGE: the partitions of STAGE the instance holds now: those
# restored since its last start and not released since (the revoke line names
# them: all of them under the classic protocol's eager rebalances, some under
# the consumer protocol's incremental ones).
current() {
  awk -v st="$2" '
    index($0, "\"msg\":\"" st ": ") && / partitions revoked/ {
      s = $0; sub(/.*\(released:/, "", s); sub(/\).*/, "", s)
      n = split(s, gone, " "); for (k = 1; k <= n; k++) delete have[gone[k]] }
    index($0, "\"comp\":\"faults\"") && /"msg":"start #/ { delete have }
    index($0, "\"msg\":\"" st ": partition ") && / restored: / {
      s = $0; sub(/.*partition /, "", s); sub(/ .*/, "", s); have[s] = 1 }
    END { for (p in have) print p }' "$FT_WORK/$1.log" 2>/dev/null | sort -n | tr '\n' ' '
}

# stable: every live instance holds at least one partition of every stage and
# every partition of every stage has exactly one holder.
stable() {
  local st i n all
  for st in "${stage_names[@]}"; do
    all=""
    for i in "${insts[@]}"; do
      hf_alive "$i" || return 1
      n=$(current "$i" "$st")
      [ -n "$n" ] || return 1
      all="$all $n"
    done
    [ "$(echo "$all" | tr ' ' '\n' | grep -c .)" = "$parts" ] || return 1
    [ "$(echo "$all" | tr ' ' '\n' | grep . | sort -un | wc -l)" = "$parts" ] || return 1
  done
}

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

# first_applied STAGE P SINCE_MS: the earliest at_ms of a "first record applied
# after assignment" line for STAGE partition P at or after SINCE_MS in any log.
first_applied() {
  cat "$FT_WORK"/[abc].log 2>/dev/null |
    sed -n "s/.*\"msg\":\"$1: partition $2 first record applied after assignment: at_ms=\([0-9]*\) .*/\1/p" |
    awk -v since="$3" '$1 >= since' | sort -n | head -n 1
}

# taken_over SPEC SINCE_MS: every "stage:partition" of SPEC has a first record
# applied since SINCE_MS.
taken_over() {
  local sp
  for sp in $1; do
    [ -n "$(first_applied "${sp%%:*}" "${sp##*:}" "$2")" ] || return 1
  done
}

pick_victim() {
  if [ "$victims" = random ]; then
    echo "${insts[$((RANDOM % 3))]}"
  else
    echo "${insts[$(((${1} - 1) % 3))]}"
  fi
}

for i in "${insts[@]}"; do hf_start "$i"; done
wait_for 180 "a, b and c each hold a partition of every stage" stable
bench_seed --skus "$skus" --per-sku 5 --stock 200 --doorbuster-stock 50 --seed 9

bench_start steady --scenario steady --rate "$rate" --seconds "$seconds" --skus "$skus" --seed 401
pid=$BENCH_PID
bench_wait_header steady "$pid"
t_load=$(date +%s)

takeovers=()   # ms, one per partition taken over
faults=0
for cycle in $(seq "$cycles"); do
  sleep "$gap_s" # load flowing through all three
  wait_for 120 "every partition of every stage has one owner (cycle $cycle)" stable
  victim=$(pick_victim "$cycle")
  fault=$mode
  [ "$mode" != mixed ] || fault=$([ $((cycle % 2)) = 1 ] && echo kill || echo stop)
  spec=""
  for st in "${stage_names[@]}"; do
    for p in $(current "$victim" "$st"); do spec="$spec $st:$p"; done
  done
  fault_ms=$(now_ms)
  if [ "$fault" = kill ]; then
    hf_kill9 "$victim"
  else
    ft_mark "$victim" "SIGSTOP (#$((faults + 1)))"
    kill -STOP "${HF_PID[$victim]}"
  fi
  faults=$((faults + 1))
  ft_log "cycle $cycle: $fault $victim (held$spec) at t=$(($(date +%s) - t_load))s of the load"
  wait_for 90 "the others took over$spec" taken_over "$spec" "$fault_ms"
  line="cycle $cycle takeover ms:"
  for sp in $spec; do
    ms=$(($(first_applied "${sp%%:*}" "${sp##*:}" "$fault_ms") - fault_ms))
    takeovers+=("$ms")
    line="$line $sp=$ms"
  done
  ft_log "$line"
  left=$((fault_ms / 1000 + down_s - $(date +%s)))
  [ "$left" -le 0 ] || sleep "$left"
  if [ "$fault" = kill ]; then
    hf_start "$victim"
  else
    ft_mark "$victim" "SIGCONT"
    kill -CONT "${HF_PID[$victim]}"
  fi
done
wait_for 120 "every partition of every stage has one owner after the last fault" stable
load_left=$((t_load + seconds - $(date +%s)))
[ "$load_left" -ge 5 ] || ft_log "warning: the cycles outlasted the load by $((-load_left)) s (raise FT_SECONDS)"

bench_finish steady "$pid"
if [ -n "${FT_EXPIRY_LAG_MS:-}" ]; then
  ft_prove_expiry_allowance "$FT_EXPIRY_LAG_MS"
  verdict_file="$FT_WORK/verdict-strict.json"
else
  ft_prove # the strict 5 s expiry bound
  verdict_file="$FT_WORK/verdict.json"
fi

report=$(python3 - "$verdict_file" "$FT_WORK/bench-steady.json" "$mode" "$faults" \
  "$FT_UNEXPECTED_EXITS" "${takeovers[@]}" <<'EOF'
import json, sys
verdict = json.loads(next(l for l in open(sys.argv[1]) if l.startswith("{")))
bench = json.loads(open(sys.argv[2]).read())
ms = sorted(int(x) for x in sys.argv[6:])
c = verdict.get("counts", {})
out = {
    "mode": sys.argv[3], "faults_survived": int(sys.argv[4]),
    "exits_by_themselves": int(sys.argv[5]), "takeovers": len(ms),
    "takeover_ms_p50": ms[(len(ms) - 1) // 2] if ms else None,
    "takeover_ms_max": ms[-1] if ms else None,
    "gateway_expiry_lag_ms_p99": c.get("gateway_expiry_lag_ms_p99"),
    "gateway_expiry_lag_ms_max": c.get("gateway_expiry_lag_ms_max"),
    "counter_expiry_lag_ms_p99": c.get("counter_expiry_lag_ms_p99"),
    "counter_expiry_lag_ms_max": c.get("counter_expiry_lag_ms_max"),
    "expiries": c.get("expiries"),
    "reserves_unanswered": bench.get("without_reply"),
    "reconcile": verdict.get("verdict"),
}
print(json.dumps(out))
EOF
)
echo "$report" >"$FT_WORK/report.json"
ft_prove_catches_plants
ft_log "report: $report"
ft_log "PASS: $faults $mode faults of a process among 3, $FT_UNEXPECTED_EXITS exits by themselves"
