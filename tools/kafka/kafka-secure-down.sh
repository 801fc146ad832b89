#!/usr/bin/env bash
# Stops the secured broker kafka-secure-up.sh started (only that pid: SIGTERM, SIGKILL
# after 30 s) and deletes .cache/kafka-secure/ — its data, certificates and passwords.
# Idempotent. The development broker (kafka-up.sh) is never touched.
#
# usage: tools/kafka/kafka-secure-down.sh [--keep]   (--keep: leave the files for a post-mortem)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
home=$(cd "$here/../.." && pwd)/.cache/kafka-secure
KAFKA_DOWN_HOME=$home KAFKA_DOWN_NAME=kafka-secure bash "$here/kafka-down.sh"
[ "${1:-}" = "--keep" ] || rm -rf "$home"
