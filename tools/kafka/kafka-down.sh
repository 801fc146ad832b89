#!/usr/bin/env bash
# Stops the broker that kafka-up.sh started (only that pid): SIGTERM for a controlled
# shutdown, SIGKILL if it has not exited within 30 s. Idempotent.
#
# usage: tools/kafka/kafka-down.sh [--wipe]   (--wipe: also delete topics and logs)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# KAFKA_DOWN_HOME / KAFKA_DOWN_NAME: another broker of the project's (kafka-secure-down.sh).
home=${KAFKA_DOWN_HOME:-$(cd "$here/../.." && pwd)/.cache/kafka}
name=${KAFKA_DOWN_NAME:-kafka}
pidfile=$home/kafka.pid
stop_timeout_s=30

# The pid is ours only if that process is still our broker (pids get reused).
broker_alive() {
  kill -0 "$1" 2>/dev/null && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q "kafka.Kafka $home/server.properties"
}

if [ -f "$pidfile" ] && pid=$(cat "$pidfile") && broker_alive "$pid"; then
  kill -TERM "$pid"
  for _ in $(seq $((stop_timeout_s * 4))); do
    broker_alive "$pid" || break
    sleep 0.25
  done
  if broker_alive "$pid"; then
    echo "$name-down: pid $pid ignored SIGTERM for ${stop_timeout_s}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    while broker_alive "$pid"; do sleep 0.1; done
  fi
  echo "$name down: stopped pid $pid"
else
  echo "$name down: not running"
fi
rm -f "$pidfile"

if [ "${1:-}" = "--wipe" ]; then
  rm -rf "$home/data"
  echo "kafka down: wiped $home/data"
fi
