#!/usr/bin/env python3
"""make bench-flash: a flash sale on a large doorbuster, the default config against direct
and escrow, build against build (BENCH_BUILDS, as make bench-pipeline), side by side.

Modes: "default" runs the build as it comes (metrics_port only: nothing pinned, nothing
turned on, so the doorbuster is served however the build's defaults serve it, including
its escrow_auto_reserves_s); "direct" turns escrow off (escrow_auto_reserves_s 0, nothing
pinned); "escrow" pins escrow_skus DOORBUSTER. BENCH_CONFIG is merged into every mode.

For each round (BENCH_ROUNDS), each mode and each build, builds alternating run by run
(their order reversed every other round), on fresh topics (own prefix and app id): the
build's hfctl topics apply; its holdfast run --stages counter,aggregator,gateway; its
hfbench seed (BENCH_SKUS SKUs x 5 warehouses, a DOORBUSTER of BENCH_DOORBUSTER units over
5 warehouses); build/hfbench run --scenario flash-sale (one driver for every build):
BENCH_RATE reserves/s over the catalog for BENCH_SECONDS plus BENCH_FACTOR x
BENCH_DOORBUSTER shoppers for the doorbuster within 2 s from t = 2 s, while holdfast's
/metrics is read every 250 ms from the load's start to 4 s after the burst; wait until the
topics stand still; hfctl reconcile --quiescent 1; stop; delete the topics.
BENCH_COLD=1 adds one run per build in the default mode after those, each on a broker
restarted just before it (tools/kafka/kafka-down.sh, kafka-up.sh of the checkout that
started it; only the local broker tools/kafka started: refused otherwise), so the load
starts within the broker's first minute. It stops the shared broker: other runs against
it fail.

Per run: BUSY as a share of shoppers (shoppers left with BUSY after their retries, and
every BUSY answer, the retried ones too), the worst per-second reserve p99 of the burst
(t = 2..5 s), reserve p50/p99 over the run, doorbuster units sold and oversold, what was
left of it (the routing view's total after the run; of it, units in allotments and units
abandoned after the last doorbuster shopper was answered), SOLD_OUT after the last unit
held against the dwell + 500 ms, whether the doorbuster's gateway partitions switched to
escrow by themselves (holdfast_escrow_auto_skus above 0) and when, in seconds after the
burst began (250 ms samples), holds taken in one hop, the reconcile verdict, the broker's
age at the load's start; then medians per build and mode. JSON beside it in
build/bench/flash-<stamp>.json.

Env (defaults): BENCH_BUILDS "current=build/holdfast", BENCH_MODES "default direct
escrow", BENCH_ROUNDS 2, BENCH_COLD 0, BENCH_DOORBUSTER 5000, BENCH_FACTOR 4,
BENCH_DOOR_TAIL 50 (hfbench --door-tail-rate: latecomers for the doorbuster after the
rush, who take what its shoppers abandon), BENCH_RATE 100, BENCH_SECONDS 15, BENCH_SKUS
1000, BENCH_BUSY_RETRIES 5 (hfbench --busy-retries: a shopper answered BUSY comes back),
BENCH_CONFIG (JSON merged into every mode's config), HOLDFAST_BOOTSTRAP. Exit 1 when a run
failed or a reconcile did not pass."""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

import bench_common as bc
import pipeline as pl


def env_int(name, default):
    v = os.environ.get(name) or str(default)
    try:
        return int(v)
    except ValueError:
        sys.exit(f"bench-flash: {name}={v!r} is not an integer")


ROUNDS = env_int("BENCH_ROUNDS", 2)
DOOR = env_int("BENCH_DOORBUSTER", 5000)
FACTOR = env_int("BENCH_FACTOR", 4)
RATE = env_int("BENCH_RATE", 100)
SECONDS = env_int("BENCH_SECONDS", 15)
SKUS = env_int("BENCH_SKUS", 1000)
BUSY_RETRIES = env_int("BENCH_BUSY_RETRIES", 5)
DOOR_TAIL = env_int("BENCH_DOOR_TAIL", 50)
COLD = (os.environ.get("BENCH_COLD") or "0") == "1"
EXTRA = json.loads(os.environ.get("BENCH_CONFIG") or "{}")
ALL_MODES = {"default": {}, "direct": {"escrow_auto_reserves_s": 0},
             "escrow": {"escrow_skus": "DOORBUSTER"}}
MODES = [m for m in (os.environ.get("BENCH_MODES") or "default direct escrow").split()
         if m in ALL_MODES] or sys.exit("bench-flash: BENCH_MODES names none of "
                                        + ", ".join(ALL_MODES))
BURST_AT_S, BURST_S = 2, 2  # hfbench's flash-sale burst: t = 2 s, within 2 s
SAMPLE_S, SAMPLE_AFTER_BURST_S = 0.25, 4
COLD_WITHIN_S = 60  # a cold run's load starts within the broker's first minute
SOLD_OUT_SLACK_MS = 500  # SOLD_OUT is due within the dwell plus this


def log(msg):
    print(f"[flash {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def offsets_total(prefix):
    try:
        return pl.offsets_total(pl.topic_offsets(prefix))
    except (RuntimeError, ValueError):
        return -1


def wait_still(prefix, quiet_s=8, timeout_s=180):
    last, since, t0 = None, time.time(), time.time()
    while time.time() - t0 < timeout_s:
        cur = offsets_total(prefix)
        if cur != last:
            last, since = cur, time.time()
        elif time.time() - since >= quiet_s:
            return
        time.sleep(1)


def escrow_metrics(port):
    return {k: v for (k, stage), v in pl.scrape_metrics(port).items()
            if k.startswith("holdfast_escrow_") and stage is None}


def sample_escrow(port, t_burst, until, stop, out):
    """holdfast's escrow metrics every SAMPLE_S until the time until (or stop is set):
    (seconds after the burst began, holdfast_escrow_auto_skus, one-hop holds taken)."""
    while time.time() < until and not stop.is_set():
        t = time.time()
        m = pl.scrape_metrics(port)
        out.append((round(t - t_burst, 2), m.get(("holdfast_escrow_auto_skus", None)),
                    m.get(("holdfast_escrow_holds_taken_total", None))))
        stop.wait(max(0.0, SAMPLE_S - (time.time() - t)))


def switch(samples, mode):
    """Whether the doorbuster went to escrow by itself, and when (seconds after the
    burst began, the first sample showing it)."""
    if mode == "escrow":
        return {"state": "pinned"}
    autos = [(t, a) for t, a, _ in samples if a is not None]
    if not autos:
        return {"state": "off"}  # the gauge exists only while escrow_auto_reserves_s > 0
    first = next((t for t, a in autos if a > 0), None)
    taken0 = next((k for _, _, k in samples if k is not None), 0)
    first_taken = next((t for t, _, k in samples if k is not None and k > taken0), None)
    return {"state": "yes" if first is not None else "no", "after_burst_s": first,
            "auto_skus_max": max(a for _, a in autos), "first_one_hop_after_burst_s": first_taken}


def one_run(build, mode, kind, rnd, n, work_root, broker):
    tag = re.sub(r"[^a-zA-Z0-9]", "", build["name"])
    prefix = f"fl{os.getpid()}-{n}-{tag}-{mode}."
    work = os.path.join(work_root, f"{n:02d}-{tag}-{mode}-{kind}")
    os.makedirs(work, exist_ok=True)
    envx = {"HOLDFAST_TOPIC_PREFIX": prefix, "HOLDFAST_APP_ID": prefix + "app",
            "HOLDFAST_BOOTSTRAP": bc.BOOTSTRAP}
    port = pl.free_port()
    config = {"metrics_port": port, **EXTRA, **ALL_MODES[mode]}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f)
    dwell = config.get("signal_dwell_ms", bc.config_default(build, "signal_dwell_ms"))
    out = {"build": build["name"], "mode": mode, "kind": kind, "round": rnd, "prefix": prefix,
           "config": config, "signal_dwell_ms": int(dwell) if str(dwell).isdigit() else None}
    log(f"{build['name']} {mode} {kind} round {rnd}: prefix {prefix}")
    hf = bench = None
    try:
        pl.checked([build["hfctl"], "topics", "apply", "--file", build["topics_file"]], envx,
                   "topics apply", 120)
        hf = pl.Proc([build["holdfast"], "run", "--stages", "counter,aggregator,gateway",
                      "--state-dir", os.path.join(work, "state"), "--config",
                      os.path.join(work, "config.json")], os.path.join(work, "holdfast.log"), envx)
        pl.checked([build["seeder"], "seed", "--skus", str(SKUS), "--per-sku", "5", "--stock",
                    "200", "--doorbuster-stock", str(DOOR)], envx, "seed", 600)
        wait_still(prefix, 3)
        time.sleep(2)  # pinned allotments are primed by the gateways' ticks
        report = os.path.join(work, "report.json")
        # Line-buffered: hfbench's header (the load starts 0.5 s after it) reaches the
        # file when printed, not with the first per-second line's flush a second later.
        bench = pl.Proc(["stdbuf", "-oL", pl.HFBENCH, "run", "--scenario", "flash-sale",
                         "--rate", str(RATE), "--seconds", str(SECONDS), "--skus", str(SKUS),
                         "--doorbuster-stock", str(DOOR), "--burst-factor", str(FACTOR),
                         "--busy-retries", str(BUSY_RETRIES), "--door-tail-rate",
                         str(DOOR_TAIL), "--report", report],
                        os.path.join(work, "hfbench.out"), envx)
        t_load = pl.wait_header(bench, 180)
        age = bc.broker_age_s(broker)
        out["broker_age_at_load_s"] = None if age is None else round(age + t_load - time.time())
        t_burst = t_load + BURST_AT_S
        samples, stop = [], threading.Event()
        sampler = threading.Thread(target=sample_escrow, args=(
            port, t_burst, t_burst + BURST_S + SAMPLE_AFTER_BURST_S, stop, samples))
        sampler.start()
        try:
            rc = bench.p.wait(SECONDS + 900)
        finally:
            stop.set()
            sampler.join()
        out["hfbench_exit"] = rc  # 3: duplicate replies disagreed or oversold (reported)
        if not os.path.exists(report):
            raise RuntimeError(f"hfbench run exit {rc}, no report: "
                               f"{open(bench.out_path).read()[-300:]}")
        rep = json.load(open(report))
        out["summary"] = rep["summary"]
        burst = [s["reserve_p99_ms"] for s in rep.get("per_second", [])
                 if BURST_AT_S <= s["t"] <= BURST_AT_S + BURST_S + 1]
        out["burst_p99_max_ms"] = max(burst) if burst else None
        out["escrow_samples"] = samples
        out["escrow_switch"] = switch(samples, mode)
        wait_still(prefix)
        out["escrow_metrics"] = escrow_metrics(port)
        verdict = pl.reconcile(build, envx, os.path.join(work, "reconcile.json"), True)
        out["reconcile"] = verdict.get("verdict")
        out["violations"] = verdict.get("violations_by_kind")
        view = json.loads(pl.checked([build["hfctl"], "availability", "--sku", "DOORBUSTER"],
                                     envx, "availability", 60))
        out["doorbuster_left"] = view.get("total")
        out["doorbuster_in_allotments"] = sum(w.get("escrow", 0)
                                              for w in view.get("warehouses", []))
    except (RuntimeError, OSError, subprocess.TimeoutExpired, json.JSONDecodeError,
            KeyError) as e:
        out["error"] = str(e)
        log(f"  ERROR {e}")
    finally:
        for p in (bench, hf):
            if p:
                p.stop()
        subprocess.run([pl.TOPICS_TOOL, "delete", prefix], capture_output=True)
        shutil.rmtree(os.path.join(work, "state"), ignore_errors=True)
    log("  " + " ".join(cells(out)))
    return out


def pct(n, d):
    return f"{n} ({100 * n / d:.2f}%)" if d else str(n)


def sold_out_cell(o):
    ms = o["summary"]["doorbuster"].get("sold_out_signal_after_last_hold_ms")
    if ms is None or ms < 0:
        return "none"
    dwell = o.get("signal_dwell_ms")
    verdict = "?" if dwell is None else ("ok" if ms <= dwell + SOLD_OUT_SLACK_MS else "LATE")
    return f"+{ms} ms {verdict}"


def switch_cell(o):
    sw = o.get("escrow_switch") or {}
    if sw.get("state") != "yes":
        return sw.get("state", "?")
    return f"yes +{sw['after_burst_s']} s"


COLUMNS = [("build", 10), ("mode", 8), ("run", 5), ("brk age", 8), ("shoppers", 8),
           ("BUSY left", 15), ("BUSY answers", 15), ("burst p99", 9), ("p50/p99", 10),
           ("sold", 11), ("over", 4), ("left (allot/aband)", 18), ("SOLD_OUT", 14),
           ("escrow itself", 13), ("one-hop", 7), ("reconcile", 9)]


def cells(o):
    head = [o["build"], o["mode"], o["kind"],
            "?" if o.get("broker_age_at_load_s") is None else f"{o['broker_age_at_load_s']} s"]
    if "error" in o:
        return head + [f"error: {o['error'][:120]}"]
    s = o["summary"]
    d = s.get("doorbuster") or {}
    shoppers = s["reserves"]
    return head + [
        str(shoppers), pct(s["busy"], shoppers),
        pct(s["busy"] + s.get("busy_resends", 0), shoppers),
        f"{o['burst_p99_max_ms']} ms", f"{s['reserve_ms']['p50']}/{s['reserve_ms']['p99']}",
        f"{d.get('units_committed')}/{DOOR}", str(d.get("oversold")),
        f"{o.get('doorbuster_left')} ({o.get('doorbuster_in_allotments')}/"
        f"{d.get('released_after_demand')})", sold_out_cell(o), switch_cell(o),
        str(int((o.get("escrow_metrics") or {}).get("holdfast_escrow_holds_taken_total") or 0)),
        str(o.get("reconcile"))]


def row(values):
    return "  ".join(f"{v:<{w}}" for v, (_, w) in zip(values, COLUMNS))


def busy_shares(o):
    s = o["summary"]
    return (100 * s["busy"] / s["reserves"],
            100 * (s["busy"] + s.get("busy_resends", 0)) / s["reserves"])


def medians(runs, builds):
    lines = []
    for b in builds:
        for mode in MODES:
            ok = [o for o in runs if o["build"] == b["name"] and o["mode"] == mode
                  and o["kind"] == "warm" and "error" not in o]
            if not ok:
                continue
            med = lambda f: statistics.median(f(o) for o in ok)  # noqa: E731
            lines.append(
                f"  {b['name']:<10} {mode:<8} "
                f"burst p99 {med(lambda o: o['burst_p99_max_ms'] or 0)} ms, "
                f"reserve p99 {med(lambda o: o['summary']['reserve_ms']['p99'])} ms, "
                f"BUSY left {med(lambda o: busy_shares(o)[0]):.2f}%, "
                f"BUSY answers {med(lambda o: busy_shares(o)[1]):.2f}%, "
                f"sold {med(lambda o: o['summary']['doorbuster']['units_committed'])}/{DOOR}, "
                f"reconcile {'PASS' if all(o['reconcile'] == 'PASS' for o in ok) else 'FAIL'} "
                f"({len(ok)} run(s))")
    return lines


def main():
    for tool in (pl.HFBENCH, pl.TOPICS_TOOL):
        if not os.access(tool, os.X_OK):
            sys.exit(f"bench-flash: {tool} missing (make release build/pipeline-topics)")
    if not shutil.which("stdbuf"):
        sys.exit("bench-flash: stdbuf (coreutils) missing: it times the load's start")
    builds = bc.builds("bench-flash")
    broker = bc.broker("bench-flash")
    broker_root = bc.local_broker_root(broker) if COLD else None
    if COLD and not broker_root:
        sys.exit(f"bench-flash: BENCH_COLD=1 restarts the broker, and the one at {bc.BOOTSTRAP} "
                 f"(pid {broker['pid']}, config {broker.get('config')}) is not the local one "
                 "tools/kafka/kafka-up.sh starts (bootstrap 127.0.0.1 or localhost, config "
                 "<checkout>/.cache/kafka/server.properties): not restarting it")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_root = os.path.join("build", "bench", f"flash-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    facts, text = bc.conditions(builds, broker)
    load = (f"{RATE} reserves/s over {SKUS} SKUs for {SECONDS} s, plus {FACTOR * DOOR} "
            f"shoppers within {BURST_S} s from t = {BURST_AT_S} s for a {DOOR}-unit DOORBUSTER "
            f"over 5 warehouses, then {DOOR_TAIL} doorbuster shoppers/s from t = 4 s to the end; "
            f"a shopper answered BUSY tries again up to {BUSY_RETRIES} times (250 ms doubling)")
    modes = "; ".join(f"{m}: {json.dumps(ALL_MODES[m]) if ALL_MODES[m] else 'the defaults'}"
                      for m in MODES)
    autos = ", ".join(f"{b['name']} {bc.config_default(b, 'escrow_auto_reserves_s')}"
                      for b in builds)
    text += [f"load: {load}",
             f"modes ({ROUNDS} round(s), builds alternating run by run): {modes}; BENCH_CONFIG "
             f"{json.dumps(EXTRA)}; escrow_auto_reserves_s default (docs): {autos}",
             "cold: " + ("one default run per build, each on a restarted broker" if COLD
                         else "off (BENCH_COLD=1)")]
    for t in text:
        log(t)
    runs, n = [], 0
    for rnd in range(1, ROUNDS + 1):
        for mode in MODES:
            for b in bc.alternate(builds, rnd):
                n += 1
                runs.append(one_run(b, mode, "warm", rnd, n, work_root, broker))
    for b in builds if COLD else []:
        n += 1
        log(f"cold: restarting the broker with {broker_root}/tools/kafka")
        try:
            broker = bc.restart_local_broker(broker_root, "bench-flash")
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            runs.append({"build": b["name"], "mode": "default", "kind": "cold", "error": str(e)})
            continue
        o = one_run(b, "default", "cold", 1, n, work_root, broker)
        o["broker"] = {k: broker.get(k) for k in ("pid", "version", "heap", "gc")}
        if (o.get("broker_age_at_load_s") or 0) > COLD_WITHIN_S:
            o["note"] = f"the load started {o['broker_age_at_load_s']} s into the broker's life"
        runs.append(o)
    print("\n== bench-flash\n" + "\n".join("  " + t for t in text))
    print("(BUSY left: shoppers whose last answer was BUSY; BUSY answers: every BUSY, retried "
          f"or not; both of shoppers. burst p99: the worst per-second reserve p99, t = "
          f"{BURST_AT_S}..{BURST_AT_S + BURST_S + 1} s. SOLD_OUT: after the last hold, ok within "
          f"the dwell + {SOLD_OUT_SLACK_MS} ms. escrow itself: +s after the burst began)")
    print(row([c for c, _ in COLUMNS]))
    for o in runs:
        print(row(cells(o)) + (f"  ({o['note']})" if o.get("note") else ""))
    med = medians(runs, builds)
    if med:
        print("medians of the warm runs:\n" + "\n".join(med))
    path = os.path.join("build", "bench", f"flash-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"conditions": facts, "conditions_text": text, "runs": runs}, f, indent=1,
                  default=str)
    print(f"json: {path}")
    return 0 if all(o.get("reconcile") == "PASS" for o in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
