#!/usr/bin/env bash
# Starts the local test cluster: 3 KRaft controllers and 3 brokers, six JVMs on
# 127.0.0.1 from the jars kafka-up.sh uses, each with its own ports and data dir under
# .cache/kafka-cluster/ (layout: cluster-env.sh). For the cluster fault scenarios
# (tests/faults/cluster.sh, `make test-faults-cluster`); the shared broker on 9092 is
# never touched. Idempotent, and also the way back after a fault: only the nodes not
# running are started (the named ones, or all), and it returns when every broker has
# started (registered with the active controller) and the quorum has a leader. Prints
# the bootstrap list.
#
# When run as root it also makes the network namespace hfcl joined to the host by a
# veth pair (hfcl-h 10.213.0.1/30 here, hfcl-n 10.213.0.2/30 inside); the brokers get a
# second listener on 10.213.0.1, so a holdfast process run in the namespace reaches them
# only over that link. Nothing else is routed: the namespace has no default route.
#
# usage: tools/kafka/cluster-up.sh [NODE...]      (NODE: c1..c3, b1..b3)
# env:   HOLDFAST_CLUSTER_CONTROLLERS (3, or 1), HOLDFAST_CLUSTER_NETNS (1 as root; 0: none)
#        CLUSTER_BROKER_HEAP (-Xmx448m -Xms448m), CLUSTER_CONTROLLER_HEAP (-Xmx256m -Xms256m)
#        CLUSTER_NICE (5: the JVMs are reniced so benchmarks beside them suffer less)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
me=cluster-up
# shellcheck source=tools/kafka/common.sh
source "$here/common.sh"
# shellcheck source=tools/kafka/cluster-env.sh
source "$here/cluster-env.sh"
start_timeout_s=120
# Small heaps and few GC/JIT threads: six JVMs on 2 cores and beside the processes
# under test.
jvm_opts=(-XX:ParallelGCThreads=1 -XX:ConcGCThreads=1 -XX:CICompilerCount=2)

netns_wanted() { [ "${HOLDFAST_CLUSTER_NETNS:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}" = 1 ]; }

# The namespace and its link, unless they exist. The link is brought up here; a
# scenario that cut it puts it back up itself (its EXIT trap).
netns_make() {
  command -v ip >/dev/null || die "HOLDFAST_CLUSTER_NETNS=1 needs iproute2 (ip)"
  if ! ip netns list | grep -qw "$cluster_netns"; then
    ip netns add "$cluster_netns"
  fi
  if ! ip link show "$cluster_veth_host" >/dev/null 2>&1; then
    ip link add "$cluster_veth_host" type veth peer name "$cluster_veth_ns"
    ip link set "$cluster_veth_ns" netns "$cluster_netns"
    sysctl -qw "net.ipv6.conf.$cluster_veth_host.disable_ipv6=1" 2>/dev/null || true
    ip addr add "$cluster_host_addr/30" dev "$cluster_veth_host"
    ip netns exec "$cluster_netns" sysctl -qw "net.ipv6.conf.$cluster_veth_ns.disable_ipv6=1" 2>/dev/null || true
    ip netns exec "$cluster_netns" ip addr add "$cluster_ns_addr/30" dev "$cluster_veth_ns"
  fi
  ip link set "$cluster_veth_host" up
  ip netns exec "$cluster_netns" ip link set lo up
  ip netns exec "$cluster_netns" ip link set "$cluster_veth_ns" up
}

render() {
  local node=$1 dir ns_l="" ns_a="" ns_m=""
  dir=$(node_dir "$node")
  if [ "${node:0:1}" = b ] && [ -f "$cluster_home/netns" ]; then
    ns_l=",NS://$cluster_host_addr:$(node_ns_port "$node")"
    ns_a=$ns_l
    ns_m=",NS:PLAINTEXT"
  fi
  local tmpl=$here/cluster-broker.properties.in
  [ "${node:0:1}" = c ] && tmpl=$here/cluster-controller.properties.in
  sed -e "s|@NODE_ID@|$(node_id "$node")|g" -e "s|@PORT@|$(node_port "$node")|g" \
    -e "s|@VOTERS@|$(cluster_voters)|g" -e "s|@DATA_DIR@|$dir|g" \
    -e "s|@NS_LISTENER@|$ns_l|g" -e "s|@NS_ADVERTISED@|$ns_a|g" -e "s|@NS_MAP@|$ns_m|g" \
    "$tmpl" >"$(node_props "$node")"
}

start_node() {
  local node=$1 dir heap
  dir=$(node_dir "$node")
  [ -n "$(node_pid "$node")" ] && return 0
  port_open "$(node_port "$node")" && die "127.0.0.1:$(node_port "$node") ($node) is taken by another process"
  mkdir -p "$dir"
  render "$node"
  kafka_format "$(node_props "$node")" "$dir" "$(cat "$cluster_home/cluster.id")"
  heap=${CLUSTER_BROKER_HEAP:--Xmx448m -Xms448m}
  [ "${node:0:1}" = c ] && heap=${CLUSTER_CONTROLLER_HEAP:--Xmx256m -Xms256m}
  kafka_start "$(node_props "$node")" "$dir" "$(node_pidfile "$node")" "$heap" "${jvm_opts[@]}"
  renice -n "${CLUSTER_NICE:-5}" -p "$(cat "$(node_pidfile "$node")")" >/dev/null || true
  echo "$me: started $node (node id $(node_id "$node"), 127.0.0.1:$(node_port "$node"), pid $(cat "$(node_pidfile "$node")"))"
}

# The active controller's node id, from the quorum (the Admin API through any broker);
# empty when the quorum has no leader or no broker answers.
quorum_leader() {
  java -cp "$libs/*" -Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.logs.dir="$cluster_home" \
    -XX:TieredStopAtLevel=1 -Xmx128m org.apache.kafka.tools.MetadataQuorumCommand \
    --bootstrap-server "$(cluster_bootstrap)" describe --status 2>/dev/null |
    sed -n 's/^LeaderId:[[:space:]]*\([0-9]*\).*/\1/p'
}
[ "${1:-}" = --leader ] && { quorum_leader; exit 0; }

need_tools
fetch_jars
mkdir -p "$cluster_home"
[ -f "$cluster_home/cluster.id" ] || java -cp "$libs/*" kafka.tools.StorageTool random-uuid >"$cluster_home/cluster.id"
[ "$(cat "$cluster_home/controllers" 2>/dev/null || echo "$cluster_controllers")" = "$cluster_controllers" ] ||
  die "$cluster_home was formatted for $(cat "$cluster_home/controllers") controllers; run cluster-down.sh --wipe"
echo "$cluster_controllers" >"$cluster_home/controllers"
if netns_wanted; then
  netns_make
  touch "$cluster_home/netns"
fi

nodes=("$@")
[ ${#nodes[@]} -gt 0 ] || mapfile -t nodes < <(cluster_nodes)
t0=$(date +%s%N)
for n in "${nodes[@]}"; do
  [ -n "$(node_id "$n" 2>/dev/null)" ] || die "no node $n (c1..c$cluster_controllers, b1..b$cluster_brokers)"
  start_node "$n"
done

# Ready: every node of the cluster logged that it started and its port answers (a
# broker starts only once it registered with the active controller), and the quorum
# names a leader.
for _ in $(seq $((start_timeout_s * 4))); do
  ready=1
  for n in $(cluster_nodes); do
    if [ -z "$(node_pid "$n")" ]; then
      [[ " ${nodes[*]} " == *" $n "* ]] || { ready=0; continue; }
      tail -n 20 "$(node_dir "$n")/stdout.log" "$(node_dir "$n")/server.log" 2>/dev/null >&2 || true
      die "$n exited during startup (logs in $(node_dir "$n"))"
    fi
    kafka_started "$(node_dir "$n")" && port_open "$(node_port "$n")" || ready=0
  done
  if [ "$ready" = 1 ]; then
    leader=$(quorum_leader || true)
    if [ -n "$leader" ] && [ "$leader" -ge 0 ]; then
      echo "$me: cluster up in $((($(date +%s%N) - t0) / 1000000)) ms, active controller c$leader"
      [ -f "$cluster_home/netns" ] && echo "$me: from namespace $cluster_netns: $(cluster_ns_bootstrap)"
      echo "bootstrap $(cluster_bootstrap)"
      exit 0
    fi
  fi
  sleep 0.25
done
die "cluster not ready after ${start_timeout_s}s (logs in $cluster_home/*/server.log); stop it with cluster-down.sh"
