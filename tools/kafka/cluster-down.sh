#!/usr/bin/env bash
# Stops the local test cluster that cluster-up.sh started (only its pids): SIGTERM to
# the brokers, then to the controllers (a broker shuts down cleanly only while a
# controller answers), SIGKILL for a node still up after 30 s. Idempotent.
#
# usage: tools/kafka/cluster-down.sh [--wipe]   (--wipe: also delete the data dirs and
#        the network namespace hfcl with its veth link)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tools/kafka/cluster-env.sh
source "$here/cluster-env.sh"
stop_timeout_s=30

# stop NODE...: SIGTERM to all of them, then wait.
stop() {
  local n pid pids=() names=()
  for n in "$@"; do
    pid=$(node_pid "$n")
    [ -n "$pid" ] || continue
    kill -CONT "$pid" 2>/dev/null || true # a scenario may have stopped it
    kill -TERM "$pid"
    pids+=("$pid")
    names+=("$n")
  done
  local i
  for i in "${!pids[@]}"; do
    for _ in $(seq $((stop_timeout_s * 4))); do
      [ -n "$(node_pid "${names[$i]}")" ] || break
      sleep 0.25
    done
    if [ -n "$(node_pid "${names[$i]}")" ]; then
      echo "cluster-down: ${names[$i]} (pid ${pids[$i]}) ignored SIGTERM for ${stop_timeout_s}s; killing it"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
      while [ -n "$(node_pid "${names[$i]}")" ]; do sleep 0.1; done
    fi
    echo "cluster-down: stopped ${names[$i]} (pid ${pids[$i]})"
    rm -f "$(node_pidfile "${names[$i]}")"
  done
}

# Both counts: a cluster formatted with 3 controllers is stopped whatever the env says.
controllers=$(cat "$cluster_home/controllers" 2>/dev/null || echo "$cluster_controllers")
stop b1 b2 b3
stop $(seq -f 'c%g' "$controllers")
echo "cluster down"

if [ "${1:-}" = "--wipe" ]; then
  if ip netns list 2>/dev/null | grep -qw "$cluster_netns"; then
    ip netns del "$cluster_netns" # takes the veth pair with it
  fi
  ip link del "$cluster_veth_host" 2>/dev/null || true
  rm -rf "$cluster_home"
  echo "cluster down: wiped $cluster_home and namespace $cluster_netns"
fi
