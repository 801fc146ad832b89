#!/usr/bin/env python3
"""make bench-scale: the pipeline on a large catalog next to a 10,000-SKU one, in one run
(issue 13; standard library only, helpers from pipeline.py).

For each catalog — SCALE_SMALL_SKUS SKUs first, then each size of SCALE_PAIRS, then the
small one again (so that its reserve latency is not only the broker's first minutes) — on
fresh topics (own prefix and app id):
  hfctl topics apply; three holdfast processes, one stage each (counter, aggregator,
  gateway), so that each stage's memory is its own; hfbench seed of SKUS = pairs /
  SCALE_PER_SKU at SCALE_PER_SKU warehouses each (seed time and pairs/s, to the moment
  the routing view showed every pair); RSS and peak RSS of each process, RocksDB size
  of each stage's state dir; hfbench run --scenario steady at SCALE_RATE/s for
  SCALE_SECONDS over the catalog (reserve p50/p99); a full restore of the counter: it
  is stopped, its state dir removed and it is started again, and its log's "partition
  P restored: N changelog records ... in M ms" lines give records/s per partition;
  hfctl reconcile --quiescent 1 --memory-mb M (time and peak RSS, from wait4); the topics deleted.
Each load also records the CPU cores and disk bytes read (/proc/PID/io) of the broker,
each stage and hfbench over the load, the box's iowait, and the per-second reserve p99.
With SCALE_SETTLED_LOAD=1 (the default) the load is run a second time once the broker and
the three stages together use no more than their idle cost plus SCALE_SETTLE_MARGIN_CORES
(0.10) over 10 s (the log cleaner and the stores' compactions after a large seed done;
SCALE_SETTLE_TIMEOUT_S 2400). The idle cost is measured over 10 s right after the stages
start, before the seed: on a slow VM an idle broker and stages use 0.18 cores, on a fast one
0.05, so a fixed threshold waits forever on one and settles too early on the other.
SCALE_SETTLE_CORES=N sets an absolute threshold instead.
the first load says what a shopper sees right after a bulk load, the second what a
network in its steady state serves.

SCALE_CATALOG uniform (every SKU at SCALE_PER_SKU warehouses, SCALE_STOCK units each) or
zipf (hfbench seed --catalog zipf --pairs N: warehouses a SKU Zipf-distributed, units
lognormal around SCALE_STOCK). The small catalog has SCALE_SMALL_SKUS x SCALE_PER_SKU
pairs. At the end: a least-squares line through the catalogs of the run (the small one
once) for memory and reconcile, projected to SCALE_PROJECT_PAIRS (100M), and issue 13's
targets checked against the largest catalog: RSS of the three stages, the view, restore
records/s per partition, reserve p99 against the small catalog's (the lower of its two runs).

Env (defaults): SCALE_PAIRS "1000000", SCALE_CATALOG uniform, SCALE_PER_SKU 5, SCALE_SMALL_SKUS 10000 (0: no
small catalog), SCALE_STOCK 1000, SCALE_RATE 1000, SCALE_SECONDS 15, SCALE_CONFIG (JSON
merged into each process's config), SCALE_SEED_TIMEOUT_S 3600, SCALE_RECONCILE_MEMORY_MB 2048 (hfctl reconcile --memory-mb,
spilling into the catalog's work dir; 0: one unsharded pass), SCALE_RECONCILE 1 (0: no
reconcile, for a diagnostic run; the run then has no verdict), SCALE_OUT build/bench,
HOLDFAST_BOOTSTRAP."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline as pl  # noqa: E402  (also chdirs to the repository root)

PAIRS = [int(x) for x in re.split(r"[ ,]+", pl.env("SCALE_PAIRS", "1000000").strip())]
PER_SKU = pl.env_int("SCALE_PER_SKU", 5)
CATALOG = pl.env("SCALE_CATALOG", "uniform")
if CATALOG not in ("uniform", "zipf"):
    sys.exit(f"bench-scale: SCALE_CATALOG must be uniform or zipf, not {CATALOG!r}")
SMALL_SKUS = pl.env_int("SCALE_SMALL_SKUS", 10000)
STOCK = pl.env_int("SCALE_STOCK", 1000)
RATE = pl.env_int("SCALE_RATE", 1000)
SECONDS = pl.env_int("SCALE_SECONDS", 15)
SEED_TIMEOUT_S = pl.env_int("SCALE_SEED_TIMEOUT_S", 3600)
RECONCILE_MEMORY_MB = pl.env_int("SCALE_RECONCILE_MEMORY_MB", 2048)
EXTRA_CONFIG = json.loads(pl.env("SCALE_CONFIG", "{}"))
OUT_DIR = pl.env("SCALE_OUT", "build/bench")
RECONCILE = pl.env("SCALE_RECONCILE", "1") == "1"
SETTLED_LOAD = pl.env("SCALE_SETTLED_LOAD", "1") == "1"
SETTLE_CORES = pl.env("SCALE_SETTLE_CORES", "auto")
SETTLE_MARGIN_CORES = float(pl.env("SCALE_SETTLE_MARGIN_CORES", "0.10"))
SETTLE_TIMEOUT_S = pl.env_int("SCALE_SETTLE_TIMEOUT_S", 2400)
STAGES = ("counter", "aggregator", "gateway")
RESTORED = re.compile(r"partition (\d+) restored: (\d+) changelog records from offset (-?\d+) "
                      r"in (\d+) ms")


def log(msg):
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def mem_kib(pid):
    """(VmRSS, VmHWM) of pid in KiB, or (None, None)."""
    out = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    except OSError:
        pass
    return out.get("VmRSS"), out.get("VmHWM")


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def read_bytes(pid):
    """Bytes pid has made the block layer fetch (read_bytes of /proc/PID/io), or None."""
    try:
        for line in open(f"/proc/{pid}/io"):
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def box_ticks():
    """(total, iowait) clock ticks of the whole box, from /proc/stat."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f), f[4]


def sample(pids):
    return {"t": time.time(), "box": box_ticks(),
            "cpu": {k: pl.proc_cpu_s(p)[0] for k, p in pids.items()},
            "read": {k: read_bytes(p) for k, p in pids.items()}}


def between(a, b):
    """Cores and MiB read per process from sample a to b, and the box's iowait share."""
    dt = b["t"] - a["t"]
    out = {"seconds": round(dt, 1), "cores": {}, "read_mib": {}}
    for k in b["cpu"]:
        if a["cpu"].get(k) is not None and b["cpu"][k] is not None:
            out["cores"][k] = round((b["cpu"][k] - a["cpu"][k]) / dt, 3)
        if a["read"].get(k) is not None and b["read"][k] is not None:
            out["read_mib"][k] = round((b["read"][k] - a["read"][k]) / 2**20, 1)
    total, iowait = (y - x for x, y in zip(a["box"], b["box"]))
    out["iowait_share"] = round(iowait / total, 3) if total else None
    return out


def cores_over_10s(pids):
    """CPU cores the processes used together over the next 10 s."""
    a = sample(pids)
    time.sleep(10)
    return sum(between(a, sample(pids))["cores"].values())


def settle_threshold(idle_cores):
    """The cores under which the broker and the stages count as settled: their idle
    cost measured at the start plus a margin, or SCALE_SETTLE_CORES when it is a number."""
    if SETTLE_CORES != "auto":
        return float(SETTLE_CORES)
    return idle_cores + SETTLE_MARGIN_CORES


def wait_settled(pids, threshold):
    """Until the broker and the stages together use less than threshold cores over 10 s;
    seconds waited, or None on SETTLE_TIMEOUT_S."""
    quiet = {k: p for k, p in pids.items() if k != "hfbench"}
    t0 = time.time()
    used = None
    while time.time() - t0 < SETTLE_TIMEOUT_S:
        used = cores_over_10s(quiet)
        if used < threshold:
            return round(time.time() - t0)
    log(f"  still {used:.2f} cores busy after {SETTLE_TIMEOUT_S} s (threshold {threshold:.2f})")
    return None


def exited(pid):
    """True once pid is a zombie (exited, not yet reaped: its CPU is still readable)."""
    try:
        s = open(f"/proc/{pid}/stat").read()
    except OSError:
        return True
    return s[s.rindex(")") + 2] == "Z"


def run_load(procs, work, envx, skus, broker_pid, label, seed):
    """hfbench run --scenario steady over the catalog: its summary, the per-second
    reserve p99, and what each process used while it ran. Each load of a catalog has
    its own hfbench --seed: a load that reused the ids would be answered from the
    gateway's idempotency records without reaching a counter."""
    report = os.path.join(work, f"hfbench-report-{label}.json")
    pids = dict({s: procs[s].pid for s in STAGES}, broker=broker_pid)
    bench = pl.Proc([os.path.abspath("build/hfbench"), "run", "--scenario", "steady",
                     "--rate", str(RATE), "--seconds", str(SECONDS), "--skus", str(skus),
                     "--report", report, "--seed", str(seed)],
                    os.path.join(work, f"hfbench-{label}.out"), envx)
    pids["hfbench"] = bench.pid
    a = sample(pids)
    t0 = time.time()
    while not exited(bench.pid) and time.time() - t0 < SECONDS + 900:
        time.sleep(0.1)
    b = sample(pids)
    rc = bench.p.wait(60)
    bench.f.close()
    summary = pl.read_summary(bench.out_path)
    rep = json.load(open(report)) if os.path.exists(report) else {}
    per_s = [r.get("reserve_p99_ms") for r in rep.get("per_second", [])]
    per_s = [v for v in per_s if v is not None and v >= 0]
    out = dict({k: summary.get(k) for k in ("reserves", "without_reply", "reserve_ms",
                                            "commit_ms", "busy")}, exit=rc,
               per_second_p99_ms=per_s,
               per_second_p99_after_first_ms={"median": pl.med(per_s[1:]),
                                              "max": max(per_s[1:]) if per_s[1:] else None},
               used=between(a, b))
    u = out["used"]
    log(f"  {label} load, {RATE}/s for {SECONDS} s: reserve ms {summary.get('reserve_ms')}; "
        f"per-second p99 {per_s}; cores {u['cores']}; MiB read {u['read_mib']}; "
        f"iowait {u['iowait_share']}")
    return out


def start_stage(stage, work, envx, config=None, instance_prefix="scale"):
    """holdfast run of one stage, its state in work/state-STAGE, its log work/STAGE.log,
    metrics on a free port (proc.metrics_port); config (SCALE_CONFIG by default) merged
    into its settings."""
    port = pl.free_port()
    cfg_path = os.path.join(work, f"config-{stage}.json")
    with open(cfg_path, "w") as f:
        json.dump(dict({"metrics_port": port}, **(EXTRA_CONFIG if config is None else config)), f)
    proc = pl.Proc([os.path.abspath("build/holdfast"), "run", "--stages", stage, "--instance",
                    f"{instance_prefix}-{stage}", "--state-dir",
                    os.path.join(work, f"state-{stage}"), "--config", cfg_path],
                   os.path.join(work, f"{stage}.log"), envx)
    proc.metrics_port = port
    return proc


def restore_lines(path):
    lines = open(path).read().splitlines()
    return [m for m in (RESTORED.search(l) for l in lines) if m]


def measure_restore(procs, work, envx, partitions, broker_pid, stage="counter", start=None):
    """Stops the stage (the counter by default), removes its state, starts it again
    and waits until every one of its partitions logged its restore: records and ms per
    partition, and what the broker and the new process used meanwhile (cores, MiB read
    from disk: a changelog whose segments left the page cache is read from the disk).
    start(stage, work, envx) starts the stage (start_stage by default)."""
    start = start or start_stage
    old_log = procs[stage].out_path
    procs[stage].stop()
    os.replace(old_log, old_log + ".before-restore")
    shutil.rmtree(os.path.join(work, f"state-{stage}"), ignore_errors=True)
    a = sample({"broker": broker_pid})
    procs[stage] = start(stage, work, envx)
    log_path = procs[stage].out_path
    t0 = time.time()
    while time.time() - t0 < 1800:
        got = restore_lines(log_path)
        if len({m.group(1) for m in got}) >= partitions:
            break
        if procs[stage].p.poll() is not None:
            raise RuntimeError(f"{stage} exited {procs[stage].p.returncode} in its restore")
        time.sleep(0.5)
    else:
        raise RuntimeError(f"the {stage} did not restore all its partitions in 1800 s")
    b = sample({"broker": broker_pid, stage: procs[stage].pid})
    used = between(a, b)
    dt = b["t"] - a["t"]
    if b["cpu"][stage] is not None:  # the new process's whole life is this restore
        used["cores"][stage] = round(b["cpu"][stage] / dt, 3)
    if b["read"][stage] is not None:
        used["read_mib"][stage] = round(b["read"][stage] / 2**20, 1)
    parts = [{"partition": int(m.group(1)), "records": int(m.group(2)), "ms": int(m.group(4))}
             for m in got]
    for p in parts:
        p["records_per_s"] = round(p["records"] * 1000 / p["ms"]) if p["ms"] else None
    return {"partitions": parts, "used": used,
            "records": sum(p["records"] for p in parts),
            "ms_max": max(p["ms"] for p in parts),
            "records_per_s_median": round(pl.med([p["records_per_s"] for p in parts
                                                  if p["records_per_s"]]) or 0)}


def timed_reconcile(envx, path, spill_dir):
    t0 = time.time()
    sharding = []
    if RECONCILE_MEMORY_MB > 0:
        os.makedirs(spill_dir, exist_ok=True)
        sharding = ["--memory-mb", str(RECONCILE_MEMORY_MB), "--spill-dir", spill_dir]
    with open(path, "w") as f:
        p = subprocess.Popen([os.path.abspath("build/hfctl"), "reconcile", "--quiescent", "1",
                              "--violations", "5", "--pairs-max", str(4 * max(PAIRS) + 100000),
                              "--progress", "0"] + sharding,
                             stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ, **envx))
        _, status, usage = os.wait4(p.pid, 0)
    verdict = {"verdict": "NO VERDICT"}
    for line in open(path):
        if line.startswith("{"):
            verdict = json.loads(line)
    return {"verdict": verdict.get("verdict"), "exit": os.waitstatus_to_exitcode(status),
            "violations_by_kind": verdict.get("violations_by_kind"),
            "run": verdict.get("run"),
            "seconds": round(time.time() - t0, 1), "peak_rss_mib": round(usage.ru_maxrss / 1024)}


SEED_SUMMARY = re.compile(r"seed: summary: .*?skus=(\d+) pairs=(\d+)")


def seed_command(pairs):
    """hfbench seed's arguments for a catalog of pairs, and its SKU count when known
    in advance (uniform) or None (zipf: the seed's summary line says)."""
    base = [os.path.abspath("build/hfbench"), "seed", "--stock", str(STOCK), "--timeout-ms",
            str(SEED_TIMEOUT_S * 1000)]
    if CATALOG == "zipf":
        return base + ["--catalog", "zipf", "--pairs", str(pairs)], None
    skus = max(1, pairs // PER_SKU)
    return base + ["--skus", str(skus), "--per-sku", str(PER_SKU)], skus


def one_catalog(pairs, n, work_root, partitions, broker_pid):
    cmd, skus = seed_command(pairs)
    name = f"{n:02d}-{pairs}"
    work = os.path.join(work_root, name)
    os.makedirs(work, exist_ok=True)
    prefix = f"sc{os.getpid()}-{n}."
    envx = {"HOLDFAST_TOPIC_PREFIX": prefix, "HOLDFAST_APP_ID": prefix + "app",
            "HOLDFAST_BOOTSTRAP": pl.BOOTSTRAP}
    res = {"skus": skus, "catalog": CATALOG, "per_sku": PER_SKU if CATALOG == "uniform" else None,
           "pairs": pairs, "prefix": prefix, "work": work}
    log(f"{name}: {CATALOG} catalog of {pairs} pairs"
        + (f" ({skus} SKUs x {PER_SKU} warehouses)" if skus else "") + f" (prefix {prefix})")
    procs = {}
    try:
        pl.checked([os.path.abspath("build/hfctl"), "topics", "apply", "--file",
                    "topics/topics.json"], envx, "hfctl topics apply", 120)
        for s in STAGES:
            procs[s] = start_stage(s, work, envx)
        time.sleep(3)
        res["idle_cores"] = round(cores_over_10s(dict({st: procs[st].pid for st in STAGES},
                                                      broker=broker_pid)), 3)
        res["settle_threshold_cores"] = round(settle_threshold(res["idle_cores"]), 3)
        log(f"  idle: broker and stages use {res['idle_cores']} cores; settled under "
            f"{res['settle_threshold_cores']}")
        t0 = time.time()
        seed_out = pl.checked(cmd, envx, "hfbench seed", SEED_TIMEOUT_S + 600)
        m = SEED_SUMMARY.search(seed_out)
        if m:
            skus = res["skus"] = int(m.group(1))
        res["seed_s"] = round(time.time() - t0, 1)
        res["seed_pairs_per_s"] = round(pairs / res["seed_s"])
        open(os.path.join(work, "seed.out"), "w").write(seed_out)
        log(f"  seeded in {res['seed_s']} s ({res['seed_pairs_per_s']} pairs/s)")
        pl.wait_still(prefix, pl.SETTLED_QUIET_S, 600, "seed")
        res["after_seed"] = {}
        for stage in STAGES:
            rss, peak = (round(v / 1024) if v else None for v in mem_kib(procs[stage].pid))
            state_mib = round(dir_bytes(os.path.join(work, f"state-{stage}")) / 2**20)
            res["after_seed"][stage] = {"rss_mib": rss, "peak_rss_mib": peak,
                                        "state_mib": state_mib}
        gw = pl.scrape_metrics(procs["gateway"].metrics_port)
        view_bytes = gw.get(("holdfast_gateway_view_bytes", None))
        res["view"] = {"bytes": view_bytes, "skus": gw.get(("holdfast_gateway_view_skus", None))}
        if view_bytes and res["view"]["skus"]:
            res["view"]["bytes_per_sku"] = round(view_bytes / res["view"]["skus"])
            res["view"]["bytes_per_pair"] = round(view_bytes / pairs, 1)
        log(f"  after the seed: {res['after_seed']}, view {res['view']}")
        res["load"] = run_load(procs, work, envx, skus, broker_pid, "first", 1)
        if SETTLED_LOAD:
            pl.wait_still(prefix, pl.IDLE_QUIET_S, 600, "drain")
            pids = {st: procs[st].pid for st in STAGES}
            res["settle_s"] = wait_settled(dict(pids, broker=broker_pid),
                                           res["settle_threshold_cores"])
            log(f"  settled after {res['settle_s']} s")
            res["settled_load"] = run_load(procs, work, envx, skus, broker_pid, "settled", 2)
        pl.wait_still(prefix, pl.IDLE_QUIET_S, 600, "drain")
        res["after_load"] = {st: round((mem_kib(procs[st].pid)[1] or 0) / 1024) for st in STAGES}
        res["restore"] = measure_restore(procs, work, envx, partitions, broker_pid)
        ru = res["restore"]["used"]
        log(f"  counter restore: {res['restore']['records']} records, median "
            f"{res['restore']['records_per_s_median']} records/s per partition (each: "
            f"{[p['records_per_s'] for p in res['restore']['partitions']]}), slowest "
            f"{res['restore']['ms_max']} ms; cores {ru['cores']}; MiB read {ru['read_mib']}; "
            f"iowait {ru['iowait_share']}")
        pl.wait_still(prefix, pl.IDLE_QUIET_S, 600, "after the restore")
        if RECONCILE:
            res["reconcile"] = timed_reconcile(envx, os.path.join(work, "reconcile.json"),
                                               os.path.join(work, "reconcile-spill"))
        else:
            res["reconcile"] = {"verdict": "SKIPPED (SCALE_RECONCILE=0)"}
        log(f"  reconcile: {res['reconcile']}")
    except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
        res["error"] = str(e)
        log(f"  {name}: ERROR {e}")
    finally:
        for p in procs.values():
            p.stop()
        subprocess.run([pl.TOPICS_TOOL, "delete", prefix], capture_output=True, text=True)
        for s in STAGES:
            shutil.rmtree(os.path.join(work, f"state-{s}"), ignore_errors=True)
        shutil.rmtree(os.path.join(work, "reconcile-spill"), ignore_errors=True)
    return res


def counter_partitions():
    t = json.load(open("topics/topics.json"))["topics"]
    for x in t:
        if x["name"].endswith("counter-changelog"):
            return x["partitions"]
    raise SystemExit("bench-scale: no counter-changelog topic in topics/topics.json")


def fit(points):
    """Least-squares line through [(x, y)]: (slope, intercept), or None."""
    pts = [(x, y) for x, y in points if y is not None]
    if len(pts) < 2:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
    return slope, my - slope * mx


def print_projection(results):
    """Per measured quantity: the line through the catalogs of this run (pairs in
    millions), and its value at SCALE_PROJECT_PAIRS."""
    target = pl.env_int("SCALE_PROJECT_PAIRS", 100000000)
    ok = [r for r in results if not r.get("error") and not r.get("again")]
    rows = [("RSS MiB " + s, [(r["pairs"], (r.get("after_load") or {}).get(s)) for r in ok])
            for s in STAGES]
    rows.append(("RSS MiB all three", [(r["pairs"], sum((r.get("after_load") or {}).get(s) or 0
                                                            for s in STAGES)) for r in ok]))
    rows.append(("view MiB", [(r["pairs"], ((r.get("view") or {}).get("bytes") or 0) / 2**20 or None)
                              for r in ok]))
    rows.append(("reconcile s", [(r["pairs"], (r.get("reconcile") or {}).get("seconds"))
                                 for r in ok]))
    rows.append(("reconcile peak MiB", [(r["pairs"], (r.get("reconcile") or {}).get("peak_rss_mib"))
                                        for r in ok]))
    print(f"\nprojection to {target:,} pairs (least squares over this run's catalogs; "
          f"same catalog shape: {catalog_shape()})")
    print("| quantity | points (pairs: value) | per million pairs | at 0 | projected |")
    print("|---|---|---|---|---|")
    for name, pts in rows:
        f = fit([(x / 1e6, y) for x, y in pts])
        shown = ", ".join(f"{x:,}: {round(y)}" for x, y in pts if y is not None)
        if not f:
            print(f"| {name} | {shown} | - | - | - |")
            continue
        slope, icpt = f
        print(f"| {name} | {shown} | {slope:,.1f} | {icpt:,.0f} | {slope * target / 1e6 + icpt:,.0f} |")


def print_targets(results):
    """Issue 13's targets, read off the largest catalog measured (not projected)."""
    ok = [r for r in results if not r.get("error") and r.get("reconcile")]
    smalls = [r for r in ok if SMALL_SKUS and r["pairs"] == SMALL_SKUS * PER_SKU]
    bigs = [r for r in ok if r not in smalls]
    if not bigs:
        return
    big = max(bigs, key=lambda r: r["pairs"])
    rss = sum((big.get("after_load") or {}).get(s) or 0 for s in STAGES)
    view = ((big.get("view") or {}).get("bytes") or 0) / 2**20
    restore = (big.get("restore") or {}).get("records_per_s_median")
    print(f"\ntargets at {big['pairs']:,} pairs (measured; the brief's are for 100M pairs):")
    print(f"  RSS of the three stages {rss:,} MiB (<= 4,096)")
    print(f"  gateway view {view:,.0f} MiB (<= 1,536)")
    print(f"  restore {fmt(restore)} records/s, median partition (>= 500,000)")
    for which in ("load", "settled_load"):
        p99 = ((big.get(which) or {}).get("reserve_ms") or {}).get("p99")
        small_p99 = [((r.get(which) or {}).get("reserve_ms") or {}).get("p99") for r in smalls]
        small_p99 = [v for v in small_p99 if v]
        ref = min(small_p99) if small_p99 else None
        if p99 is None:
            continue
        if ref is None:
            print(f"  reserve p99 {fmt(p99)} ms ({which}): no small catalog to compare with "
                  f"(SCALE_SMALL_SKUS=0)")
            continue
        ratio = round(p99 / ref, 2)
        when = "right after the seed" if which == "load" else \
            f"once settled ({fmt(big.get('settle_s'))} s after the first load)"
        print(f"  reserve p99 {when}: {fmt(p99)} ms against the small catalog's "
              f"{fmt(small_p99)}: {fmt(ratio)}x the lower (<= 1.5)")


def catalog_shape():
    if CATALOG == "zipf":
        return "zipf catalog: hfbench seed --catalog zipf, warehouses a SKU Zipf-distributed"
    return f"uniform catalog, {PER_SKU} warehouses per SKU"


def fmt(v):
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


def main():
    for tool in ("build/holdfast", "build/hfctl", "build/hfbench", pl.TOPICS_TOOL):
        if not os.access(tool, os.X_OK):
            sys.exit(f"bench-scale: {tool} missing: make release {pl.TOPICS_TOOL}")
    broker = pl.broker_facts(pl.find_broker())
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_root = os.path.join(OUT_DIR, f"scale-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    partitions = counter_partitions()
    rev = pl.run_text(["git", "log", "-1", "--format=%h %s"])[:100]
    cond = {"commit": rev, "cores": os.cpu_count(), "broker": {k: broker[k] for k in
                                                              ("pid", "version", "heap")},
            "load_average": open("/proc/loadavg").read().split()[:3], "rate": RATE,
            "seconds": SECONDS, "catalog": CATALOG, "per_sku": PER_SKU, "stock": STOCK,
            "counter_partitions": partitions, "config": EXTRA_CONFIG}
    log(f"conditions: {json.dumps(cond)}")
    small = [SMALL_SKUS * PER_SKU] if SMALL_SKUS else []
    sizes = small + PAIRS + (small if PAIRS else [])
    results = [one_catalog(pairs, n, work_root, partitions, broker["pid"])
               for n, pairs in enumerate(sizes)]
    if small and PAIRS:
        results[-1]["again"] = True
    out = os.path.join(work_root, "scale.json")
    json.dump({"conditions": cond, "results": results}, open(out, "w"), indent=1)
    print(f"\nbench-scale ({rev}; {os.cpu_count()} cores shared with the broker, pid "
          f"{broker['pid']}; reserves at {RATE}/s for {SECONDS} s; "
          f"{catalog_shape()})")
    cols = ["pairs", "seed s", "seed pairs/s", "RSS MiB c/a/g", "state MiB c/a/g", "view MiB (B/SKU)",
            "reserve p50/p99 ms", "settled p50/p99 ms", "restore rec/s (median part.)", "reconcile s / MiB", "verdict"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        a = r.get("after_load") or {}
        st = r.get("after_seed") or {}
        lm = (r.get("load") or {}).get("reserve_ms") or {}
        sm = (r.get("settled_load") or {}).get("reserve_ms") or {}
        rc = r.get("reconcile") or {}
        print("| " + " | ".join([
            fmt(r["pairs"]), fmt(r.get("seed_s")), fmt(r.get("seed_pairs_per_s")),
            "/".join(fmt(a.get(s)) for s in STAGES),
            "/".join(fmt((st.get(s) or {}).get("state_mib")) for s in STAGES),
            f"{fmt(round(((r.get('view') or {}).get('bytes') or 0) / 2**20))} "
            f"({fmt((r.get('view') or {}).get('bytes_per_sku'))})",
            f"{fmt(lm.get('p50'))}/{fmt(lm.get('p99'))}",
            f"{fmt(sm.get('p50'))}/{fmt(sm.get('p99'))}",
            fmt((r.get("restore") or {}).get("records_per_s_median")),
            f"{fmt(rc.get('seconds'))} / {fmt(rc.get('peak_rss_mib'))}",
            r.get("error") or fmt(rc.get("verdict"))]) + " |")
    print_projection(results)
    print_targets(results)
    print(f"\nall figures: {out}")
    wanted = "PASS" if RECONCILE else "SKIPPED (SCALE_RECONCILE=0)"
    return 0 if all(not r.get("error") and (r.get("reconcile") or {}).get("verdict") == wanted
                    for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
