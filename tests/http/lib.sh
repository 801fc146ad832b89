# What the HTTP front's test scripts share (sourced, not run): a check's report,
# stopping processes, reading JSON, and setting up the real pipeline they test
# against. A script sets `suite` (its report's word: "http", "https", ...) and
# `work` (its temp dir) before calling any of these; the pids in `stop_pids`
# are stopped, newest first, when it exits.
#
# A check is: begin NAME; need WHAT CMD... (any number); end. A failed CMD adds
# WHAT to the check's reasons; end prints PASS or FAIL with them.

checks=0 failures=0
stop_pids=()

begin() { cur=$1 why=() began=$SECONDS; }
need() {
  local what=$1
  shift
  "$@" || why+=("$what")
}
end() {
  checks=$((checks + 1))
  if [ ${#why[@]} = 0 ]; then
    echo "PASS: $cur ($((SECONDS - began)) s)"
  else
    failures=$((failures + 1))
    echo "FAIL: $cur ($((SECONDS - began)) s)"
    printf '        - %s\n' "${why[@]}"
  fi
}
die() {
  echo "FAIL: setup: $*"
  failures=$((failures + 1))
  exit 1
}

# stop_pid PID: SIGTERM (after SIGCONT: a test may have stopped it), SIGKILL
# after 10 s; reaps it.
stop_pid() {
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -CONT "$pid" 2>/dev/null
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# The EXIT trap: stops what the script started; keeps and prints the logs of a
# failed run, removes the temp dir of a passing one. A script's own trap that
# calls it passes the exit status it got.
lib_cleanup() {
  local rc=${1:-$?} i
  for ((i = ${#stop_pids[@]} - 1; i >= 0; i--)); do stop_pid "${stop_pids[i]}"; done
  if [ "$failures" != 0 ] || [ "$rc" != 0 ]; then
    for f in "$work"/*.log; do
      [ -s "$f" ] || continue
      echo "---- $f (last 30 lines)"
      tail -n 30 "$f"
    done
    echo "$suite: logs kept in $work (prefix ${prefix-})"
  else
    rm -rf "$work"
  fi
}
lib_traps() {
  trap lib_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# jget EXPR [JSON]: EXPR (python, the document is d) over JSON (default $body).
jget() {
  python3 -c 'import json, sys
try:
    d = json.loads(sys.argv[2])
except ValueError:
    print("<not json>"); sys.exit(0)
try:
    v = eval(sys.argv[1], {"d": d})
except Exception as e:
    v = "<%s>" % type(e).__name__
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)' "$1" "${2-$body}"
}
is() { [ "$1" = "$2" ]; }
lacks() { [ -f "${*: -1}" ] && ! grep -q "$@"; } # lacks PATTERN FILE (FILE must exist)

# require_setup TOOL...: the binaries, the tools named and a broker, or die
# saying what to do.
require_setup() {
  local b t
  for b in "$HOLDFAST" "$HFCTL" "$HFBENCH"; do
    [ -x "$b" ] || die "$b is missing: run 'make release'"
  done
  for t in "$@"; do command -v "$t" >/dev/null || die "$t is needed"; done
  (exec 3<>"/dev/tcp/${HOLDFAST_BOOTSTRAP%:*}/${HOLDFAST_BOOTSTRAP##*:}") 2>/dev/null ||
    die "no Kafka broker at $HOLDFAST_BOOTSTRAP ('make kafka-up')"
}

# start_pipeline SKUS STOCK: this run's topics, `holdfast run` (all stages, its
# pid in $run_pid and stop_pids) and SKUS seeded SKUs of STOCK units each.
start_pipeline() {
  "$HFCTL" topics apply >"$work/topics.out" 2>&1 ||
    die "hfctl topics apply: $(tail -n 3 "$work/topics.out")"
  "$HOLDFAST" run --stages counter,aggregator,gateway --instance p1 \
    --state-dir "$work/state-run" >"$work/run.log" 2>&1 &
  run_pid=$!
  stop_pids+=("$run_pid")
  "$HFBENCH" seed --skus "$1" --stock "$2" >"$work/seed.log" 2>&1 ||
    die "hfbench seed: $(tail -n 3 "$work/seed.log")"
}

# start_front NAME CONFIG_JSON: a plain-HTTP `holdfast http` on a free port, with
# the webhook secrets in $webhook_secrets (may be empty), ready (/readyz 200);
# sets $port and $pid (also in stop_pids). Its log is $work/NAME.log.
start_front() {
  local front=$1 ready=
  printf '%s\n' "$2" >"$work/$front.json"
  HOLDFAST_WEBHOOK_SECRETS=${webhook_secrets-} "$HOLDFAST" http --port 0 --instance "$front" \
    --state-dir "$work/state-$front" --config "$work/$front.json" >"$work/$front.log" 2>&1 &
  pid=$! port=
  stop_pids+=("$pid")
  for _ in $(seq 300); do
    port=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$work/$front.log" | grep -o '[0-9]*$')
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || die "holdfast http $front exited: $(tail -n 5 "$work/$front.log")"
    sleep 0.1
  done
  [ -n "$port" ] || die "holdfast http $front not listening after 30 s"
  for _ in $(seq 150); do
    ready=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")
    [ "$ready" = 200 ] && return 0
    sleep 0.2
  done
  die "holdfast http $front: /readyz $ready after 30 s"
}

# reconcile_run: `hfctl reconcile --quiescent 1` over this run's topics, the verdict
# in $work/verdict.json, its exit in $rc. Asked up to 3 times: a violation of
# recorded history never goes away, but one about the end state may be a replay
# taken while the last replies were being written.
reconcile_run() {
  local attempt
  for attempt in 1 2 3; do
    rc=0
    timeout 120 "$HFCTL" reconcile --quiescent 1 --violations 20 >"$work/verdict.json" \
      2>"$work/reconcile.log" || rc=$?
    [ "$rc" = 0 ] && break
    grep -q '"scope":"record"' "$work/verdict.json" && break
    sleep 3
  done
  need "reconcile exit $rc: $(head -c 800 "$work/verdict.json") $(cat "$work/reconcile.log")" \
    is "$rc" 0
}
