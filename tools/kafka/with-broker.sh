#!/usr/bin/env bash
# Runs a command with a Kafka broker at $HOLDFAST_BOOTSTRAP (default 127.0.0.1:9092):
# a broker that already answers is used and left alone; otherwise a local one is started
# with kafka-up.sh on that port (jars fetched on first use) and stopped again afterwards,
# whatever the command's outcome. `make test` runs the suite through it, as `make demo`
# does for itself.
#
# usage: tools/kafka/with-broker.sh COMMAND [ARGS...]   (exit: the command's status)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bootstrap=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
host=${bootstrap%:*} port=${bootstrap##*:}
answers() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

if answers; then
  exec "$@"
fi
case "$host" in
  127.0.0.1 | localhost) ;;
  *) echo "with-broker: no broker answers at $bootstrap, and only a local one (127.0.0.1) can be started here" >&2
     exit 1 ;;
esac
echo "with-broker: no broker at $bootstrap: starting a local one for this run (tools/kafka/kafka-up.sh)"
export HOLDFAST_KAFKA_PORT=$port
stop() { bash "$here/kafka-down.sh"; }
trap stop EXIT
bash "$here/kafka-up.sh" || { echo "with-broker: the local broker did not start (see above)" >&2; exit 1; }
"$@"
