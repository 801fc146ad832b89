#!/usr/bin/env bash
# make test-bench-pipeline: runs `make bench-pipeline` in its quick form (one rate of
# 200/s for 5 s, a 5 s overload run, a 5 s broker ceiling) against the shared broker
# and proves the tool works end to end: it exits 0, prints its table, and its JSON has
# every figure the bench promises for every run (latencies, records and bytes per
# reservation by topic, transactions by stage, CPU by process and by thread, a
# reconcile verdict; PASS at the ladder's rate), whether the rate was within the brief's
# reserve p99, the ceiling and the ratios' inputs, a PNG, and the run's topics are
# deleted afterwards.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/bench/test-$$
mkdir -p "$out"
echo "== bench-pipeline quick form (output in $out)"
rc=0
BENCH_QUICK=1 BENCH_OUT=$out python3 tests/bench/pipeline.py >"$out/stdout.txt" 2>&1 || rc=$?
tail -n 40 "$out/stdout.txt"
[ "$rc" = 0 ] || { echo "FAIL: bench-pipeline exited $rc"; exit 1; }
json=$(ls "$out"/pipeline-*.json | head -n 1)
python3 - "$json" "$out/stdout.txt" <<'PY'
import json, os, subprocess, sys

doc = json.load(open(sys.argv[1]))
table = open(sys.argv[2]).read()
errors = []

def need(cond, what):
    if not cond:
        errors.append(what)

def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)

c = doc["conditions"]
need(c["cores"] >= 1 and c["broker"]["pid"] and c["broker"]["version"] and c["broker"]["heap"],
     "conditions: cores, broker pid, version, heap")
need(all(b["partitions"] not in ("", "?") for b in c["builds"]), "conditions: partitions")
runs = doc["runs"]
kinds = sorted({r["kind"] for r in runs})
need(kinds == ["ladder", "overload"], f"a ladder and an overload run (got {kinds})")
for r in runs:
    tag = f"{r['kind']} {r['rate']}/s"
    need("error" not in r, f"{tag}: error {r.get('error')}")
    if "error" in r:
        continue
    for k in ("reserve", "commit", "release"):
        for p in ("p50", "p99", "p999"):
            v = r["latency_ms"][k].get(p)
            need(num(v) and v >= 0, f"{tag}: {k} {p}")
    need(r["reconcile"]["verdict"] in ("PASS", "FAIL"), f"{tag}: reconcile verdict")
    if r["kind"] == "ladder":
        need(r["reconcile"]["verdict"] == "PASS", f"{tag}: reconcile PASS at a low rate")
    need(num(r["answered_fraction"]) and num(r["answered_within_1s_fraction"]), f"{tag}: answered")
    pr = r["per_reservation"]
    need(pr["reservations"] > 0 and num(pr["records"]) and num(pr["bytes"]), f"{tag}: per reservation")
    for t in ("requests", "replies", "gateway-changelog", "counter-changelog", "counter-commands",
              "counter-results", "ledger"):
        x = pr["by_topic"].get("holdfast." + t, {})
        need(num(x.get("records")) and x["records"] > 0 and num(x.get("bytes"))
             and num(x.get("data_records")), f"{tag}: records and bytes of {t}")
    w = r["window"]
    need(all(num(w["cores"][k]) for k in ("broker", "holdfast", "hfbench", "others")), f"{tag}: cores")
    need(len(w["holdfast_threads"]) > 1 and all("tid" in t for t in w["holdfast_threads"]),
         f"{tag}: threads by tid")
    for s in ("counter", "aggregator", "gateway"):
        st = w["stages"].get(s) or {}
        need(num(st.get("transactions_per_s")) and st["transactions"] > 0
             and num(st.get("records_per_transaction")), f"{tag}: transactions of {s}")
    need(num(w["broker_cpu_s_per_million_records"]), f"{tag}: broker CPU per record")
    need(r.get("topics_deleted") is True, f"{tag}: topics deleted")
    left = subprocess.run(["build/pipeline-topics", "offsets", r["prefix"]], capture_output=True,
                          text=True).stdout.strip()
    need(left == "{}", f"{tag}: topics left behind: {left[:200]}")
ce = doc["ceiling"] or {}
need(num(ce.get("records_per_s")) and ce["records_per_s"] > 0
     and num(ce.get("broker_cpu_s_per_million_records")), f"ceiling: {ce.get('error')}")
need("sustained" in doc["criteria"] and doc["highest_sustained_rate"], "highest sustained rate")
# A rate "within target" is a sustained one whose reserve p99 meets the brief's 50 ms.
need("within_target" in doc["criteria"] and "highest_rate_within_target" in doc,
     "highest rate within the reserve p99 target")
for r in runs:
    if r["kind"] == "ladder" and "error" not in r:
        want = bool(r["sustained"] and r["latency_ms"]["reserve"]["p99"] <= 50)
        need(r.get("within_target") is want, f"ladder {r['rate']}/s: within_target {want}")
need(doc["overload"]["rows"] and doc["overload"]["rate"] > 0, "overload rows")
need(doc["png"] and os.path.getsize(doc["png"]) > 1000, "png")
need("rec/s:ceil" in table and "records (offsets) / data records" in table
     and "overload " in table and "highest rate within reserve p99 <= 50 ms" in table,
     "the printed table")
if errors:
    print("FAIL: " + "; ".join(errors))
    sys.exit(1)
print(f"PASS: {len(runs)} runs, every field present, reconcile "
      + ", ".join(r["reconcile"]["verdict"] for r in runs))
PY
