# Crash-suite library, sourced by the scenario scripts in tests/faults/. Each
# scenario gets its own topic prefix and app id on the shared broker (like the C
# harness), runs the release binaries build/holdfast, build/hfbench and
# build/hfctl as child processes (so they can be kill -9'd), acts as the
# supervisor that restarts a processor, and ends with the proof: wait until the
# system is idle, `hfctl reconcile --quiescent 1` must PASS, and
# tests/faults/check.py must find every reserve sent answered with exactly one
# outcome and reconcile's counts in agreement with hfbench's and the topics'.
#
# Every wait polls for a condition with a generous bound; a sleep is only ever a
# pause between polls or the random gap between two kills, never a proof.
#
# Artifacts (processor logs with the suite's markers, hfbench output and JSON
# summaries, verdicts, events.log) stay under build/faults/<prefix>/.

FT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$FT_ROOT"

HOLDFAST=${HOLDFAST_BIN:-build/holdfast}
HFCTL=${HFCTL_BIN:-build/hfctl}
HFBENCH=${HFBENCH_BIN:-build/hfbench}
HFPLANT=${HFPLANT_BIN:-build/hfplant}
export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}

declare -A HF_PID=()      # instance -> pid of the running holdfast
declare -A HF_STAGES=()   # instance -> --stages
declare -A HF_STARTS=()   # instance -> how many times started
declare -A HF_STARTED_MS=()
declare -A HF_WRAP=()     # instance -> command words run before holdfast (e.g. ip netns exec NS env ...)
FT_KILLS_DONE=0                # kill -9s done by the scenario
FT_UNEXPECTED_EXITS=0     # processor exits the scenario did not cause
FT_BENCH_PIDS=()
FT_BENCH_SUMMARIES=()     # files holding hfbench's JSON summary line
FT_T0=$(date +%s)

now_ms() { date +%s%3N; }

ft_log() {
  local line
  line=$(printf '[%s +%ds] %s' "${FT_NAME:-faults}" $(($(date +%s) - FT_T0)) "$*")
  echo "$line"
  [ -n "${FT_WORK:-}" ] && echo "$(date +%T.%3N) $*" >>"$FT_WORK/events.log"
  return 0
}

ft_fail() {
  ft_log "FAIL: $*"
  exit 1
}

# A JSON line in a processor's own log, so a post-mortem reads one timeline.
ft_mark() {
  local inst=$1; shift
  printf '{"ts_ms":%s,"level":"info","comp":"faults","msg":"%s"}\n' "$(now_ms)" "$*" \
    >>"$FT_WORK/$inst.log"
}

port_open() {
  local first=${HOLDFAST_BOOTSTRAP%%,*}
  local host=${first%:*} port=${first##*:}
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# ft_init NAME: prefix, app id, work dir, topics.
ft_init() {
  FT_NAME=$1
  FT_PREFIX="ft$$-$(($(now_ms) % 100000))-$FT_NAME."
  FT_APP="${FT_PREFIX}app"
  FT_WORK="build/faults/${FT_PREFIX%.}"
  mkdir -p "$FT_WORK"
  export HOLDFAST_TOPIC_PREFIX=$FT_PREFIX HOLDFAST_APP_ID=$FT_APP
  trap ft_cleanup EXIT
  trap 'exit 130' INT # so that the EXIT trap runs on Ctrl-C and kill
  trap 'exit 143' TERM
  port_open || ft_fail "no Kafka broker at $HOLDFAST_BOOTSTRAP: 'make test' starts one, or run 'make kafka-up' first"
  for b in "$HOLDFAST" "$HFCTL" "$HFBENCH" "$HFPLANT"; do
    [ -x "$b" ] || ft_fail "$b is missing: run 'make release build/hfplant'"
  done
  # FT_REPLICATION_FACTOR: the cluster scenarios' topics get 3 replicas, min ISR 2.
  # FT_TOPICS_FILE: another topics file (e.g. more partitions, so that three
  # processes each own some); default topics/topics.json.
  "$HFCTL" topics apply ${FT_TOPICS_FILE:+--file "$FT_TOPICS_FILE"} \
    ${FT_REPLICATION_FACTOR:+--replication-factor "$FT_REPLICATION_FACTOR"} \
    >"$FT_WORK/topics.json" 2>"$FT_WORK/topics.err" ||
    ft_fail "hfctl topics apply: $(cat "$FT_WORK/topics.err")"
  ft_log "prefix $FT_PREFIX, app id $FT_APP, artifacts in $FT_WORK"
}

# Stops everything this scenario started (only those pids).
ft_cleanup() {
  local rc=$?
  local inst pid
  for pid in "${FT_BENCH_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for inst in "${!HF_PID[@]}"; do
    pid=${HF_PID[$inst]}
    [ -n "$pid" ] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  return $rc
}

# ---- processors

# hf_start INSTANCE [STAGES]: holdfast run with its own state dir; the log is
# appended to across restarts.
hf_start() {
  local inst=$1 stages=${2:-counter,aggregator,gateway}
  HF_STARTS[$inst]=$((${HF_STARTS[$inst]:-0} + 1))
  HF_STAGES[$inst]=$stages
  ft_mark "$inst" "start #${HF_STARTS[$inst]}"
  # shellcheck disable=SC2086 # HF_WRAP is a list of words
  # A task stuck past the stall watchdog gets every thread's stack in the log first.
  HOLDFAST_STALL_BACKTRACE=1 ${HF_WRAP[$inst]:-} "$HOLDFAST" run --stages "$stages" --instance "$inst" --state-dir "$FT_WORK/state-$inst" \
    --config "$FT_WORK/config.json" >>"$FT_WORK/$inst.log" 2>&1 &
  HF_PID[$inst]=$!
  HF_STARTED_MS[$inst]=$(now_ms)
}

# True while the instance's process runs (a reaped or zombie child is not).
hf_alive() {
  local pid=${HF_PID[$1]:-}
  [ -n "$pid" ] || return 1
  [ -r "/proc/$pid/stat" ] || return 1
  local state
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ "$state" != Z ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--instance $1 "
}

hf_kill9() {
  local inst=$1 pid=${HF_PID[$1]}
  ft_mark "$inst" "kill -9 (#$((FT_KILLS_DONE + 1)))"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  HF_PID[$inst]=
  FT_KILLS_DONE=$((FT_KILLS_DONE + 1))
}

# hf_stop INSTANCE: SIGTERM, wait (60 s), return its exit status (or 124).
hf_stop() {
  local inst=$1 pid=${HF_PID[$1]} rc=0
  ft_mark "$inst" "SIGTERM"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$(($(date +%s) + 60))
  while kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
    if [ "$(date +%s)" -gt "$deadline" ]; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      HF_PID[$inst]=
      return 124
    fi
    sleep 0.2
  done
  wait "$pid" 2>/dev/null || rc=$?
  HF_PID[$inst]=
  return $rc
}

# The supervisor: an instance whose process has exited without the scenario
# killing it is counted, its exit status logged, and restarted.
hf_supervise() {
  local inst=$1 rc=0
  [ -n "${HF_PID[$inst]:-}" ] || return 0
  hf_alive "$inst" && return 0
  wait "${HF_PID[$inst]}" 2>/dev/null || rc=$?
  FT_UNEXPECTED_EXITS=$((FT_UNEXPECTED_EXITS + 1))
  ft_log "instance $inst exited by itself with status $rc (restart #${HF_STARTS[$inst]}); restarting it"
  ft_mark "$inst" "exited by itself with status $rc; supervisor restarts it"
  tail -n 5 "$FT_WORK/$inst.log" | sed 's/^/    | /'
  hf_start "$inst" "${HF_STAGES[$inst]}"
}

hf_supervise_all() {
  local inst
  for inst in "${!HF_STAGES[@]}"; do hf_supervise "$inst"; done
}

# Number of "partition N restored" lines of STAGE in an instance's log.
hf_restores() {
  grep -c "\"msg\":\"$2: partition [0-9]* restored" "$FT_WORK/$1.log" 2>/dev/null || true
}

# ---- load

# bench_seed ARGS...: hfbench seed (waits until the routing view shows every seeded pair).
bench_seed() {
  ft_log "hfbench seed $*"
  timeout 300 "$HFBENCH" seed "$@" >"$FT_WORK/seed.out" 2>&1 ||
    ft_fail "hfbench seed: $(tail -n 3 "$FT_WORK/seed.out")"
}

# bench_start NAME ARGS...: hfbench run in the background; BENCH_PID is set.
# Its output goes to <work>/bench-NAME.out, its summary later to bench-NAME.json.
bench_start() {
  local name=$1; shift
  ft_log "hfbench run $* ($name)"
  "$HFBENCH" run "$@" --report "$FT_WORK/bench-$name.report.json" >"$FT_WORK/bench-$name.out" 2>&1 &
  BENCH_PID=$!
  FT_BENCH_PIDS+=("$BENCH_PID")
}

# bench_wait_header NAME PID: until hfbench printed its header line (after its
# warm-up: the measured load starts then). 120 s bound.
bench_wait_header() {
  local name=$1 pid=$2 deadline=$(($(date +%s) + 120))
  until grep -q "^hfbench " "$FT_WORK/bench-$name.out" 2>/dev/null; do
    bench_alive "$pid" || return 0
    [ "$(date +%s)" -lt "$deadline" ] || ft_fail "hfbench $name did not start its load in 120 s"
    hf_supervise_all
    sleep 0.2
  done
}

bench_alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# bench_finish NAME PID: waits for hfbench, requires exit 0 (3 = duplicate
# replies disagreed or the doorbuster was oversold) and keeps its summary.
bench_finish() {
  local name=$1 pid=$2 rc=0
  while bench_alive "$pid"; do hf_supervise_all; sleep 0.5; done
  wait "$pid" || rc=$?
  local out="$FT_WORK/bench-$name.out" summary="$FT_WORK/bench-$name.json"
  grep '^{"scenario"' "$out" | tail -n 1 >"$summary" || true
  ft_log "hfbench $name exit $rc: $(cat "$summary")"
  [ "$rc" = 0 ] || ft_fail "hfbench $name exited $rc (3 = duplicate replies disagreed or oversold): $(tail -n 3 "$out")"
  [ -s "$summary" ] || ft_fail "hfbench $name printed no summary"
  FT_BENCH_SUMMARIES+=("$summary")
}

# ---- the proof

# reconcile_json FILE [ARGS...]: one reconcile run, its verdict line into FILE;
# returns hfctl's exit status.
reconcile_json() {
  local file=$1 rc=0; shift
  timeout 300 "$HFCTL" reconcile "$@" >"$file" 2>"$file.err" || rc=$?
  return $rc
}

# ft_wait_idle TIMEOUT_S: every instance running, and no topic of this
# deployment moved between two replays at least 8 s apart (longer than the
# gateway's result timeout and the sweeper's period, so a pending reservation
# or an unreleased expiry would have shown up as a move).
ft_wait_idle() {
  local timeout_s=$1 deadline=$(($(date +%s) + $1)) prev="" prev_t=0 cur t
  while :; do
    hf_supervise_all
    t=$(date +%s)
    reconcile_json "$FT_WORK/idle.json" --settle-attempts 1 || true
    cur=$(python3 tests/faults/check.py records "$FT_WORK/idle.json" 2>/dev/null || echo "unreadable-$t")
    if [ -n "$prev" ] && [ "$cur" = "$prev" ]; then
      if [ $((t - prev_t)) -ge 8 ]; then
        ft_log "idle: no topic moved for $((t - prev_t)) s"
        return 0
      fi
    else
      prev=$cur
      prev_t=$t
    fi
    [ "$t" -lt "$deadline" ] || ft_fail "not idle after ${timeout_s}s (last replay: $(head -c 600 "$FT_WORK/idle.json"))"
    sleep 2
  done
}

# ft_prove: idle, then reconcile --quiescent 1 (plus FT_RECONCILE_ARGS) must
# PASS, then check.py. A FAIL whose violations are all about the end state
# (scope snapshot/quiescent) is retried once after another idle wait: such a
# verdict may come from a replay taken before the system was really idle. A
# violation of recorded history (scope record) never goes away: no retry.
ft_prove() {
  local rc=0 attempt
  for attempt in 1 2; do
    ft_wait_idle "${FT_IDLE_TIMEOUT_S:-240}"
    rc=0
    # shellcheck disable=SC2086 # FT_RECONCILE_ARGS is a list of options
    reconcile_json "$FT_WORK/verdict-$attempt.json" --quiescent 1 --violations 50 \
      ${FT_RECONCILE_ARGS:-} || rc=$?
    cp "$FT_WORK/verdict-$attempt.json" "$FT_WORK/verdict.json"
    ft_log "reconcile --quiescent 1 ${FT_RECONCILE_ARGS:-}(attempt $attempt): exit $rc: $(head -c 300 "$FT_WORK/verdict.json")"
    [ "$rc" = 0 ] && break
    [ "$rc" = 1 ] || ft_fail "reconcile gave no verdict (exit $rc): $(cat "$FT_WORK/verdict-$attempt.json.err")"
    grep -q '"scope":"record"' "$FT_WORK/verdict.json" && break
  done
  [ "$rc" = 0 ] || ft_fail "reconcile FAIL: $(cat "$FT_WORK/verdict.json")"
  "$HFCTL" tail "${FT_PREFIX}holdfast.requests" >"$FT_WORK/requests.jsonl" 2>"$FT_WORK/tail.err" ||
    ft_fail "hfctl tail requests: $(cat "$FT_WORK/tail.err")"
  "$HFCTL" tail "${FT_PREFIX}holdfast.replies" >"$FT_WORK/replies.jsonl" 2>"$FT_WORK/tail.err" ||
    ft_fail "hfctl tail replies: $(cat "$FT_WORK/tail.err")"
  python3 tests/faults/check.py verify --verdict "$FT_WORK/verdict.json" \
    --requests "$FT_WORK/requests.jsonl" --replies "$FT_WORK/replies.jsonl" \
    ${FT_ALLOW_PARTIAL_BENCH:+--partial-bench} \
    "${FT_BENCH_SUMMARIES[@]/#/--bench=}" | tee "$FT_WORK/check.out" ||
    ft_fail "check.py found lost or duplicated reservations (see $FT_WORK/check.out)"
}

# ft_prove_expiry_allowance LAG_MS: ft_prove with the expiry bound raised to
# LAG_MS, then a strict replay (DESIGN.md's 5 s bound) that may fail on
# expiry_late and nothing else; its counts are logged. For scenarios where no
# process can release an expired hold for a while (no partition owner during a
# takeover, no broker): DESIGN.md section 10 item 5 cannot hold there.
ft_prove_expiry_allowance() {
  local rc=0 strict
  FT_RECONCILE_ARGS="--expiry-lag-max-ms $1" ft_prove
  reconcile_json "$FT_WORK/verdict-strict.json" --quiescent 1 --violations 5 || rc=$?
  strict=$(python3 tests/faults/check.py only-kinds "$FT_WORK/verdict-strict.json" expiry_late) ||
    ft_fail "strict replay (5 s expiry bound) found more than late expiries: $strict"
  ft_log "strict replay (exit $rc, 5 s expiry bound): $strict"
}

# ft_prove_catches_plants: the last step of a scenario, after its PASS. The
# reconciler that passed this history must fail it once the history is wrong:
# the processes are stopped, tests/faults/hfplant.c forges one violation of
# each kind below into the scenario's real topics (a second answer to a key, a
# counter's stock level reserving more than on hand, a ledger hold no counter
# made), and reconcile --quiescent 1 must FAIL naming every one of them and
# nothing the forgeries do not explain. The topics are then wrong on purpose:
# nothing may read them after this. FT_PLANT=0 skips it.
FT_PLANTS=(second-answer:idempotency_outcome_changed
           overbooked-level:stock_level_inconsistent
           'orphan-hold:ledger_held_vs_counter_reserved|escrow_state_vs_allotment|escrow_held_beyond_allotment')
# What the forgeries cause besides (allowed, not required): the level disagrees
# with the counter's changelog, the orphan with the counters' holds (and, never
# released, it may count as a late expiry).
FT_PLANT_ALSO=stock_level_vs_counter_state,reservation_vs_counter_holds,expiry_late
ft_prove_catches_plants() {
  [ "${FT_PLANT:-1}" = 1 ] || return 0
  local inst plant kinds="" rc=0 out
  for inst in "${!HF_PID[@]}"; do
    [ -n "${HF_PID[$inst]}" ] && { hf_stop "$inst" || true; }
  done
  HF_STAGES=() # nothing to supervise any more
  for plant in "${FT_PLANTS[@]}"; do
    "$HFPLANT" "${plant%%:*}" >>"$FT_WORK/plants.jsonl" 2>"$FT_WORK/plant.err" ||
      ft_fail "hfplant ${plant%%:*}: $(cat "$FT_WORK/plant.err")"
    kinds+=${kinds:+,}${plant#*:}
  done
  # shellcheck disable=SC2086 # FT_RECONCILE_ARGS is a list of options
  reconcile_json "$FT_WORK/verdict-planted.json" --quiescent 1 --violations 20 \
    ${FT_RECONCILE_ARGS:-} || rc=$?
  [ "$rc" = 1 ] || ft_fail "reconcile did not FAIL the planted history (exit $rc): $(head -c 600 "$FT_WORK/verdict-planted.json")"
  out=$(python3 tests/faults/check.py caught "$FT_WORK/verdict-planted.json" "$kinds" "$FT_PLANT_ALSO") ||
    ft_fail "reconcile missed a planted violation or blamed something else: $out"
  ft_log "planted violations caught (${#FT_PLANTS[@]} forged, reconcile exit 1): $out"
}

# Random integer in [lo, hi].
rand_between() { echo $(($1 + RANDOM % ($2 - $1 + 1))); }
