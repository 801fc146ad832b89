#!/usr/bin/env python3
"""make bench-flash: a flash sale on a large doorbuster, direct against escrow, side by side.

For each round (BENCH_ROUNDS) and each mode, alternating (direct, escrow, direct, ...),
on fresh topics (own prefix and app id): hfctl topics apply; holdfast run --stages
counter,aggregator,gateway (escrow: escrow_skus DOORBUSTER); hfbench seed (BENCH_SKUS
SKUs x 5 warehouses, a DOORBUSTER of BENCH_DOORBUSTER units over 5 warehouses); hfbench
run --scenario flash-sale: BENCH_RATE reserves/s over the catalog for BENCH_SECONDS plus
BENCH_FACTOR x BENCH_DOORBUSTER shoppers for the doorbuster within 2 s from t = 2 s;
wait until the topics stand still; hfctl reconcile --quiescent 1; holdfast's escrow
metrics; stop; delete the topics.

Per run it prints: shoppers answered, reserve p50/p99 over the whole run and the worst
per-second reserve p99 of the burst (t = 2..5 s), doorbuster units sold and oversold,
whether every unit was held or sold at the end (the routing view's total for the
doorbuster after the run; of it, units in allotments, and units abandoned by their
shopper after the last doorbuster shopper was answered, which nobody was left to take), SOLD_OUT after the last unit held, BUSY answers, holds taken
in one hop, the reconcile verdict; then medians per mode. JSON beside it in
build/bench/flash-<stamp>.json. Env (defaults): BENCH_ROUNDS 2, BENCH_DOORBUSTER 5000,
BENCH_FACTOR 4, BENCH_DOOR_TAIL 50 (hfbench --door-tail-rate: latecomers
for the doorbuster after the rush, who take what its shoppers abandon), BENCH_RATE 100, BENCH_SECONDS 15, BENCH_SKUS 1000, BENCH_BUSY_RETRIES 5
(hfbench --busy-retries: a shopper answered BUSY comes back), BENCH_MODES ("direct escrow"),
BENCH_CONFIG (JSON
merged into both modes' config), HOLDFAST_BOOTSTRAP."""
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
os.chdir(ROOT)
BOOTSTRAP = os.environ.get("HOLDFAST_BOOTSTRAP") or "127.0.0.1:9092"


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
EXTRA = json.loads(os.environ.get("BENCH_CONFIG") or "{}")
ALL_MODES = {"direct": {}, "escrow": {"escrow_skus": "DOORBUSTER"}}
MODES = {m: ALL_MODES[m] for m in (os.environ.get("BENCH_MODES") or "direct escrow").split()
         if m in ALL_MODES} or sys.exit("bench-flash: BENCH_MODES names none of direct, escrow")


def log(msg):
    print(f"[flash {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd, envx, timeout, what):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **envx))
    if r.returncode not in (0, 1, 3):
        raise RuntimeError(f"{what} exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return r


def offsets_total(prefix):
    r = subprocess.run(["build/pipeline-topics", "offsets", prefix], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        return -1
    return sum(sum(ends) for ends in json.loads(r.stdout).values())


def wait_still(prefix, quiet_s=8, timeout_s=180):
    last, since, t0 = None, time.time(), time.time()
    while time.time() - t0 < timeout_s:
        cur = offsets_total(prefix)
        if cur != last:
            last, since = cur, time.time()
        elif time.time() - since >= quiet_s:
            return
        time.sleep(1)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r"^(holdfast_escrow_\w+) ([0-9.e+]+)$", text, re.M)}


def one_run(mode, rnd, n, work_root):
    prefix = f"fl{os.getpid()}-{n}-{mode}."
    work = os.path.join(work_root, f"{n:02d}-{mode}")
    os.makedirs(work, exist_ok=True)
    envx = {"HOLDFAST_TOPIC_PREFIX": prefix, "HOLDFAST_APP_ID": prefix + "app",
            "HOLDFAST_BOOTSTRAP": BOOTSTRAP}
    port = free_port()
    config = dict({"metrics_port": port}, **EXTRA, **MODES[mode])
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f)
    out = {"mode": mode, "round": rnd, "config": config}
    log(f"{mode} round {rnd}: prefix {prefix}")
    hf = None
    try:
        run(["build/hfctl", "topics", "apply"], envx, 120, "topics apply")
        hf = subprocess.Popen(["build/holdfast", "run", "--stages", "counter,aggregator,gateway",
                               "--state-dir", os.path.join(work, "state"), "--config",
                               os.path.join(work, "config.json")],
                              stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(work, "holdfast.log"), "w"),
                              env=dict(os.environ, **envx))
        run(["build/hfbench", "seed", "--skus", str(SKUS), "--per-sku", "5", "--stock", "200",
             "--doorbuster-stock", str(DOOR)], envx, 600, "seed")
        wait_still(prefix, 3)
        time.sleep(2)  # pinned allotments are primed by the gateways' ticks
        report = os.path.join(work, "report.json")
        r = run(["build/hfbench", "run", "--scenario", "flash-sale", "--rate", str(RATE),
                 "--seconds", str(SECONDS), "--skus", str(SKUS), "--doorbuster-stock", str(DOOR),
                 "--burst-factor", str(FACTOR), "--busy-retries", str(BUSY_RETRIES),
                 "--door-tail-rate", str(DOOR_TAIL),
                 "--report", report], envx, 900, "hfbench run")
        out["hfbench_exit"] = r.returncode
        rep = json.load(open(report))
        out["summary"] = rep["summary"]
        burst = [s["reserve_p99_ms"] for s in rep.get("per_second", []) if 2 <= s["t"] <= 5]
        out["burst_p99_max_ms"] = max(burst) if burst else None
        wait_still(prefix)
        out["escrow_metrics"] = metrics(port)
        v = run(["build/hfctl", "reconcile", "--quiescent", "1"], envx, 600, "reconcile")
        verdict = json.loads(v.stdout)
        out["reconcile"] = verdict.get("verdict")
        out["violations"] = verdict.get("violations_by_kind")
        a = run(["build/hfctl", "availability", "--sku", "DOORBUSTER"], envx, 60, "availability")
        view = json.loads(a.stdout)
        out["doorbuster_left"] = view.get("total")
        out["doorbuster_in_allotments"] = sum(w.get("escrow", 0)
                                              for w in view.get("warehouses", []))
    except (RuntimeError, OSError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as e:
        out["error"] = str(e)
        log(f"  ERROR {e}")
    finally:
        if hf:
            hf.terminate()
            try:
                hf.wait(60)
            except subprocess.TimeoutExpired:
                hf.kill()
        subprocess.run(["build/pipeline-topics", "delete", prefix], capture_output=True)
        subprocess.run(["rm", "-rf", os.path.join(work, "state")])
    log("  " + line(out))
    return out


def line(o):
    if "error" in o:
        return f"{o['mode']:<7} error: {o['error'][:100]}"
    s, d = o["summary"], o["summary"].get("doorbuster") or {}
    m = o.get("escrow_metrics") or {}
    taken = int(m.get("holdfast_escrow_holds_taken_total", 0))
    return (f"{o['mode']:<7} answered {s['reserves'] - s['without_reply']}/{s['reserves']}  "
            f"reserve p50/p99 {s['reserve_ms']['p50']}/{s['reserve_ms']['p99']} ms  "
            f"burst p99 {o['burst_p99_max_ms']} ms  sold {d.get('units_committed')}/{DOOR} "
            f"oversold {d.get('oversold')}  left {o.get('doorbuster_left')} "
            f"(in allotments {o.get('doorbuster_in_allotments')}, abandoned after the last "
            f"shopper {d.get('released_after_demand')})  "
            f"SOLD_OUT +{d.get('sold_out_signal_after_last_hold_ms')} ms  busy {s['busy']}  "
            f"one-hop {taken}  reconcile {o.get('reconcile')}")


def main():
    for tool in ("build/holdfast", "build/hfctl", "build/hfbench", "build/pipeline-topics"):
        if not os.access(tool, os.X_OK):
            sys.exit(f"bench-flash: {tool} missing (make release build/pipeline-topics)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_root = os.path.join("build", "bench", f"flash-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    load = open("/proc/loadavg").read().split()[:3]
    cond = (f"flash sale: {RATE} reserves/s over {SKUS} SKUs for {SECONDS} s, plus "
            f"{FACTOR * DOOR} shoppers within 2 s for a {DOOR}-unit DOORBUSTER over 5 "
            f"warehouses, then {DOOR_TAIL} doorbuster shoppers/s from t = 4 s to the end; "
            f"a shopper answered BUSY tries again up to {BUSY_RETRIES} times "
            f"(250 ms doubling); {os.cpu_count()} cores shared with the broker at {BOOTSTRAP}; "
            f"load average before {' '.join(load)}; {ROUNDS} round(s), modes alternating")
    log(cond)
    runs, n = [], 0
    for rnd in range(1, ROUNDS + 1):
        for mode in MODES:
            n += 1
            runs.append(one_run(mode, rnd, n, work_root))
    print("\n== bench-flash: " + cond)
    for o in runs:
        print("  " + line(o))
    print("medians:")
    for mode in MODES:
        ok = [o for o in runs if o["mode"] == mode and "error" not in o]
        if not ok:
            continue
        med = lambda f: statistics.median(f(o) for o in ok)  # noqa: E731
        print(f"  {mode:<7} reserve p99 {med(lambda o: o['summary']['reserve_ms']['p99'])} ms, "
              f"burst p99 {med(lambda o: o['burst_p99_max_ms'] or 0)} ms, "
              f"sold {med(lambda o: o['summary']['doorbuster']['units_committed'])}/{DOOR}, "
              f"busy {med(lambda o: o['summary']['busy'])}, "
              f"reconcile {'PASS' if all(o['reconcile'] == 'PASS' for o in ok) else 'FAIL'}")
    path = os.path.join("build", "bench", f"flash-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"conditions": cond, "runs": runs}, f, indent=1)
    print(f"json: {path}")
    return 0 if all(o.get("reconcile") == "PASS" for o in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
