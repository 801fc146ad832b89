#!/usr/bin/env bash
# Cluster faults (issue 14): the pipeline on the local 3-broker, 3-controller cluster
# (tools/kafka/cluster-up.sh), topics with replication factor 3 and min ISR 2, two
# holdfast processes (a and b, all three stages, one app id) under an hfbench steady
# load, and FT_FAULTS faults of one kind (FT_FAULT) while the load runs:
#
#   leader      kill -9 of the broker that leads the most partitions of this run's
#               topics (TopicCommand --describe); restarted FT_DOWN_S later
#   controller  kill -9 of the active controller (MetadataQuorumCommand: the quorum's
#               LeaderId); restarted FT_DOWN_S later
#   restart     a clean restart of a broker (SIGTERM: controlled shutdown, leaderships
#               moved first), each fault the next broker in turn
#   netsplit    process a runs in the network namespace hfcl and reaches the brokers
#               only over the veth link cluster-up.sh made; the link is cut (its host
#               side set down: a's packets go nowhere, no reset, like a pulled cable)
#               for FT_CUT_S, longer than the session timeout, so b takes a's
#               partitions over; then healed, and a rejoins
#
# After each fault the scenario sends probe rounds (FT_PROBES reserves at once, each of
# several SKUs, so they land on several partitions of each stage; hfctl, one attempt)
# until a whole round is answered: "answered again after" is the time from the fault to
# the end of that round (resolution about a second). Before the next fault the
# cluster is whole again (every node up, no under-replicated partition).
#
# The end is the crash suite's proof (lib.sh): idle, `hfctl reconcile --quiescent 1`
# PASS with the expiry bound raised to FT_EXPIRY_LAG_MS (a hold expiring while its
# partition has no leader or no owner is released late), check.py (every request
# answered exactly once, counts agreeing with hfbench), and a strict replay (5 s
# bound) that may fail on expiry_late only; its expiry lag is reported. The last line:
#   PASS: <fault> faults N/N, answered again p50 X ms max Y ms, expiry lag p99/max,
#         reserves unanswered 0, reconcile PASS
# and build/faults/<prefix>/cluster-summary.json holds the same figures.
#
# Needs the cluster up (tools/kafka/cluster-up.sh; `make test-faults-cluster` brings
# its own up and down) and, for netsplit, root and the namespace hfcl.
#
# env: FT_FAULT (leader), FT_FAULTS (2), FT_RATE (40 reserves/s), FT_SECONDS (load;
#      default 25 + 45 per fault), FT_DOWN_S (10), FT_CUT_S (20), FT_GAP_S (5, after
#      the cluster is whole), FT_PROBES (4), FT_EXPIRY_LAG_MS (40000)
set -euo pipefail
FT_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
root=$FT_ROOT
# shellcheck source=tools/kafka/cluster-env.sh
source "$FT_ROOT/tools/kafka/cluster-env.sh"
export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-$(cluster_bootstrap)}
export FT_REPLICATION_FACTOR=3
source "$(dirname "$0")/lib.sh"

fault=${FT_FAULT:-leader}
faults=${FT_FAULTS:-2}
rate=${FT_RATE:-40}
seconds=${FT_SECONDS:-$((25 + 45 * faults))}
down_s=${FT_DOWN_S:-10}
cut_s=${FT_CUT_S:-20}
gap_s=${FT_GAP_S:-5}
probes_per_round=${FT_PROBES:-4}
skus=300
libs=$FT_ROOT/.cache/kafka/libs
case $fault in leader | controller | restart | netsplit) ;; *) echo "FT_FAULT: leader|controller|restart|netsplit" >&2; exit 2 ;; esac

# A Kafka command-line tool (small heap, quick JIT, warnings only).
kafka_tool() {
  local cls=$1; shift
  java -cp "$libs/*" -Dlog4j2.configurationFile="$FT_ROOT/tools/kafka/log4j2.xml" \
    -Dkafka.logs.dir="$FT_WORK" -XX:TieredStopAtLevel=1 -Xmx128m "$cls" \
    --bootstrap-server "$HOLDFAST_BOOTSTRAP" "$@" 2>>"$FT_WORK/kafka-tools.err"
}

# The broker node (b1..b3) leading the most partitions of this run's topics.
busiest_leader() {
  kafka_tool org.apache.kafka.tools.TopicCommand --describe --topic "${FT_PREFIX//./\\.}.*" |
    sed -n 's/.*Partition: [0-9]*[[:space:]]*Leader: \([0-9]*\).*/\1/p' | sort | uniq -c |
    sort -rn | awk 'NR == 1 {print $2}'
}

active_controller() { bash "$FT_ROOT/tools/kafka/cluster-up.sh" --leader; }

# Whole: every node runs and no partition (holdfast's or internal) is under-replicated.
cluster_whole() {
  local n
  for n in $(cluster_nodes); do [ -n "$(node_pid "$n")" ] || return 1; done
  [ -z "$(kafka_tool org.apache.kafka.tools.TopicCommand --describe --under-replicated-partitions)" ]
}

wait_whole() {
  local deadline=$(($(date +%s) + 120))
  until cluster_whole; do
    [ "$(date +%s)" -lt "$deadline" ] || ft_fail "the cluster is not whole again 120 s after the fault"
    hf_supervise_all
    sleep 1
  done
}

node_restart() {
  bash "$FT_ROOT/tools/kafka/cluster-up.sh" "$1" >>"$FT_WORK/cluster-up.out" 2>&1 ||
    ft_fail "cluster-up.sh $1 failed: $(tail -n 3 "$FT_WORK/cluster-up.out")"
  ft_log "$1 restarted"
}

node_kill9() {
  local node=$1 pid
  pid=$(node_pid "$node")
  [ -n "$pid" ] || ft_fail "$node is not running"
  kill -KILL "$pid"
  while [ -n "$(node_pid "$node")" ]; do sleep 0.1; done
}

node_stop() {
  local node=$1 pid deadline=$(($(date +%s) + 60))
  pid=$(node_pid "$node")
  [ -n "$pid" ] || ft_fail "$node is not running"
  kill -TERM "$pid"
  while [ -n "$(node_pid "$node")" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || ft_fail "$node did not stop within 60 s of SIGTERM"
    sleep 0.2
  done
}

# ---- probes: one round is FT_PROBES reserves sent at once, each of three SKUs
probe_round=0
probe_sent=0
probe_answered=0
probe_round_ok() {
  probe_round=$((probe_round + 1))
  local j pids=() ok=0 s1 s2 s3
  for j in $(seq "$probes_per_round"); do
    s1=$(printf 'SKU-%05d' $(((probe_round * 7 + j * 3) % skus + 1)))
    s2=$(printf 'SKU-%05d' $(((probe_round * 11 + j * 5 + 1) % skus + 1)))
    s3=$(printf 'SKU-%05d' $(((probe_round * 13 + j * 17 + 2) % skus + 1)))
    "$HFCTL" reserve --reservation "cprobe-$probe_round-$j" --key "cprobe-$probe_round-$j" \
      --lines "$s1:1,$s2:1,$s3:1" --ttl-ms 2000 --timeout-ms 2500 --attempts 1 \
      >>"$FT_WORK/probe.out" 2>&1 &
    pids+=($!)
  done
  probe_sent=$((probe_sent + probes_per_round))
  for j in "${pids[@]}"; do
    # exit 3: answered, but not HELD (a rejection is an answer too)
    local rc=0
    wait "$j" || rc=$?
    if [ "$rc" = 0 ] || [ "$rc" = 3 ]; then ok=$((ok + 1)); fi
  done
  probe_answered=$((probe_answered + ok))
  [ "$ok" = "$probes_per_round" ]
}

# answered_again T0_MS FAULT# WHAT: probe rounds until one is answered in full (180 s
# bound); the ms from T0_MS to the end of that round is recorded. Not in a subshell:
# it supervises the processes and counts the probes.
recovery_ms=()
answered_again() {
  local t0=$1 deadline=$(($(date +%s) + 180)) ms
  until probe_round_ok; do
    [ "$(date +%s)" -lt "$deadline" ] || ft_fail "no probe round answered within 180 s of the fault"
    hf_supervise_all
    sleep 0.5
  done
  ms=$(($(now_ms) - t0))
  [ $# -lt 2 ] && return 0
  recovery_ms+=("$ms")
  ft_log "fault #$2 ($3): reserves answered again after $ms ms"
}

# ---- the network namespace (netsplit)
link_cut=0
heal_link() {
  if [ "$link_cut" = 1 ]; then
    ip link set "$cluster_veth_host" up || true
    link_cut=0
  fi
}
cluster_cleanup() {
  local rc=$?
  heal_link
  ft_cleanup
  return $rc
}

ft_init "cluster-$fault"
trap cluster_cleanup EXIT
echo '{}' >"$FT_WORK/config.json"
ft_log "cluster $HOLDFAST_BOOTSTRAP; topics with replication factor 3, min.insync.replicas 2"

if [ "$fault" = netsplit ]; then
  [ "$(id -u)" = 0 ] || ft_fail "netsplit needs root (ip netns, ip link)"
  ip netns list | grep -qw "$cluster_netns" ||
    ft_fail "no namespace $cluster_netns: start the cluster as root (tools/kafka/cluster-up.sh makes it)"
  ip link set "$cluster_veth_host" up
  # Only its own addresses: the namespace holds lo and the veth end, no default route.
  [ -z "$(ip netns exec "$cluster_netns" ip route show default)" ] ||
    ft_fail "namespace $cluster_netns has a default route; it must reach nothing but the cluster"
  HF_WRAP[a]="ip netns exec $cluster_netns env HOLDFAST_BOOTSTRAP=$(cluster_ns_bootstrap)"
  ft_log "process a runs in namespace $cluster_netns, bootstrap $(cluster_ns_bootstrap)"
fi

hf_start a
hf_start b
bench_seed --skus "$skus" --per-sku 5 --stock 200 --doorbuster-stock 50 --seed 11
# Both own partitions before the load: the probes' baseline.
t=$(now_ms)
answered_again "$t"
ft_log "pipeline answers (baseline probe round)"

bench_start steady --scenario steady --rate "$rate" --seconds "$seconds" --skus "$skus" --seed 401
pid=$BENCH_PID
bench_wait_header steady "$pid"
t_load=$(date +%s)
sleep "$gap_s"

restart_turn=0
for i in $(seq "$faults"); do
  left=$((t_load + seconds - $(date +%s)))
  if [ "$left" -lt 25 ]; then
    ft_log "only $left s of load left: no fault #$i (raise FT_SECONDS)"
    break
  fi
  case $fault in
    leader)
      id=$(busiest_leader)
      [ -n "$id" ] || ft_fail "no partition leader found (TopicCommand: $(tail -n 2 "$FT_WORK/kafka-tools.err"))"
      node=$(node_of_id "$id")
      t0=$(now_ms)
      node_kill9 "$node"
      ft_mark a "kill -9 of broker $node (leader of the most partitions)"
      ft_log "fault #$i: kill -9 of $node, which led the most partitions of this run"
      answered_again "$t0" "$i" "$node killed"
      sleep_left=$((down_s - ($(now_ms) - t0) / 1000))
      [ "$sleep_left" -le 0 ] || sleep "$sleep_left"
      node_restart "$node"
      ;;
    controller)
      id=$(active_controller)
      [ -n "$id" ] || ft_fail "no active controller found (MetadataQuorumCommand)"
      node=c$id
      t0=$(now_ms)
      node_kill9 "$node"
      ft_mark a "kill -9 of the active controller $node"
      ft_log "fault #$i: kill -9 of the active controller $node"
      answered_again "$t0" "$i" "$node killed"
      ft_log "new active controller: c$(active_controller)"
      sleep_left=$((down_s - ($(now_ms) - t0) / 1000))
      [ "$sleep_left" -le 0 ] || sleep "$sleep_left"
      node_restart "$node"
      ;;
    restart)
      restart_turn=$((restart_turn % cluster_brokers + 1))
      node=b$restart_turn
      t0=$(now_ms)
      ft_mark a "SIGTERM of broker $node"
      node_stop "$node"
      ft_log "fault #$i: $node stopped cleanly in $(($(now_ms) - t0)) ms; starting it again"
      node_restart "$node"
      answered_again "$t0" "$i" "$node restarted"
      ;;
    netsplit)
      t0=$(now_ms)
      ip link set "$cluster_veth_host" down
      link_cut=1
      ft_mark a "network cut: $cluster_veth_host down"
      ft_log "fault #$i: link to namespace $cluster_netns cut (process a alone in it)"
      answered_again "$t0" "$i" "a cut off, b takes over"
      sleep_left=$((cut_s - ($(now_ms) - t0) / 1000))
      [ "$sleep_left" -le 0 ] || sleep "$sleep_left"
      mark=$(wc -l <"$FT_WORK/a.log")
      heal_link
      t1=$(now_ms)
      ft_mark a "network healed"
      ft_log "link healed after $(((t1 - t0) / 1000)) s; process a alive: $(hf_alive a && echo yes || echo no)"
      # Back: a (or its restart) restored a partition of its own again after the heal.
      deadline=$(($(date +%s) + 120))
      until tail -n "+$((mark + 1))" "$FT_WORK/a.log" | grep -q '"msg":"[a-z]*: partition [0-9]* restored'; do
        [ "$(date +%s)" -lt "$deadline" ] || ft_fail "process a owns no partition 120 s after the heal"
        hf_supervise_all
        sleep 0.5
      done
      ft_log "process a owns partitions again $(($(now_ms) - t1)) ms after the heal"
      answered_again "$t1" "$i" "healed, a rejoined"
      ;;
  esac
  FT_KILLS_DONE=$((FT_KILLS_DONE + 1))
  wait_whole
  ft_log "cluster whole again after fault #$i"
  sleep "$gap_s"
done

bench_finish steady "$pid"
ft_prove_expiry_allowance "${FT_EXPIRY_LAG_MS:-40000}"

# ---- figures
read -r p50 max < <(printf '%s\n' "${recovery_ms[@]}" | sort -n |
  awk '{v[NR] = $1} END {if (NR == 0) print "- -"; else print v[int((NR + 1) / 2)], v[NR]}')
lag=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); c=v.get("counts",{}); print(c.get("gateway_expiry_lag_ms_p99"), c.get("gateway_expiry_lag_ms_max"))' "$FT_WORK/verdict-strict.json")
unanswered=$(python3 -c 'import json,sys; print(sum(json.loads(open(p).read()).get("without_reply",0) for p in sys.argv[1:]))' "${FT_BENCH_SUMMARIES[@]}")
python3 - "$FT_WORK/cluster-summary.json" <<EOF
import json, sys
json.dump({"fault": "$fault", "faults_planned": $faults, "faults_survived": $FT_KILLS_DONE,
           "answered_again_ms": [$(IFS=,; echo "${recovery_ms[*]}")],
           "answered_again_ms_p50": "$p50", "answered_again_ms_max": "$max",
           "expiry_lag_ms_p99": "${lag% *}", "expiry_lag_ms_max": "${lag#* }",
           "reserves_unanswered": $unanswered, "probes_sent": $probe_sent,
           "probes_answered_in_time": $probe_answered,
           "processor_exits_by_themselves": $FT_UNEXPECTED_EXITS,
           "reconcile": "PASS"}, open(sys.argv[1], "w"))
EOF
[ "$FT_KILLS_DONE" -ge 1 ] || ft_fail "no fault injected"
ft_log "PASS: $fault faults $FT_KILLS_DONE/$faults, answered again p50 ${p50} ms max ${max} ms, expiry lag p99 ${lag% *} ms max ${lag#* } ms, reserves unanswered $unanswered, processor exits by themselves $FT_UNEXPECTED_EXITS, reconcile PASS"
