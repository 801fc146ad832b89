#!/usr/bin/env bash
# Starts a single-node KRaft Kafka broker on 127.0.0.1 for tests and development, run
# straight from Maven Central jars (this machine has no Docker). Idempotent: fetches the
# jars and formats storage only the first time; a broker already up is left alone.
#
# usage: tools/kafka/kafka-up.sh [--fetch]   (--fetch: only get the jars)
# env:   HOLDFAST_KAFKA_PORT (default 9092; the controller listens on PORT+1)
#        KAFKA_HEAP_OPTS (default -Xmx1G -Xms1G: a heap sized up front, fewer young GCs)
#        HOLDFAST_KAFKA_JMX_PORT (default PORT+7: JMX on 127.0.0.1 only, no auth, so the
#        benches read the broker's request metrics by type; 0: off)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
me=kafka-up
# shellcheck source=tools/kafka/common.sh
source "$here/common.sh"
home=$root/.cache/kafka # everything generated lives here (gitignored)
data=$home/data
pidfile=$home/kafka.pid
props=$home/server.properties
port=${HOLDFAST_KAFKA_PORT:-9092}
cport=$((port + 1))
jmx_port=${HOLDFAST_KAFKA_JMX_PORT:-$((port + 7))}
start_timeout_s=60

broker_alive() { kafka_pid_is "$pidfile" "$props"; }

need_tools
mkdir -p "$home"
fetch_jars
[ "${1:-}" = "--fetch" ] && exit 0

if broker_alive && port_open "$port"; then
  echo "kafka up: already running (pid $(cat "$pidfile")), bootstrap 127.0.0.1:$port"
  exit 0
fi
broker_alive && die "pid $(cat "$pidfile") is alive but not answering on $port; run kafka-down.sh"
port_open "$port" && die "127.0.0.1:$port is taken by another process (set HOLDFAST_KAFKA_PORT)"

mkdir -p "$data"
sed -e "s|@PORT@|$port|g" -e "s|@CONTROLLER_PORT@|$cport|g" -e "s|@DATA_DIR@|$data|g" \
  "$here/server.properties.in" >"$props"

# Format once. The quorum's voter address is written into storage, so a later port change
# needs a fresh data dir.
if [ ! -f "$data/kraft/meta.properties" ]; then
  kafka_format "$props" "$data" "$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid)" --standalone
  echo "$port" >"$data/port"
fi
[ "$(cat "$data/port" 2>/dev/null)" = "$port" ] \
  || die "$data was formatted for port $(cat "$data/port" 2>/dev/null); run kafka-down.sh --wipe"

t0=$(date +%s%N)
jmx=()
if [ "$jmx_port" != 0 ]; then
  # Loopback only: the dev broker's metrics are for the benches on this machine.
  jmx=(-Dcom.sun.management.jmxremote.port="$jmx_port" -Dcom.sun.management.jmxremote.rmi.port="$jmx_port"
    -Dcom.sun.management.jmxremote.host=127.0.0.1 -Djava.rmi.server.hostname=127.0.0.1
    -Dcom.sun.management.jmxremote.authenticate=false -Dcom.sun.management.jmxremote.ssl=false)
  echo "$jmx_port" >"$home/jmx.port"
else
  rm -f "$home/jmx.port"
fi
kafka_start "$props" "$data" "$pidfile" "${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}" "${jmx[@]}"

# Ready = the broker logged that it started (metadata loaded, coordinators up) and the
# client port accepts connections.
for _ in $(seq $((start_timeout_s * 4))); do
  if ! broker_alive; then
    tail -n 20 "$data/stdout.log" "$data/server.log" 2>/dev/null >&2 || true
    die "broker exited during startup (logs in $data)"
  fi
  if kafka_started "$data" && port_open "$port"; then
    echo "kafka up: bootstrap 127.0.0.1:$port (pid $(cat "$pidfile"), started in $((($(date +%s%N) - t0) / 1000000)) ms)"
    exit 0
  fi
  sleep 0.25
done
die "broker not ready after ${start_timeout_s}s (logs in $data); stop it with kafka-down.sh"
