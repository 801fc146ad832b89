#!/usr/bin/env bash
# docs/openapi.json as a tested contract: Schemathesis (pinned below, in a venv under
# .cache/) runs every check (status codes, content types, headers, response bodies
# against their schemas, negative data refused, positive data accepted, missing
# headers, methods, auth) in its four phases (examples, coverage, fuzzing, stateful:
# reserve -> read -> extend -> commit/release along the document's links) against a
# real `holdfast http` in front of a real pipeline on the shared broker, with a
# topic prefix and app id of its own and seeded stock. A fixed seed and a time and
# example budget of about a minute. Passes only with 0 failures and 0 errors; the
# run's summary line is printed. tests/http/contract_hooks.py supplies what the
# document cannot: stocked SKUs for the lines of a reserve.
#
# usage: bash tests/http/test_contract.sh   (make test-http-contract; needs build/holdfast,
#        build/hfctl, build/hfbench, a broker at HOLDFAST_BOOTSTRAP, python3 with venv)
# env:   HOLDFAST_CONTRACT_VENV (default .cache/schemathesis-$version),
#        HOLDFAST_CONTRACT_SECONDS (default 60), HOLDFAST_CONTRACT_SEED (default 41),
#        HOLDFAST_CONTRACT_KEEP=1 keeps the logs and reports (junit, ndjson) of a passing run
set -uo pipefail

SCHEMATHESIS_VERSION=4.32.5 # PyPI; a new version is a deliberate change (its checks grow)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
HOLDFAST=${HOLDFAST_BIN:-build/holdfast}
HFCTL=${HFCTL_BIN:-build/hfctl}
HFBENCH=${HFBENCH_BIN:-build/hfbench}
venv=${HOLDFAST_CONTRACT_VENV:-$root/.cache/schemathesis-$SCHEMATHESIS_VERSION}
budget_s=${HOLDFAST_CONTRACT_SECONDS:-60}
seed=${HOLDFAST_CONTRACT_SEED:-41}
skus=40 # seeded SKU-00000..SKU-00039: more than a reserve's 32 lines
export HOLDFAST_BOOTSTRAP=${HOLDFAST_BOOTSTRAP:-127.0.0.1:9092}
unset HOLDFAST_KAFKA_CONFIG HOLDFAST_KAFKA_OVERRIDES HOLDFAST_WEBHOOK_SECRETS HOLDFAST_STATE_DIR
prefix="hc$$-$(($(date +%s%3N) % 100000))."
export HOLDFAST_TOPIC_PREFIX=$prefix HOLDFAST_APP_ID=${prefix}app
work=$(mktemp -d /tmp/hf-contract.XXXXXX)
run_pid= front_pid= ok=0
suite=contract
# shellcheck source=tests/http/lib.sh
source "$root/tests/http/lib.sh"

die() {
  echo "FAIL: contract: $*"
  exit 1
}
cleanup() {
  stop_pid "$front_pid"
  stop_pid "$run_pid"
  if [ "$ok" = 1 ] && [ "${HOLDFAST_CONTRACT_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  elif [ "$ok" = 1 ]; then
    echo "contract: logs and Schemathesis reports kept in $work"
  else
    for f in "$work"/*.log; do
      [ -s "$f" ] || continue
      echo "---- $f (last 20 lines)"
      tail -n 20 "$f"
    done
    echo "contract: logs and Schemathesis reports kept in $work (prefix $prefix)"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the pinned Schemathesis, in a venv of its own
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -qF "$SCHEMATHESIS_VERSION"; then
  echo "== installing schemathesis $SCHEMATHESIS_VERSION into $venv"
  python3 -m venv "$venv" >"$work/venv.log" 2>&1 ||
    die "python3 -m venv $venv failed (Debian: tools/deps.sh python): $(tail -n 3 "$work/venv.log")"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" \
    >>"$work/venv.log" 2>&1 || die "pip install schemathesis==$SCHEMATHESIS_VERSION: $(tail -n 3 "$work/venv.log")"
fi

# ---- the pipeline, stock, the front
require_setup curl openssl python3
echo "== prefix $prefix, logs in $work"
# Deep stock, so that most holds succeed and the stateful phase can go on with them.
start_pipeline $skus 1000000
secret=whsec_contract_$(openssl rand -hex 16)
webhook_secrets=$secret
start_front front '{}'
front_pid=$pid
echo "== pipeline and front (port $port) ready in $SECONDS s"

# ---- Schemathesis: every check, every phase; a fixed seed; about a minute.
# No U+0000 in generated strings: the document says bodies hold none (jansson refuses
# it in member names whatever the flags: 422 invalid_json). One worker: the stateful
# phase's sequences stay in order, and the pipeline of a 2-core machine is never so
# loaded that it sheds (503 is a server error to the not_a_server_error check,
# rightly: the front must not shed at this rate). Run from $work, where Schemathesis
# keeps its .schemathesis/ cache.
began=$SECONDS
(cd "$work" && PYTHONPATH="$root/tests/http${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=contract_hooks \
  HOLDFAST_CONTRACT_SKUS=$skus HOLDFAST_CONTRACT_WEBHOOK_SECRET=$secret \
  "$venv/bin/schemathesis" --config-file "$root/tests/http/schemathesis.toml" \
  run "$root/docs/openapi.json" \
  --url "http://127.0.0.1:$port" \
  --checks all \
  --phases examples,coverage,fuzzing,stateful \
  --seed "$seed" \
  --max-time "$budget_s" \
  --max-examples 60 \
  --workers 1 \
  --request-timeout 10 \
  --generation-database none \
  --generation-allow-x00 false \
  --no-color --output-sanitize false \
  --report junit,ndjson --report-dir "$work/report" \
  >"$work/schemathesis.out" 2>&1)
rc=$?
elapsed=$((SECONDS - began))
cat "$work/schemathesis.out"
summary=$(grep -E '^=+ .* in [0-9.]+s =+$' "$work/schemathesis.out" | tail -n 1)
echo "contract: schemathesis $SCHEMATHESIS_VERSION, seed $seed, exit $rc, ${elapsed} s: ${summary:-<no summary line>}"
if [ "$rc" != 0 ]; then
  echo "FAIL: contract: Schemathesis found failures (above; junit report in $work/report)"
  exit 1
fi
grep -q '"level":"error"' "$work/front.log" &&
  die "the front logged errors: $(grep '"level":"error"' "$work/front.log" | head -n 3)"
ok=1
echo "contract: 1 passed, 0 failed"
