#!/usr/bin/env bash
# The cluster fault suite (issue 14; `make test-faults-cluster`): brings the local
# 3-broker, 3-controller cluster up (tools/kafka/cluster-up.sh; as root with the
# network namespace hfcl), runs tests/faults/cluster.sh once per fault kind, prints
# each scenario's figures, and takes the cluster down again with its data and the
# namespace (cluster-down.sh --wipe; after a failure without --wipe, so the topics can
# be looked at) — unless it was already up when the suite started, in which case it is
# left running. The shared broker on 9092 is never
# touched.
#
#   full  (about 17 min): none (the control), leader, controller, restart, netsplit;
#                         FT_FAULTS=2 each
#   quick (about 5 min):  leader and netsplit, one fault each
#
# usage: tests/faults/cluster-run.sh full|quick [FAULT...]
# env:   cluster.sh's FT_* knobs
set -uo pipefail
cd "$(dirname "$0")/../.."

mode=${1:-full}
shift || true
case $mode in
  full) plan=(none leader controller restart netsplit) faults=${FT_FAULTS:-2} ;;
  quick) plan=(leader netsplit) faults=${FT_FAULTS:-1} ;;
  *) echo "usage: $0 full|quick [none|leader|controller|restart|netsplit ...]" >&2; exit 2 ;;
esac
[ $# -eq 0 ] || plan=("$@")
[ "$(id -u)" = 0 ] || { echo "cluster-run: not root: no network namespace, netsplit skipped" >&2; plan=("${plan[@]/netsplit/}"); }

root=$(pwd)
# shellcheck source=tools/kafka/cluster-env.sh
source tools/kafka/cluster-env.sh
started_here=0
if [ -z "$(node_pid b1)" ]; then
  started_here=1
  # A failed run keeps the data (and the namespace) for a post-mortem: the topics can be
  # reconciled again after cluster-up.sh; cluster-down.sh --wipe removes them.
  trap 'if [ "${status:-1}" = 0 ]; then bash tools/kafka/cluster-down.sh --wipe; else bash tools/kafka/cluster-down.sh; echo "cluster-run: a scenario failed: the data stays in .cache/kafka-cluster (cluster-up.sh to look, cluster-down.sh --wipe to remove)"; fi' EXIT
fi
bash tools/kafka/cluster-up.sh || { echo "cluster-run: the cluster did not come up" >&2; exit 1; }
mkdir -p build/faults

status=0
summary=()
t_all=$(date +%s)
for fault in "${plan[@]}"; do
  [ -n "$fault" ] || continue
  echo "== tests/faults/cluster.sh FT_FAULT=$fault FT_FAULTS=$faults"
  log=build/faults/last-cluster-$fault.log
  t0=$(date +%s)
  FT_FAULT=$fault FT_FAULTS=$faults bash tests/faults/cluster.sh 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  secs=$(($(date +%s) - t0))
  if [ "$rc" = 0 ]; then
    summary+=("PASS  $fault  ${secs}s  $(grep -o 'PASS: .*' "$log" | tail -n 1 | cut -c7-)")
  else
    status=1
    summary+=("FAIL  $fault  ${secs}s  $(grep -o 'FAIL: .*' "$log" | tail -n 1 | cut -c1-200)")
    echo "FAILED: cluster $fault (artifacts: $(grep -o 'artifacts in [^ ]*' "$log" | head -n 1))"
  fi
  # The next scenario starts on a whole cluster.
  bash tools/kafka/cluster-up.sh >/dev/null || { echo "cluster-run: the cluster did not come back" >&2; exit 1; }
done
echo
echo "== cluster fault suite ($mode) in $(($(date +%s) - t_all)) s (started the cluster: $([ $started_here = 1 ] && echo yes || echo no))"
printf '   %s\n' "${summary[@]}"
exit $status
