#!/usr/bin/env bash
# The crash suite (issue 5): `make test-faults` runs `run.sh full`, `make test`
# runs `run.sh quick` (through `make test-faults-quick`). Each scenario is a
# script of its own, run in order against the local broker with its own topic
# prefix and app id; each ends with `hfctl reconcile --quiescent 1` PASS and
# check.py (every request answered with exactly one outcome, reconcile's counts
# agreeing with the replies and with hfbench). See lib.sh for the mechanics.
#
#   kill9.sh      scenario 1: the full pipeline under hfbench load (steady, then
#                 a flash sale), kill -9'd every 2-5 s and restarted at once
#   broker.sh     scenario 2: the broker stopped and started (make kafka-down /
#                 kafka-up) in the middle of the load; the suite supervises the
#                 processor. Full form only: the broker is shared.
#   rebalance.sh  scenario 3: two processors share the partitions; one is
#                 kill -9'd, the other takes its partitions over from the
#                 changelogs after the session timeout, then it comes back
#
#   quick (about 2.5 min): kill9.sh with escrow on (FT_ESCROW=1) and 5 kills
#                        over a 20 s steady run and a 10 s flash sale,
#                        rebalance.sh with one cycle, and process.sh (three
#                        processes with standbys: one kill -9, one SIGSTOP past
#                        the session timeout; strict 5 s expiry bound)
#   full (about 7 min):  kill9.sh with up to 16 kills (steady 60 s + flash sale
#                        20 s), the same with escrow on (12 kills), broker.sh,
#                        rebalance.sh with both processors killed in turn
#
# Known limits, decided here (details in the scenario scripts):
#   * DESIGN.md section 10 bounds expiry release at 5 s. While no process can
#     release (no partition owner during a takeover; no broker) that bound
#     cannot hold; broker.sh and rebalance.sh prove with a bound that covers the
#     outage and report a strict replay that may fail on expiry_late only.
#   * hfbench gives up when it cannot deliver for 10 s (its flush timeout), so
#     during a broker restart the client dies; broker.sh then proves from the
#     topics and runs hfbench again afterwards.
#
# usage: tests/faults/run.sh quick|full [SCENARIO...]
# env:   HOLDFAST_BOOTSTRAP, plus each script's FT_* knobs
set -uo pipefail
cd "$(dirname "$0")/../.."

mode=${1:-quick}
shift || true
case $mode in
  quick) plan=("kill9:FT_KILLS=5 FT_SECONDS=20 FT_FLASH=1 FT_FLASH_SECONDS=10 FT_ESCROW=1"
               "rebalance:FT_CYCLES=1"
               "process:FT_MODE=mixed FT_CYCLES=2 FT_SECONDS=45") ;;
  full) plan=("kill9:FT_KILLS=16 FT_SECONDS=60 FT_FLASH=1 FT_FLASH_SECONDS=20"
              "kill9:FT_KILLS=12 FT_SECONDS=40 FT_FLASH=1 FT_FLASH_SECONDS=20 FT_ESCROW=1"
              "broker:"
              "rebalance:FT_CYCLES=2") ;;
  *) echo "usage: $0 quick|full [kill9|broker|rebalance ...]" >&2; exit 2 ;;
esac
only=("$@")

bootstrap=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
if ! (exec 3<>"/dev/tcp/${bootstrap%:*}/${bootstrap##*:}") 2>/dev/null; then
  echo "the crash suite needs a Kafka broker at $bootstrap: run 'make kafka-up' first" >&2
  exit 1
fi
mkdir -p build/faults

status=0
summary=()
t_all=$(date +%s)
for entry in "${plan[@]}"; do
  name=${entry%%:*}
  vars=${entry#*:}
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  echo "== tests/faults/$name.sh ($mode: ${vars:-defaults})"
  t0=$(date +%s)
  label=$name
  [[ " $vars " == *" FT_ESCROW=1 "* ]] && label="$name-escrow"
  log=build/faults/last-$label.log
  # shellcheck disable=SC2086 # vars is a list of NAME=value
  env $vars bash "tests/faults/$name.sh" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  secs=$(($(date +%s) - t0))
  result=$(grep -o 'PASS: .*' "$log" | tail -n 1)
  if [ "$rc" = 0 ]; then
    summary+=("PASS  $label  ${secs}s  ${result#PASS: }")
  else
    status=1
    summary+=("FAIL  $label  ${secs}s  $(grep -o 'FAIL: .*' "$log" | tail -n 1 | cut -c1-200)")
    echo "FAILED: tests/faults/$name.sh (artifacts: $(grep -o 'artifacts in [^ ]*' "$log" | head -n 1))"
  fi
done
echo
echo "== crash suite ($mode) in $(($(date +%s) - t_all)) s"
printf '   %s\n' "${summary[@]}"
exit $status
