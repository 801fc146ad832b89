#!/usr/bin/env python3
"""make bench-holds: many open holds at once (issue 46, item 1). The brief's peak keeps
~72 million holds open (80,000 reserves/s x a 15-minute TTL); every other bench lets its
holds settle or lapse within seconds. This one builds up HOLDS_N of them and measures
what they cost while open:

1. The three stages in processes of their own (RSS and state per stage), the catalog
   seeded (HOLDS_SKUS x HOLDS_PER_SKU pairs, HOLDS_STOCK units each: stock is never the
   limit).
2. "empty": reserves at HOLDS_LOAD_RATE (1,000/s) for HOLDS_LOAD_SECONDS (20) with the
   usual mix (reserve p50/p99), then RSS and state size of each stage.
3. The build-up: HOLDS_N reserves at HOLDS_RATE (3,000/s), none settled, each with a
   TTL longer than the build-up and the rest of the run (HOLDS_TTL_MS: unset, the
   build-up's length plus an hour, at most 24 h), hfbench run --leave-open.
4. "open": the same load as in 2 with the holds open (reserve p99 against "empty",
   same run), then RSS and state size again: bytes a hold per stage.
5. A full restore of the counter and of the gateway (each stopped, its state removed,
   started again: records/s per partition from their logs), before the build-up (after
   2) and with the holds open.
6. A standby's catch-up with the holds open, for the counter and the gateway: a second
   process of the stage joins (instance "...-b", empty state): the group moves one
   partition to it (it restores that one) and its standby follows the other from the
   beginning of its changelog until it is current (records/s and time from its log line
   "standby caught up with partition P"); then it stops and the partition moves back.
7. hfctl reconcile --quiescent 1 (time, peak RSS; sharded in HOLDS_RECONCILE_MEMORY_MB).

Verdict (the issue's targets): RSS of the three stages together <= 4 GB (scaled to 10M
holds when HOLDS_N is smaller), reserve p99 "open" <= 1.5x "empty", each restore's records/s with
the holds open >= 0.8x without, reconcile PASS.
Printed beside them: the broker (version, heap, age), its ceiling (HOLDS_CEILING_SECONDS
15, 0: none), cores of the broker and the stages over each load.
Env (defaults): HOLDS_N 10000000, HOLDS_RATE 3000, HOLDS_TTL_MS, HOLDS_SKUS 100000,
HOLDS_PER_SKU 5, HOLDS_STOCK 1000000, HOLDS_LOAD_RATE 1000, HOLDS_LOAD_SECONDS 20,
HOLDS_CONFIG (JSON merged into each stage's config), HOLDS_RECONCILE_MEMORY_MB (700 a
million holds, at least 2048),
HOLDS_OUT build/bench, HOLDFAST_BOOTSTRAP."""
import json
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline as pl  # noqa: E402  (also chdirs to the repository root)
import scale as sc  # noqa: E402

N = pl.env_int("HOLDS_N", 10000000)
RATE = pl.env_int("HOLDS_RATE", 3000)
SKUS = pl.env_int("HOLDS_SKUS", 100000)
PER_SKU = pl.env_int("HOLDS_PER_SKU", 5)
STOCK = pl.env_int("HOLDS_STOCK", 1000000)
LOAD_RATE = pl.env_int("HOLDS_LOAD_RATE", 1000)
LOAD_S = pl.env_int("HOLDS_LOAD_SECONDS", 20)
CONFIG = json.loads(pl.env("HOLDS_CONFIG", "{}"))
# The replay keeps every reservation's record in memory whatever the shards (hfctl
# estimates ~420 MiB a million; 2048 refused 10M on 2026-12-07): 700 MiB a million.
RECONCILE_MEMORY_MB = pl.env_int("HOLDS_RECONCILE_MEMORY_MB", max(2048, 700 * -(-N // 1000000)))
CEILING_S = pl.env_int("HOLDS_CEILING_SECONDS", 15)
OUT_DIR = pl.env("HOLDS_OUT", "build/bench")
BUILD_S = -(-N // RATE)
TTL_MS = pl.env_int("HOLDS_TTL_MS", min(86400000, (BUILD_S + 3600) * 1000))
STAGES = ("counter", "aggregator", "gateway")
OPEN_UNTIL = None  # when the build-up's first hold lapses (time.time())
RSS_TARGET_MIB_AT_10M = 4096
TARGET_HOLDS = 10000000


def log(msg):
    print(f"[holds {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def start_stage(stage, work, envx):
    return sc.start_stage(stage, work, envx, CONFIG, "holds")


def footprint(procs, work):
    out = {}
    for st in STAGES:
        rss, peak = (round(v / 1024) if v else None for v in sc.mem_kib(procs[st].pid))
        out[st] = {"rss_mib": rss, "peak_rss_mib": peak,
                   "state_mib": round(sc.dir_bytes(os.path.join(work, f"state-{st}")) / 2**20, 1)}
    return out


def hfbench(work, envx, label, args):
    report = os.path.join(work, f"hfbench-{label}.json")
    p = pl.Proc([os.path.abspath("build/hfbench"), "run", "--scenario", "steady", "--skus",
                 str(SKUS), "--report", report] + args, os.path.join(work, f"hfbench-{label}.out"),
                envx)
    return p, report


def measured_run(procs, work, envx, broker_pid, label, args, timeout_s, started=None):
    """One hfbench run: its summary, the cores of the broker and each stage over it and
    its length in seconds. started(t0), when given, is told when the run starts."""
    pids = dict({s: procs[s].pid for s in STAGES}, broker=broker_pid)
    p, report = hfbench(work, envx, label, args)
    a = sc.sample(pids)
    t0 = time.time()
    if started:
        started(t0)
    rc = p.p.wait(timeout_s)
    b = sc.sample(pids)
    p.f.close()
    if rc != 0:
        raise RuntimeError(f"hfbench ({label}) exit {rc}: {open(p.out_path).read()[-300:]}")
    return (json.load(open(report))["summary"], sc.between(a, b)["cores"],
            round(time.time() - t0))


def load(procs, work, envx, broker_pid, label, seed):
    """LOAD_RATE reserves/s for LOAD_S with the usual mix: its summary and the cores."""
    s, cores, _ = measured_run(procs, work, envx, broker_pid, label,
                               ["--rate", str(LOAD_RATE), "--seconds", str(LOAD_S),
                                "--seed", str(seed)], LOAD_S + 600)
    out = {"reserve_ms": s["reserve_ms"], "busy": s.get("busy"), "reserves": s["reserves"],
           "without_reply": s["without_reply"], "cores": cores}
    log(f"  {label}: {LOAD_RATE}/s for {LOAD_S} s: reserve ms {out['reserve_ms']}, "
        f"cores {out['cores']}")
    return out


def build_up(procs, work, envx, broker_pid):
    log(f"  build-up: {N} reserves at {RATE}/s ({BUILD_S} s), TTL {TTL_MS} ms, none settled")

    # The first hold lapses TTL_MS after the build-up starts: every measurement "with
    # the holds open" must end before that (checked in judge()).
    def started(t0):
        global OPEN_UNTIL
        OPEN_UNTIL = t0 + TTL_MS / 1000

    s, cores, seconds = measured_run(
        procs, work, envx, broker_pid, "build-up",
        ["--rate", str(RATE), "--seconds", str(BUILD_S), "--seed", "7", "--commit-pct", "0",
         "--abandon-pct", "0", "--late-pct", "0", "--dup-pct", "0", "--ttl-ms", str(TTL_MS),
         "--leave-open"], BUILD_S + 900, started)
    out = {"seconds": seconds, "reserves": s["reserves"], "held": s["held"],
           "busy": s.get("busy"), "rejected_insufficient": s.get("rejected_insufficient"),
           "without_reply": s["without_reply"], "reserve_ms": s["reserve_ms"], "cores": cores}
    log(f"  built: {out['held']} held of {out['reserves']} in {out['seconds']} s, "
        f"reserve ms {out['reserve_ms']}, cores {out['cores']}")
    return out


def per_hold(before, after, held):
    out = {}
    for st in STAGES:
        b, a = before[st], after[st]
        out[st] = {k.replace("_mib", "_bytes"): round((a[k] - b[k]) * 2**20 / held, 1)
                   if held and a.get(k) is not None and b.get(k) is not None else None
                   for k in ("rss_mib", "state_mib")}
    return out


def run(work_root, broker_pid):
    work = os.path.join(work_root, "holds")
    os.makedirs(work, exist_ok=True)
    prefix = f"bh{os.getpid()}."
    envx = {"HOLDFAST_TOPIC_PREFIX": prefix, "HOLDFAST_APP_ID": prefix + "app",
            "HOLDFAST_BOOTSTRAP": pl.BOOTSTRAP}
    res = {"prefix": prefix}
    procs = {}
    try:
        pl.checked([os.path.abspath("build/hfctl"), "topics", "apply", "--file",
                    "topics/topics.json"], envx, "hfctl topics apply", 120)
        for st in STAGES:
            procs[st] = start_stage(st, work, envx)
        time.sleep(3)
        t0 = time.time()
        pl.checked([os.path.abspath("build/hfbench"), "seed", "--skus", str(SKUS), "--per-sku",
                    str(PER_SKU), "--stock", str(STOCK)], envx, "hfbench seed", 3600)
        res["seed_s"] = round(time.time() - t0, 1)
        pl.wait_still(prefix, pl.SETTLED_QUIET_S, 600, "seed")
        res["empty"] = load(procs, work, envx, broker_pid, "empty", 1)
        pl.wait_still(prefix, pl.IDLE_QUIET_S, 600, "drain")
        res["restore_empty"] = restores(procs, work, envx, broker_pid, "no open holds")
        pl.wait_still(prefix, pl.IDLE_QUIET_S, 600, "restores")
        res["footprint_empty"] = footprint(procs, work)
        log(f"  footprint, no open holds: {res['footprint_empty']}")
        res["build_up"] = build_up(procs, work, envx, broker_pid)
        pl.wait_still(prefix, pl.SETTLED_QUIET_S, 1800, "build-up")
        res["footprint_open"] = footprint(procs, work)
        held = res["build_up"]["held"]
        res["per_hold_bytes"] = per_hold(res["footprint_empty"], res["footprint_open"], held)
        log(f"  footprint, {held} open: {res['footprint_open']}; bytes a hold "
            f"{res['per_hold_bytes']}")
        res["open"] = load(procs, work, envx, broker_pid, "open", 2)
        pl.wait_still(prefix, pl.IDLE_QUIET_S, 600, "drain")
        res["restore"] = restores(procs, work, envx, broker_pid, f"{held} open holds")
        res["standby"] = standbys(procs, work, envx, broker_pid, f"{held} open holds")
        pl.wait_still(prefix, pl.IDLE_QUIET_S, 600, "standbys")
        res["holds_still_open"] = OPEN_UNTIL is not None and time.time() < OPEN_UNTIL
        res["reconcile"] = reconcile(envx, work)
        log(f"  reconcile: {res['reconcile']}")
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        res["error"] = str(e)
        log(f"  ERROR {e}")
    finally:
        for p in procs.values():
            p.stop()
        pl.subprocess.run([pl.TOPICS_TOOL, "delete", prefix], capture_output=True)
    return res


def restores(procs, work, envx, broker_pid, what):
    """A full restore of the counter, then of the gateway: each stopped, its state
    removed, started again."""
    out = {}
    for st, parts in (("counter", sc.counter_partitions()), ("gateway", gateway_partitions())):
        r = sc.measure_restore(procs, work, envx, parts, broker_pid, st, start_stage)
        out[st] = r
        log(f"  {st} restore with {what}: {r['records']} records, median "
            f"{r['records_per_s_median']} records/s a partition, slowest {r['ms_max']} ms")
    return out


CAUGHT_UP = re.compile(r"standby caught up with partition (\d+): (\d+) changelog records "
                       r"from offset (-?\d+) in (\d+) ms")
STANDBY_TIMEOUT_S = 1800


def standbys(procs, work, envx, broker_pid, what):
    """For the counter and the gateway: a second process of the stage joins with empty
    state; its standby's catch-up of the partition it does not own, from its log."""
    out = {}
    for st in ("counter", "gateway"):
        cfg = os.path.join(work, f"config-{st}-b.json")
        with open(cfg, "w") as f:
            json.dump(dict({"metrics_port": pl.free_port()}, **CONFIG), f)
        log_path = os.path.join(work, f"{st}-b.log")
        # From nothing: a copy a killed run left would only be brought up to date.
        shutil.rmtree(os.path.join(work, f"state-{st}-b"), ignore_errors=True)
        a = sc.sample({"broker": broker_pid})
        proc = pl.Proc([os.path.abspath("build/holdfast"), "run", "--stages", st, "--instance",
                        f"holds-{st}-b", "--state-dir", os.path.join(work, f"state-{st}-b"),
                        "--config", cfg], log_path, envx)
        try:
            t0 = time.time()
            got = None
            while time.time() - t0 < STANDBY_TIMEOUT_S and got is None:
                with open(log_path) as f:
                    got = next((m for m in map(CAUGHT_UP.search, f) if m), None)
                if got is None and proc.p.poll() is not None:
                    raise RuntimeError(f"the second {st} exited {proc.p.returncode}: {log_path}")
                time.sleep(0.5)
            if got is None:
                raise RuntimeError(f"the second {st}'s standby did not catch up in "
                                   f"{STANDBY_TIMEOUT_S} s: {log_path}")
            b = sc.sample({"broker": broker_pid, st: proc.pid})
            used = sc.between(a, b)
            if b["cpu"][st] is not None:
                used["cores"][st] = round(b["cpu"][st] / (b["t"] - a["t"]), 3)
            if got.group(3) != "-1":
                raise RuntimeError(f"the second {st}'s standby did not start from the beginning "
                                   f"of the changelog (offset {got.group(3)}): {log_path}")
            records, ms = int(got.group(2)), int(got.group(4))
            # used: from its start to the catch-up, so also its restore of the
            # partition the group gave it.
            out[st] = {"partition": int(got.group(1)), "records": records, "ms": ms,
                       "records_per_s": round(records * 1000 / ms) if ms else None,
                       "used_with_its_restore": used}
            log(f"  {st} standby catch-up with {what}: partition {got.group(1)}, {records} "
                f"records in {ms} ms ({out[st]['records_per_s']} records/s)")
        finally:
            proc.stop()
            shutil.rmtree(os.path.join(work, f"state-{st}-b"), ignore_errors=True)
        # The first process takes its partition back before the next stage's joins.
        want = pl.stage_partitions("topics/topics.json")
        pl.wait_assigned([procs[st]], [procs[st].metrics_port], pl.ASSIGN_TIMEOUT_S,
                         {st: want[st]})
    return out


def gateway_partitions():
    for x in json.load(open("topics/topics.json"))["topics"]:
        if x["name"].endswith("gateway-changelog"):
            return x["partitions"]
    raise SystemExit("bench-holds: no gateway-changelog topic in topics/topics.json")


def reconcile(envx, work):
    spill = os.path.join(work, "reconcile-spill")
    os.makedirs(spill, exist_ok=True)
    path = os.path.join(work, "reconcile.out")
    t0 = time.time()
    with open(path, "w") as f:
        p = pl.subprocess.Popen([os.path.abspath("build/hfctl"), "reconcile", "--quiescent", "1",
                                 "--violations", "5", "--progress", "0", "--memory-mb",
                                 str(RECONCILE_MEMORY_MB), "--spill-dir", spill],
                                stdout=f, stderr=pl.subprocess.STDOUT, env=dict(os.environ, **envx))
        _, status, usage = os.wait4(p.pid, 0)
    verdict = {}
    for line in open(path):
        if line.startswith("{"):
            verdict = json.loads(line)
    return {"verdict": verdict.get("verdict", "NO VERDICT"),
            "exit": os.waitstatus_to_exitcode(status), "seconds": round(time.time() - t0, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024),
            "violations_by_kind": verdict.get("violations_by_kind")}


def judge(res):
    held = (res.get("build_up") or {}).get("held") or 0
    fo = res.get("footprint_open") or {}
    rss = sum((fo.get(st) or {}).get("rss_mib") or 0 for st in STAGES)
    fe = res.get("footprint_empty") or {}
    rss0 = sum((fe.get(st) or {}).get("rss_mib") or 0 for st in STAGES)
    # At 10M holds: the measured RSS, or the empty RSS plus the per-hold growth scaled.
    rss_10m = rss if held >= TARGET_HOLDS or not held else \
        rss0 + (rss - rss0) * TARGET_HOLDS / held
    p99_e = ((res.get("empty") or {}).get("reserve_ms") or {}).get("p99")
    p99_o = ((res.get("open") or {}).get("reserve_ms") or {}).get("p99")
    res["rss_mib_three_stages"] = rss
    res["rss_mib_at_10m"] = round(rss_10m)
    rates = {}
    for st in ("counter", "gateway"):
        e = ((res.get("restore_empty") or {}).get(st) or {}).get("records_per_s_median")
        o = ((res.get("restore") or {}).get(st) or {}).get("records_per_s_median")
        rates[st] = (e, o)
    return {
        **{f"{st} restore records/s with the holds open >= 0.8x without": bool(e and o and o >= 0.8 * e)
           for st, (e, o) in rates.items()},
        f"RSS of the three stages at 10M holds <= 4 GB ({'measured' if held >= TARGET_HOLDS else 'scaled from ' + str(held)})":
            bool(held) and rss_10m <= RSS_TARGET_MIB_AT_10M,
        "reserve p99 with the holds open <= 1.5x without": bool(p99_e and p99_o is not None
                                                               and p99_o <= 1.5 * p99_e),
        "every build-up reserve held": bool(held) and held == (res.get("build_up") or {}).get("reserves"),
        "no hold lapsed before the last measurement (HOLDS_TTL_MS long enough)":
            bool(res.get("holds_still_open")),
        "reconcile PASS": (res.get("reconcile") or {}).get("verdict") == "PASS",
    }


def main():
    broker_pid = pl.find_broker()
    if not broker_pid:
        sys.exit(f"bench-holds: no Kafka broker at {pl.BOOTSTRAP} ('make kafka-up')")
    broker = pl.broker_facts(broker_pid)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_root = os.path.join(OUT_DIR, f"holds-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    builds = pl.parse_builds()
    cond = pl.conditions(builds, broker)
    cond.update({"holds": N, "rate": RATE, "ttl_ms": TTL_MS, "load_rate": LOAD_RATE,
                 "load_seconds": LOAD_S, "catalog": {"skus": SKUS, "per_sku": PER_SKU,
                                                     "stock": STOCK}, "config": CONFIG})
    log("conditions: " + json.dumps({k: cond[k] for k in ("cores", "cpu_model", "load_average",
                                                          "before_runs_busy", "holds", "rate")}))
    out = {"conditions": cond, "run": run(work_root, broker_pid)}
    out["ceiling"] = pl.ceiling(broker, 200, CEILING_S, work_root) if CEILING_S else None
    out["checks"] = judge(out["run"])
    path = os.path.join(OUT_DIR, f"holds-{stamp}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    r, c = out["run"], out.get("ceiling") or {}
    bu = r.get("build_up") or {}
    print(f"\nopen holds: {bu.get('held')} built at {RATE}/s in {bu.get('seconds')} s over "
          f"{SKUS} SKUs x {PER_SKU}; broker {broker.get('version')} heap {broker.get('heap')} "
          f"up {broker.get('up_s')} s; ceiling {c.get('records_per_s')} records/s "
          f"({c.get('broker_cpu_s_per_million_records')} broker CPU-s per million)")
    for k in ("footprint_empty", "footprint_open", "per_hold_bytes"):
        print(f"  {k}: {json.dumps(r.get(k))}")
    for k in ("empty", "open"):
        print(f"  reserve at {LOAD_RATE}/s, {k}: {json.dumps((r.get(k) or {}).get('reserve_ms'))}")
    for k, what in (("restore_empty", "no open holds"), ("restore", "the holds open")):
        for st, x in (r.get(k) or {}).items():
            print(f"  {st} restore with {what}: {x['records']} records, median "
                  f"{x['records_per_s_median']} records/s a partition, slowest partition "
                  f"{x['ms_max']} ms")
    for st, x in (r.get("standby") or {}).items():
        print(f"  {st} standby catch-up with the holds open: partition {x['partition']}, "
              f"{x['records']} records in {x['ms']} ms ({x['records_per_s']} records/s)")
    print(f"  reconcile: {json.dumps(r.get('reconcile'))}" +
          (f"; error: {r['error']}" if r.get("error") else ""))
    print(f"  RSS of the three stages: {r.get('rss_mib_three_stages')} MiB; at 10M holds "
          f"{r.get('rss_mib_at_10m')} MiB")
    pl.exit_with_checks(out["checks"], path)


if __name__ == "__main__":
    main()
