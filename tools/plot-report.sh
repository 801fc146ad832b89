#!/usr/bin/env bash
# Renders an hfbench report (JSON) into PNG plots next to it:
#   <report>-latency.png    reserve p99 per second and the request rate
#   <report>-doorbuster.png the doorbuster's network availability and in-stock flag
# Needs python3 and gnuplot (bash tools/deps.sh plot).
set -euo pipefail
report=${1:?usage: tools/plot-report.sh REPORT.json}
command -v gnuplot >/dev/null || { echo "plot-report: gnuplot missing: bash tools/deps.sh plot" >&2; exit 1; }
base=${report%.json}
dat=$(mktemp)
trap 'rm -f "$dat"' EXIT
python3 - "$report" > "$dat" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["per_second"]
for r in rows:
    p99 = r["reserve_p99_ms"] if r["reserve_p99_ms"] >= 0 else "NaN"
    avail = r.get("doorbuster_available", -1)
    stock = r.get("doorbuster_in_stock", -1)
    print(r["t"], r["sent"], p99, avail if avail >= 0 else "NaN", stock if stock >= 0 else "NaN")
PY
gnuplot <<GP
set terminal pngcairo size 900,420 noenhanced
set datafile missing "NaN"
set grid
set xlabel "seconds"
set output "${base}-latency.png"
set title "reserve latency p99 per second (from intended send time)"
set ylabel "ms"
set y2label "reserves sent / s"
set y2tics
plot "$dat" using 1:3 with linespoints title "reserve p99 (ms)", \
     "$dat" using 1:2 axes x1y2 with steps title "sent / s"
set output "${base}-doorbuster.png"
set title "doorbuster: network availability and debounced in-stock flag"
set ylabel "units available"
set y2label "in stock (1) / sold out (0)"
set y2range [-0.1:1.1]
plot "$dat" using 1:4 with steps title "available", \
     "$dat" using 1:5 axes x1y2 with steps title "in_stock"
GP
echo "plots: ${base}-latency.png ${base}-doorbuster.png"
