#!/usr/bin/env python3
"""make bench-expiry: a mass expiry while shoppers go on reserving (issue 46, item 2).
A flash sale's abandoned carts all lapse within the same minute; the brief says every
hold is released within 5 s of its TTL, and reserves must not suffer while it happens.

1. The highest sustained rate, unless EXPIRY_SUSTAINED gives it: make bench-pipeline's
   ladder (EXPIRY_LADDER, 15 s a rate, its rule for "sustained"), same build, same run.
2. On fresh topics: holdfast run (the three stages), hfbench seed, then two hfbench runs:
   - the background: steady reserves at EXPIRY_RATE (1,000/s) with the usual mix of
     commits, releases and short-TTL expiries, from before the build-up to after the
     expiry window;
   - the build-up: M reserves (EXPIRY_HOLDS; default 60 s x half the sustained rate,
     at most 1,000,000) sent over EXPIRY_BUILD_SECONDS (60), none settled, every one with
     TTL EXPIRY_TTL_MS (90,000): their expiries fall within the same 60 s, after the
     build-up has ended.
3. Expiry lag from the ledger's EXPIRED events of the build-up's reservations (at_ms -
   expires_at_ms, the gateway's clock): p50/p99/max, and per second. Reserve p99 of the
   background before the expiries (from the build-up's end to the first expiry) and
   during them (the expiry window), per second and over each window.
4. hfctl reconcile --quiescent 1 once the topics stand still.
Verdict: max expiry lag <= 5,000 ms, every build-up hold expired, background reserve
p99 during <= 2x before, reconcile PASS.

Printed beside the figures: the broker (version, heap, age), its ceiling (Kafka's
ProducerPerformance, EXPIRY_CEILING_SECONDS 15, 0: none), the cores of the broker,
holdfast and the two hfbench over each window, and what else was busy before the run.
Env (defaults): EXPIRY_SUSTAINED (unset: measured), EXPIRY_LADDER "2000 3000 4000 5000 6000
7000 8000", EXPIRY_HOLDS, EXPIRY_BUILD_SECONDS 60, EXPIRY_TTL_MS 90000, EXPIRY_RATE 1000,
EXPIRY_SKUS 10000, EXPIRY_PER_SKU 5, EXPIRY_STOCK 1000000, EXPIRY_CONFIG (JSON merged into
holdfast's config), EXPIRY_OUT build/bench, HOLDFAST_BOOTSTRAP."""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline as pl  # noqa: E402  (also chdirs to the repository root)

LADDER = [int(x) for x in pl.env("EXPIRY_LADDER", "2000 3000 4000 5000 6000 7000 8000").split()]
SUSTAINED = pl.env_int("EXPIRY_SUSTAINED", 0)
HOLDS = pl.env_int("EXPIRY_HOLDS", 0)
HOLDS_MAX = 1000000
BUILD_S = pl.env_int("EXPIRY_BUILD_SECONDS", 60)
TTL_MS = pl.env_int("EXPIRY_TTL_MS", 90000)
RATE = pl.env_int("EXPIRY_RATE", 1000)
SKUS = pl.env_int("EXPIRY_SKUS", 10000)
PER_SKU = pl.env_int("EXPIRY_PER_SKU", 5)
STOCK = pl.env_int("EXPIRY_STOCK", 1000000)
CEILING_S = pl.env_int("EXPIRY_CEILING_SECONDS", 15)
CONFIG = json.loads(pl.env("EXPIRY_CONFIG", "{}"))
OUT_DIR = pl.env("EXPIRY_OUT", "build/bench")
EXPIRY_BOUND_MS = 5000  # the brief: released within 5 s of the TTL
WARMUP_S = 5  # the background runs alone before the build-up starts
LEAD_S = 10  # the background keeps going after the last expiry


def log(msg):
    print(f"[expiry {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def highest_sustained(build, broker, work_root):
    """make bench-pipeline's ladder: the highest rate it calls sustained."""
    best = 0
    misses = 0
    for n, rate in enumerate(LADDER):
        run = pl.one_run(build, rate, 15, "ladder", 1, n, work_root, broker)
        if run.get("sustained"):
            best, misses = rate, 0
        else:
            misses += 1
            if misses == 2:
                break
    return best


def p99_of(rows, t0, t1):
    """Median of the per-second reserve p99 over background seconds [t0, t1), and the
    worst second."""
    v = [r["reserve_p99_ms"] for r in rows if t0 <= r["t"] < t1 and r["reserve_p99_ms"] >= 0]
    return {"seconds": len(v), "median_p99_ms": statistics.median(v) if v else None,
            "max_p99_ms": max(v) if v else None}


def window_cores(ids, t_end):
    a = pl.window_sample(ids)
    time.sleep(max(1, t_end - time.time()))
    b = pl.window_sample(ids)
    return pl.cpu_window(a, b, ids)["cores"]


def mass_expiry(build, holds, work_root, broker):
    work = os.path.join(work_root, "mass-expiry")
    os.makedirs(work, exist_ok=True)
    prefix = f"bx{os.getpid()}."
    envx = {"HOLDFAST_TOPIC_PREFIX": prefix, "HOLDFAST_APP_ID": prefix + "app",
            "HOLDFAST_BOOTSTRAP": pl.BOOTSTRAP}
    port = pl.free_port()
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(dict({"metrics_port": port}, **CONFIG), f)
    build_rate = max(1, holds // BUILD_S)
    # The background covers its warm-up, the build-up, the wait for the first expiry,
    # the expiry window (as long as the build-up) and a lead after it.
    expiry_start_s = WARMUP_S + TTL_MS / 1000
    bg_seconds = int(expiry_start_s + BUILD_S + LEAD_S + 5)
    res = {"holds": holds, "build_rate": build_rate, "build_seconds": BUILD_S, "ttl_ms": TTL_MS,
           "background_rate": RATE, "background_seconds": bg_seconds, "prefix": prefix}
    log(f"mass expiry: {holds} holds at {build_rate}/s for {BUILD_S} s, TTL {TTL_MS} ms, "
        f"{RATE}/s of reserves around them for {bg_seconds} s (prefix {prefix})")
    hf = None
    try:
        pl.checked([build["hfctl"], "topics", "apply", "--file", build["topics_file"]], envx,
                   "hfctl topics apply", 120)
        hf = pl.Proc([build["holdfast"], "run", "--stages", "counter,aggregator,gateway",
                      "--state-dir", os.path.join(work, "state"), "--config",
                      os.path.join(work, "config.json")], os.path.join(work, "holdfast.log"), envx)
        pl.checked([pl.HFBENCH, "seed", "--skus", str(SKUS), "--per-sku", str(PER_SKU), "--stock",
                    str(STOCK)], envx, "hfbench seed", 900)
        pl.wait_still(prefix, pl.SETTLED_QUIET_S, pl.IDLE_TIMEOUT_S, "seed")
        bg_report = os.path.join(work, "background.json")
        bg = pl.Proc([pl.HFBENCH, "run", "--scenario", "steady", "--rate", str(RATE), "--seconds",
                      str(bg_seconds), "--skus", str(SKUS), "--seed", "2", "--report", bg_report],
                     os.path.join(work, "background.out"), envx)
        t_bg = pl.wait_header(bg, 180)
        time.sleep(max(0, t_bg + WARMUP_S - time.time()))
        build_report = os.path.join(work, "build-up.json")
        bu = pl.Proc([pl.HFBENCH, "run", "--scenario", "steady", "--rate", str(build_rate),
                      "--seconds", str(BUILD_S), "--skus", str(SKUS), "--seed", "1",
                      "--commit-pct", "0", "--abandon-pct", "0", "--late-pct", "0",
                      "--dup-pct", "0", "--ttl-ms", str(TTL_MS), "--report", build_report],
                     os.path.join(work, "build-up.out"), envx)
        t_bu = pl.wait_header(bu, 180)
        ids = {"prefix": prefix, "port": port, "broker": broker["pid"], "holdfast": hf.pid,
               "hfbench": bu.pid}
        # Seconds of the background's clock (its t=0 is t_bg).
        off = t_bu - t_bg
        res["windows"] = {"build_up": [round(off), round(off + BUILD_S)],
                          "before": [round(off + BUILD_S + 2), round(off + TTL_MS / 1000)],
                          "during": [round(off + TTL_MS / 1000), round(off + TTL_MS / 1000 + BUILD_S + 5)]}
        res["cores"] = {"build_up": window_cores(ids, t_bu + BUILD_S)}
        time.sleep(max(0, t_bu + TTL_MS / 1000 - time.time()))
        res["cores"]["expiry"] = window_cores(ids, t_bu + TTL_MS / 1000 + BUILD_S)
        for p, what in ((bu, "build-up"), (bg, "background")):
            rc = p.p.wait(TTL_MS / 1000 + BUILD_S + 900)
            p.f.close()
            if rc != 0:
                raise RuntimeError(f"hfbench ({what}) exit {rc}: {open(p.out_path).read()[-300:]}")
        bu_r, bg_r = json.load(open(build_report)), json.load(open(bg_report))
        s = bu_r["summary"]
        res["build_up"] = {k: s.get(k) for k in ("reserves", "held", "busy", "rejected_insufficient",
                                                   "without_reply", "expired_seen", "expiry_lag_ms")}
        res["build_up"]["reserve_ms"] = s["reserve_ms"]
        # Per second of the build-up's clock: how many expired and the worst lag.
        res["expiry_per_second"] = [{"t": r["t"], "expired": r["expired"],
                                     "lag_max_ms": r["expiry_lag_max_ms"]}
                                    for r in bu_r["per_second"] if r.get("expired")]
        rows = bg_r["per_second"]
        res["background"] = {"summary_reserve_ms": bg_r["summary"]["reserve_ms"],
                             "before": p99_of(rows, *res["windows"]["before"]),
                             "during": p99_of(rows, *res["windows"]["during"]),
                             "per_second_p99_ms": [r["reserve_p99_ms"] for r in rows]}
        pl.wait_still(prefix, pl.IDLE_QUIET_S, pl.IDLE_TIMEOUT_S, "drain")
        verdict = pl.reconcile(build, envx, os.path.join(work, "reconcile.json"), True)
        res["reconcile"] = {k: verdict.get(k) for k in ("verdict", "exit", "violations_total",
                                                        "violations_by_kind", "detail")}
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        res["error"] = str(e)
        log(f"  ERROR {e}")
    finally:
        if hf:
            res["holdfast_exit"] = hf.stop()
        pl.subprocess.run([pl.TOPICS_TOOL, "delete", prefix], capture_output=True)
    return res


def judge(res):
    lag = (res.get("build_up") or {}).get("expiry_lag_ms") or {}
    held = (res.get("build_up") or {}).get("held")
    bgw = res.get("background") or {}
    before = (bgw.get("before") or {}).get("median_p99_ms")
    during = (bgw.get("during") or {}).get("median_p99_ms")
    checks = {
        "max expiry lag <= 5000 ms": lag.get("max") is not None and 0 <= lag["max"] <= EXPIRY_BOUND_MS,
        "every held build-up reserve expired": held is not None and lag.get("count") == held,
        "background reserve p99 during <= 2x before": bool(before and during is not None
                                                             and during <= 2 * before),
        "reconcile PASS": (res.get("reconcile") or {}).get("verdict") == "PASS",
    }
    return checks


def main():
    builds = pl.parse_builds()
    build = builds[0]
    broker_pid = pl.find_broker()
    if not broker_pid:
        sys.exit(f"bench-expiry: no Kafka broker at {pl.BOOTSTRAP} ('make kafka-up')")
    broker = pl.broker_facts(broker_pid)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_root = os.path.join(OUT_DIR, f"expiry-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    cond = pl.conditions(builds, broker)
    cond.update({"ttl_ms": TTL_MS, "build_seconds": BUILD_S, "background_rate": RATE,
                 "catalog": {"skus": SKUS, "per_sku": PER_SKU, "stock": STOCK}, "config": CONFIG})
    log("conditions: " + json.dumps({k: cond[k] for k in ("cores", "cpu_model", "load_average",
                                                          "before_runs_busy")}))
    out = {"conditions": cond}
    sustained = SUSTAINED or highest_sustained(build, broker, work_root)
    out["sustained_per_s"] = sustained
    out["sustained_source"] = "EXPIRY_SUSTAINED" if SUSTAINED else "measured (ladder)"
    holds = HOLDS or min(HOLDS_MAX, BUILD_S * sustained // 2)
    log(f"highest sustained: {sustained}/s ({out['sustained_source']}); mass expiry of {holds}")
    if holds <= 0:
        sys.exit("bench-expiry: no sustained rate measured; set EXPIRY_SUSTAINED or EXPIRY_HOLDS")
    out["run"] = mass_expiry(build, holds, work_root, broker)
    out["ceiling"] = pl.ceiling(broker, 200, CEILING_S, work_root) if CEILING_S else None
    out["checks"] = judge(out["run"])
    path = os.path.join(OUT_DIR, f"expiry-{stamp}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    r = out["run"]
    lag = (r.get("build_up") or {}).get("expiry_lag_ms") or {}
    bgw = r.get("background") or {}
    c = out.get("ceiling") or {}
    print(f"\nmass expiry: {r['holds']} holds built at {r['build_rate']}/s, TTL {TTL_MS} ms, "
          f"{RATE}/s reserves around them; broker {broker.get('version')} heap "
          f"{broker.get('heap')} up {broker.get('up_s')} s; ceiling {c.get('records_per_s')} "
          f"records/s ({c.get('broker_cpu_s_per_million_records')} broker CPU-s per million)")
    print(f"  expiry lag (ledger at_ms - expires_at_ms): {lag.get('count')} expired of "
          f"{(r.get('build_up') or {}).get('held')} held, p50 {lag.get('p50')} / p99 "
          f"{lag.get('p99')} / max {lag.get('max')} ms")
    print("  per second (t of the build-up's run: expired, worst lag ms): "
          + " ".join(f"{e['t']}:{e['expired']}/{e['lag_max_ms']}" for e in r.get("expiry_per_second", [])))
    print(f"  background reserve p99 (median of seconds / worst second): before "
          f"{(bgw.get('before') or {}).get('median_p99_ms')} / {(bgw.get('before') or {}).get('max_p99_ms')} ms, "
          f"during {(bgw.get('during') or {}).get('median_p99_ms')} / "
          f"{(bgw.get('during') or {}).get('max_p99_ms')} ms")
    print(f"  cores: {json.dumps(r.get('cores'))}")
    print(f"  reconcile: {(r.get('reconcile') or {}).get('verdict')}" +
          (f"; error: {r['error']}" if r.get("error") else ""))
    pl.exit_with_checks(out["checks"], path)


if __name__ == "__main__":
    main()
