#!/usr/bin/env bash
# Starts a single-node KRaft Kafka broker on 127.0.0.1 for tests and development, run
# straight from Maven Central jars (this machine has no Docker). Idempotent: fetches the
# jars and formats storage only the first time; a broker already up is left alone.
#
# usage: tools/kafka/kafka-up.sh [--fetch]   (--fetch: only get the jars)
# env:   HOLDFAST_KAFKA_PORT (default 9092; the controller listens on PORT+1)
#        KAFKA_HEAP_OPTS (default -Xmx1G -Xms1G: a heap sized up front, fewer young GCs)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
home=$root/.cache/kafka # everything generated lives here (gitignored)
libs=$home/libs
data=$home/data
pidfile=$home/kafka.pid
props=$home/server.properties
port=${HOLDFAST_KAFKA_PORT:-9092}
cport=$((port + 1))
start_timeout_s=60

die() { echo "kafka-up: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# The pid is ours only if that process is still our broker (pids get reused).
broker_alive() {
  [ -f "$pidfile" ] || return 1
  local pid; pid=$(cat "$pidfile")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $props"
}

# Kafka 4 needs Java 17+; Maven fetches the jars. Install both if absent.
need_tools() {
  if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    echo "kafka-up: the broker needs Java 17+ and Maven (openjdk-17-jre-headless maven); installing"
    bash "$root/tools/deps.sh" kafka || die "could not install Java 17 and Maven"
  fi
  local major
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ "${major:-0}" -ge 17 ] || die "Java $major found; Kafka 4 needs Java 17+ (apt-get install openjdk-17-jre-headless)"
}

# Jars are re-fetched whenever the pom changes; the stamp holds the pom's hash. ~/.m2 keeps
# the downloads, so a fresh checkout copies from it instead of downloading again.
fetch_jars() {
  local stamp; stamp=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
  [ "$(cat "$libs/.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  echo "kafka-up: fetching Kafka jars from Maven Central into $libs"
  rm -rf "$libs.tmp"
  # Output only on failure: even quiet Maven 3.8 prints stray colour codes.
  local out
  out=$(mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs.tmp" 2>&1) \
    || { echo "$out" >&2; die "maven could not fetch the Kafka jars (see above)"; }
  echo "$stamp" >"$libs.tmp/.stamp"
  rm -rf "$libs" && mv "$libs.tmp" "$libs"
}

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
  cluster_id=$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid)
  java -cp "$libs/*" kafka.tools.StorageTool format -t "$cluster_id" -c "$props" --standalone >/dev/null \
    || die "formatting $data/kraft failed"
  echo "$port" >"$data/port"
fi
[ "$(cat "$data/port" 2>/dev/null)" = "$port" ] \
  || die "$data was formatted for port $(cat "$data/port" 2>/dev/null); run kafka-down.sh --wipe"

# Keep the previous run's log for post-mortems; the fresh one is searched for "started".
[ -f "$data/server.log" ] && mv "$data/server.log" "$data/server.log.prev"

# Own session (setsid) so the caller's shell or make exiting does not take the broker
# down; no inherited stdout, or whoever ran us would wait on the pipe forever.
t0=$(date +%s%N)
# shellcheck disable=SC2086 # KAFKA_HEAP_OPTS is a list of flags
setsid java -cp "$libs/*" -Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.logs.dir="$data" \
  ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} \
  -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true \
  kafka.Kafka "$props" </dev/null >"$data/stdout.log" 2>&1 &
echo $! >"$pidfile"

# Ready = the broker logged that it started (metadata loaded, coordinators up) and the
# client port accepts connections.
for _ in $(seq $((start_timeout_s * 4))); do
  if ! broker_alive; then
    tail -n 20 "$data/stdout.log" "$data/server.log" 2>/dev/null >&2 || true
    die "broker exited during startup (logs in $data)"
  fi
  if grep -q "Kafka Server started" "$data/server.log" 2>/dev/null && port_open "$port"; then
    echo "kafka up: bootstrap 127.0.0.1:$port (pid $(cat "$pidfile"), started in $((($(date +%s%N) - t0) / 1000000)) ms)"
    exit 0
  fi
  sleep 0.25
done
die "broker not ready after ${start_timeout_s}s (logs in $data); stop it with kafka-down.sh"
