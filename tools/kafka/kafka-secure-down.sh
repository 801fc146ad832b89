#!/usr/bin/env bash
# Stops the secured broker kafka-secure-up.sh started (only that pid: SIGTERM, SIGKILL
# after 30 s) and deletes .cache/kafka-secure/ — its data, certificates and passwords.
# Idempotent. The development broker (kafka-up.sh) is never touched.
#
# usage: tools/kafka/kafka-secure-down.sh [--keep]   (--keep: leave the files for a post-mortem)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
home=$(cd "$here/../.." && pwd)/.cache/kafka-secure
pidfile=$home/kafka.pid
stop_timeout_s=30

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
    echo "kafka-secure-down: pid $pid ignored SIGTERM for ${stop_timeout_s}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    while broker_alive "$pid"; do sleep 0.1; done
  fi
  echo "kafka-secure down: stopped pid $pid"
else
  echo "kafka-secure down: not running"
fi
rm -f "$pidfile"
[ "${1:-}" = "--keep" ] || rm -rf "$home"
