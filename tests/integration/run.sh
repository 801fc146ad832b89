#!/usr/bin/env bash
# Runs the broker-backed integration tests in order. They need the local broker
# (make kafka-up) and the release binaries in build/.
set -euo pipefail
bootstrap=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
host=${bootstrap%:*}; port=${bootstrap##*:}
if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  echo "integration tests need a Kafka broker at $bootstrap: 'make test' starts one, or run 'make kafka-up' first" >&2
  exit 1
fi
export HOLDFAST_BIN=${HOLDFAST_BIN:-build/holdfast}
# avro-c keeps values 4 bytes off alignment; without this LeakSanitizer misses
# the pointers to them and reports false leaks.
export LSAN_OPTIONS=${LSAN_OPTIONS:-use_unaligned=1}
status=0
for t in "$@"; do
  echo "== $t"
  start=$(date +%s)
  if ! "$t"; then status=1; echo "FAILED: $t (logs under build/itest/)"; fi
  echo "   ($(( $(date +%s) - start )) s)"
done
exit $status
