# The local test cluster's layout, sourced by cluster-up.sh, cluster-down.sh and the
# cluster fault scenarios (tests/faults/cluster.sh): node names, ports, data dirs,
# and the network namespace a scenario may put a holdfast process in. Needs `root`
# (the checkout). Nothing here starts anything.
#
#   controllers c1..c3 (node ids 1..3)   127.0.0.1:19292..19294  (HOLDFAST_CLUSTER_CONTROLLERS=1: c1 only)
#   brokers     b1..b3 (node ids 11..13) 127.0.0.1:19192..19194  clients and replication
#                                        10.213.0.1:19392..19394 from namespace hfcl (when made)
# The ranges stay clear of the shared broker (9092/9093) and the secured one (19094/19095).

cluster_home=$root/.cache/kafka-cluster
cluster_controllers=${HOLDFAST_CLUSTER_CONTROLLERS:-3}
case $cluster_controllers in 1 | 3) ;; *) echo "HOLDFAST_CLUSTER_CONTROLLERS must be 1 or 3" >&2; exit 2 ;; esac
cluster_brokers=3
# The namespace: hfcl-h (host side, 10.213.0.1/30) <-> hfcl-n (inside hfcl, 10.213.0.2/30).
cluster_netns=hfcl
cluster_veth_host=hfcl-h
cluster_veth_ns=hfcl-n
cluster_host_addr=10.213.0.1
cluster_ns_addr=10.213.0.2

cluster_nodes() {
  local i
  for i in $(seq "$cluster_controllers"); do echo "c$i"; done
  for i in $(seq "$cluster_brokers"); do echo "b$i"; done
}
node_id() { case $1 in c*) echo "${1#c}" ;; b*) echo $((10 + ${1#b})) ;; esac; }
node_port() { case $1 in c*) echo $((19291 + ${1#c})) ;; b*) echo $((19191 + ${1#b})) ;; esac; }
node_ns_port() { echo $((19391 + ${1#b})); }
node_of_id() { if [ "$1" -ge 11 ]; then echo "b$(($1 - 10))"; else echo "c$1"; fi; }
node_dir() { echo "$cluster_home/$1"; }
node_props() { echo "$cluster_home/$1/server.properties"; }
node_pidfile() { echo "$cluster_home/$1/kafka.pid"; }
cluster_bootstrap() {
  local i out=""
  for i in $(seq "$cluster_brokers"); do out="$out${out:+,}127.0.0.1:$(node_port "b$i")"; done
  echo "$out"
}
# The bootstrap list for a process inside the namespace.
cluster_ns_bootstrap() {
  local i out=""
  for i in $(seq "$cluster_brokers"); do out="$out${out:+,}$cluster_host_addr:$(node_ns_port "b$i")"; done
  echo "$out"
}
cluster_voters() {
  local i out=""
  for i in $(seq "$cluster_controllers"); do out="$out${out:+,}$i@127.0.0.1:$(node_port "c$i")"; done
  echo "$out"
}
# The pid of a node when it runs (empty otherwise).
node_pid() {
  local f; f=$(node_pidfile "$1")
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
    grep -q "kafka.Kafka $(node_props "$1")" && echo "$pid"
  return 0
}
