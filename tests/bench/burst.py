#!/usr/bin/env python3
"""make bench-burst: a burst of concurrent one-unit reserves on a warm broker against 100
units, made repeatable (issue 39 measured 40 `hfctl reserve` started together on the
default config: 18 answered BUSY; the aim is 0). A bench, not a test: BUSY answers are
results, and only a harness error makes the exit non-zero.

Every build (BENCH_BUILDS, as make bench-pipeline) gets its own fresh topics (own prefix
and app id), all set up before the first round: the build's hfctl topics apply; its
holdfast run --stages counter,aggregator,gateway on the default config (metrics_port set,
BENCH_CONFIG merged); hfctl stock feed RECEIVE of BENCH_BURST_STOCK units of BURST-1 at
US-NYC (the ship-to hfctl reserve sends by default), until the routing view shows them.
Then BENCH_ROUNDS rounds on the same topics, builds alternating (their order reversed
every other round); a round of a build:
  - waits until the routing view shows all the stock again (the last round's holds
    expired: --ttl-ms 2000);
  - warms the broker and the stages: BENCH_WARMUP reserves one after the other, each
    released at once (not counted);
  - starts BENCH_BURST_N `hfctl reserve --qty 1 --ttl-ms 2000 --attempts 1` together, one
    process each as a checkout would (the build's own hfctl; --attempts 1: the first
    answer counts, BUSY is not retried);
  - per reserve: the answer (HELD, BUSY, REJECTED_*, or none within 10 s) and its latency,
    from the Reserve's sent_at_ms (read back from the requests topic) to the moment its
    hfctl printed the reply. Each process connects before it sends, and 40 of them starting
    load 2 cores, so the sends spread over 0.1-1 s (printed beside the figures) and the
    gateway answers under that load, as it did in the issue's measurement.
  - holds the gateways took from an escrow allotment (one hop) during the burst.
At the end each build's topics are left to stand still, reconciled (hfctl reconcile
--quiescent 1), and deleted. Conditions (cores, CPU, what shared them, the broker's
version, heap and age) and a table on stdout; everything in build/bench/burst-<stamp>.json.

Env (defaults): BENCH_BUILDS "current=build/holdfast", BENCH_BURST_N 40, BENCH_ROUNDS 5,
BENCH_BURST_STOCK 100, BENCH_WARMUP 3, BENCH_CONFIG (JSON merged into holdfast's config),
HOLDFAST_BOOTSTRAP."""
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


def env_int(name, default, low=0):
    v = os.environ.get(name) or str(default)
    if not v.isdigit() or int(v) < low:
        sys.exit(f"bench-burst: {name}={v!r} is not an integer >= {low}")
    return int(v)


N = env_int("BENCH_BURST_N", 40, 1)
ROUNDS = env_int("BENCH_ROUNDS", 5, 1)
STOCK = env_int("BENCH_BURST_STOCK", 100, 1)
WARMUP = env_int("BENCH_WARMUP", 3)
EXTRA = json.loads(os.environ.get("BENCH_CONFIG") or "{}")
SKU, WAREHOUSE = "BURST-1", "US-NYC"
TTL_MS = 2000
REPLY_TIMEOUT_MS = 10000  # hfctl's own default per attempt
RESTOCKED_TIMEOUT_S = 60  # holds expire within the TTL plus the sweeper's lag
SETUP_TIMEOUT_S = 120
OUTCOMES = ("HELD", "BUSY", "REJECTED", "none")


class HarnessError(Exception):
    pass


def log(msg):
    print(f"[burst {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pctl(xs, q):
    """Nearest-rank percentile (None for no values)."""
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(-(-q * len(s) // 1)) - 1))]


def reserve_args(rid):
    return ["reserve", "--reservation", rid, "--key", rid + "-k", "--sku", SKU,
            "--qty", "1", "--ttl-ms", str(TTL_MS), "--attempts", "1",
            "--timeout-ms", str(REPLY_TIMEOUT_MS)]


def reserve_together(cmds, envx):
    """Starts every command at once (a barrier, one thread each) and returns per command
    the time its first stdout line arrived, the line, and its exit and stderr. stdbuf
    makes hfctl's stdout line-buffered, so the line is seen when printed, not at exit."""
    out = [dict() for _ in cmds]
    gate = threading.Barrier(len(cmds))

    def one(i):
        gate.wait()
        r = out[i]
        try:
            p = subprocess.Popen(["stdbuf", "-oL"] + cmds[i], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=envx)
            r["line"] = p.stdout.readline().strip()
            r["t_line"] = time.time()
            _, err = p.communicate(timeout=REPLY_TIMEOUT_MS / 1000 + 60)
            r["exit"], r["stderr"] = p.returncode, err.strip()[-300:]
        except (OSError, subprocess.TimeoutExpired) as e:
            r["exit"], r["stderr"] = -1, str(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(cmds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


class Session:
    """One build's topics and holdfast, kept for all its rounds."""

    def __init__(self, build, n, work_root):
        self.b = build
        tag = re.sub(r"[^a-zA-Z0-9]", "", build["name"])
        self.prefix = f"bu{os.getpid()}-{n}-{tag}."
        self.work = os.path.join(work_root, f"{n:02d}-{tag}")
        os.makedirs(self.work, exist_ok=True)
        self.envx = dict(os.environ, HOLDFAST_TOPIC_PREFIX=self.prefix,
                         HOLDFAST_APP_ID=self.prefix + "app", HOLDFAST_BOOTSTRAP=bc.BOOTSTRAP)
        self.port = pl.free_port()
        self.config = {"metrics_port": self.port, **EXTRA}
        self.hf = None
        self.result = {"build": build["name"], "prefix": self.prefix, "config": self.config,
                       "rounds": []}

    def hfctl(self, args, what, timeout=60, ok=(0,)):
        r = subprocess.run([self.b["hfctl"]] + args, capture_output=True, text=True,
                           env=self.envx, timeout=timeout)
        if r.returncode not in ok:
            raise HarnessError(f"{self.b['name']}: {what} exit {r.returncode}: "
                               f"{(r.stderr or r.stdout).strip()[-300:]}")
        return r.stdout

    def available(self):
        try:
            return json.loads(self.hfctl(["availability", "--sku", SKU], "availability"))["total"]
        except (HarnessError, ValueError, KeyError):
            return None  # no Availability record yet

    def wait_restocked(self, timeout_s):
        t0 = time.time()
        while time.time() - t0 < timeout_s:
            if self.available() == STOCK:
                return round(time.time() - t0, 1)
            time.sleep(0.5)
        raise HarnessError(f"{self.b['name']}: the routing view shows {self.available()} of "
                           f"{SKU}, not {STOCK}, after {timeout_s} s")

    def setup(self):
        log(f"{self.b['name']}: prefix {self.prefix}")
        cfg = os.path.join(self.work, "config.json")
        with open(cfg, "w") as f:
            json.dump(self.config, f)
        self.hfctl(["topics", "apply", "--file", self.b["topics_file"]], "topics apply", 120)
        self.hf = pl.Proc([self.b["holdfast"], "run", "--stages", "counter,aggregator,gateway",
                           "--state-dir", os.path.join(self.work, "state"), "--config", cfg],
                          os.path.join(self.work, "holdfast.log"), self.envx)
        self.hfctl(["stock", "feed", "--warehouse", WAREHOUSE, "--sku", SKU, "--kind", "RECEIVE",
                    "--qty", str(STOCK), "--seq", "1"], "stock feed")
        self.result["seeded_after_s"] = self.wait_restocked(SETUP_TIMEOUT_S)

    def one_hop_taken(self):
        return pl.scrape_metrics(self.port).get(("holdfast_escrow_holds_taken_total", None))

    def sent_at(self, rids):
        """{reservation id: sent_at_ms} of these Reserves, from the requests topic."""
        out = {}
        for line in self.hfctl(["tail", self.prefix + "holdfast.requests"], "tail requests",
                               120).splitlines():
            try:
                v = json.loads(line)["value"]
            except (ValueError, KeyError, TypeError):
                continue
            if v.get("type") == "Reserve" and v.get("reservation_id") in rids:
                out[v["reservation_id"]] = v["sent_at_ms"]
        return out

    def warm_up(self, rnd):
        for i in range(WARMUP):
            rid = f"warm-{rnd}-{i}"
            rep = self.hfctl(reserve_args(rid), "warm-up reserve", 60, (0, 3))
            if '"HELD"' in rep:
                self.hfctl(["release", "--reservation", rid, "--key", rid + "-r"],
                           "warm-up release", 60, (0, 3))

    def round(self, rnd):
        r = {"round": rnd, "restocked_after_s": self.wait_restocked(RESTOCKED_TIMEOUT_S)}
        self.warm_up(rnd)
        taken0 = self.one_hop_taken()
        rids = [f"burst-{rnd}-{i}" for i in range(N)]
        t_launch = time.time()
        got = reserve_together([[self.b["hfctl"]] + reserve_args(rid) for rid in rids],
                               self.envx)
        taken1 = self.one_hop_taken()
        sent = self.sent_at(set(rids))
        counts = dict.fromkeys(OUTCOMES, 0)
        lat, gw_lat, answers = [], [], []
        for rid, g in zip(rids, got):
            try:
                rep = json.loads(g.get("line") or "")
                outcome = rep["outcome"]
            except (ValueError, KeyError, TypeError):
                rep, outcome = None, "none"
            kind = "REJECTED" if outcome.startswith("REJECTED") else outcome
            counts[kind if kind in counts else "none"] += 1
            a = {"reservation_id": rid, "outcome": outcome, "exit": g.get("exit")}
            if rep and rid in sent:
                a["latency_ms"] = round(g["t_line"] * 1000 - sent[rid])
                a["gateway_ms"] = rep["replied_at_ms"] - sent[rid]
                lat.append(a["latency_ms"])
                gw_lat.append(a["gateway_ms"])
            if outcome == "none":
                a["stderr"] = g.get("stderr")
            elif outcome != "HELD":
                a["message"] = rep.get("message")
            answers.append(a)
        sends = sorted(sent.values())
        r.update({"counts": counts,
                  "latency_ms": {"p50": pctl(lat, 0.5), "p99": pctl(lat, 0.99),
                                 "max": pctl(lat, 1.0)},
                  "gateway_ms": {"p50": pctl(gw_lat, 0.5), "p99": pctl(gw_lat, 0.99),
                                 "max": pctl(gw_lat, 1.0)},
                  "sends_spread_ms": sends[-1] - sends[0] if sends else None,
                  "first_send_after_launch_ms":
                      round(sends[0] - t_launch * 1000) if sends else None,
                  "one_hop": None if taken0 is None or taken1 is None else int(taken1 - taken0),
                  "answers": answers})
        busy = sorted({a["message"] for a in answers if a["outcome"] == "BUSY"})
        if busy:
            r["busy_messages"] = busy[:5]
        self.result["rounds"].append(r)
        log(f"  {row(self.b['name'], r)}")

    def teardown(self):
        try:
            if self.hf and self.result["rounds"]:
                pl.wait_still(self.prefix, 8, 300, "burst")
                v = pl.reconcile(self.b, self.envx, os.path.join(self.work, "reconcile.json"), True)
                self.result["reconcile"] = v.get("verdict")
        except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
            self.result["reconcile"] = f"error: {e}"
        finally:
            if self.hf:
                self.hf.stop()
            subprocess.run([pl.TOPICS_TOOL, "delete", self.prefix], capture_output=True)
            shutil.rmtree(os.path.join(self.work, "state"), ignore_errors=True)


COLUMNS = [("build", 10), ("round", 5), ("HELD", 4), ("BUSY", 4), ("REJ", 4), ("none", 4),
           ("p50", 6), ("p99", 6), ("max", 6), ("gateway p99", 11), ("sends spread", 12),
           ("one-hop", 7)]


def ms(v):
    return "-" if v is None else f"{v} ms"


def row(name, r):
    c = r["counts"]
    vals = [name, str(r["round"]), str(c["HELD"]), str(c["BUSY"]), str(c["REJECTED"]),
            str(c["none"]), ms(r["latency_ms"]["p50"]), ms(r["latency_ms"]["p99"]),
            ms(r["latency_ms"]["max"]), ms(r["gateway_ms"]["p99"]), ms(r["sends_spread_ms"]),
            "-" if r["one_hop"] is None else str(r["one_hop"])]
    return "  ".join(f"{v:<{w}}" for v, (_, w) in zip(vals, COLUMNS))


def summary(s):
    rs = s["rounds"]
    if not rs:
        return f"  {s['build']:<10} no round: {s.get('error', '?')}"
    busy = [r["counts"]["BUSY"] for r in rs]
    p99 = statistics.median(r["latency_ms"]["p99"] for r in rs
                            if r["latency_ms"]["p99"] is not None) if any(
        r["latency_ms"]["p99"] is not None for r in rs) else None
    return (f"  {s['build']:<10} BUSY {sum(busy)} of {N * len(rs)} reserves in {len(rs)} "
            f"round(s) (per round {', '.join(map(str, busy))}), median p99 {ms(p99)}, "
            f"held {sum(r['counts']['HELD'] for r in rs)}, no answer "
            f"{sum(r['counts']['none'] for r in rs)}, reconcile {s.get('reconcile')}"
            + (f"; error: {s['error']}" if s.get("error") else ""))


def main():
    if not shutil.which("stdbuf"):
        sys.exit("bench-burst: stdbuf (coreutils) missing: it times each reply as printed")
    if not os.access(pl.TOPICS_TOOL, os.X_OK):
        sys.exit(f"bench-burst: {pl.TOPICS_TOOL} missing (make release {pl.TOPICS_TOOL})")
    builds = bc.builds("bench-burst")
    broker = bc.broker("bench-burst")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_root = os.path.join("build", "bench", f"burst-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    facts, text = bc.conditions(builds, broker)
    config = {"metrics_port": "(free)", **EXTRA}
    text.append(f"burst: {N} concurrent `hfctl reserve --qty 1 --ttl-ms {TTL_MS} --attempts 1` "
                f"(one process each, no BUSY retry) against {STOCK} units of {SKU} at "
                f"{WAREHOUSE}, after {WARMUP} warm-up reserves; {ROUNDS} round(s) on the same "
                f"topics, builds alternating; holdfast config {json.dumps(config)}")
    for t in text:
        log(t)
    sessions = [Session(b, i + 1, work_root) for i, b in enumerate(builds)]
    harness_ok = True
    try:
        for s in sessions:
            try:
                s.setup()
            except (HarnessError, OSError, subprocess.TimeoutExpired) as e:
                s.result["error"], harness_ok = str(e), False
                log(f"  ERROR {e}")
        live = [s for s in sessions if "error" not in s.result]
        for rnd in range(1, ROUNDS + 1):
            for s in bc.alternate(live, rnd):
                if "error" in s.result:
                    continue
                try:
                    s.round(rnd)
                except (HarnessError, OSError, subprocess.TimeoutExpired) as e:
                    s.result["error"], harness_ok = f"round {rnd}: {e}", False
                    log(f"  ERROR {e}")
    finally:
        for s in sessions:
            s.teardown()
    age = bc.broker_age_s(broker)
    print("\n== bench-burst\n" + "\n".join("  " + t for t in text))
    print("(latency: the Reserve's sent_at_ms to its reply printed by hfctl; gateway: to the "
          "reply's replied_at_ms; sends spread: first to last send of the round)")
    print("  ".join(f"{c:<{w}}" for c, w in COLUMNS))
    for s in sessions:
        for r in s.result["rounds"]:
            print(row(s.result["build"], r))
    print("per build:")
    for s in sessions:
        print(summary(s.result))
    path = os.path.join("build", "bench", f"burst-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"conditions": facts, "conditions_text": text, "broker_up_s_at_end": age,
                   "sessions": [s.result for s in sessions]}, f, indent=1, default=str)
    print(f"json: {path}\nartifacts: {work_root}")
    return 0 if harness_ok else 1


if __name__ == "__main__":
    sys.exit(main())
