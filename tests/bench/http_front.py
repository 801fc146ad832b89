#!/usr/bin/env python3
"""make bench-http: the HTTP front's cost, measured against the same load sent to
Kafka directly, in one run.

Per rate of BENCH_HTTP_RATES (default "500 2000"), on fresh topics: holdfast run
(counter, aggregator, gateway), hfbench seed, holdfast http; then
  1. kafka: hfbench run --scenario steady at the rate (reserves only: no commits,
     releases or duplicates; the holds expire after 3 s), reserve latency from the
     intended send time;
  2. http: wrk (tests/bench/wrk_reserve.lua) POSTing the same reserves to
     /v1/reservations over keep-alive connections, paced per connection (wrk is
     closed-loop: the achieved rate is printed, and its latencies are from each
     request's send, not from an intended time, so they hide queueing a
     constant-rate driver would show);
  3. https (BENCH_HTTP_TLS=1, the default): the same wrk load to a second front on
     the same pipeline serving TLS itself (docs/HTTP.md, "TLS"; a throwaway ECDSA
     P-256 certificate made with openssl), over kept-alive connections, so a
     handshake per connection and record encryption per request;
  4. https-close (BENCH_HTTP_TLS_CLOSE=1, the default): the same, with
     "Connection: close", so a full TLS handshake per request (the worst case:
     clients that do not keep connections alive).
CPU cores of the broker, holdfast run, holdfast http and the driver over the middle
half of each load; the front's CPU per request (its utime + stime from
/proc/<pid>/stat over the whole wrk run, divided by the requests wrk completed; it
includes the front's ledger and view readers, the same in every run); reconcile at
the end. Prints a table and writes BENCH_OUT/http-<time>.json.

Environment: BENCH_HTTP_RATES, BENCH_SECONDS (20), BENCH_SKUS (1000), BENCH_STOCK
(100000), BENCH_CONNECTIONS (0: rate / 10, at least 4), BENCH_HTTP_TLS (1),
BENCH_HTTP_TLS_CLOSE (1).
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline as pl  # noqa: E402  (its helpers: processes, offsets, CPU, reconcile)

RATES = [int(r) for r in re.split(r"[ ,]+", pl.env("BENCH_HTTP_RATES", "500 2000").strip())]
SECONDS = pl.env_int("BENCH_SECONDS", 20)
SKUS = pl.env_int("BENCH_SKUS", 1000)
STOCK = pl.env_int("BENCH_STOCK", 100000)
CONNECTIONS = pl.env_int("BENCH_CONNECTIONS", 0)
TLS = pl.env_int("BENCH_HTTP_TLS", 1)
TLS_CLOSE = pl.env_int("BENCH_HTTP_TLS_CLOSE", 1)
TTL_MS = 3000


def wait_ready(port, timeout_s=60):
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"holdfast http on {port} not ready after {timeout_s} s")


def cpu_cores(a, b, pids):
    out = {k: pl.cores(a, b, p) for k, p in pids.items()}
    mine = set(pids.values())
    others = sum(b["procs"][p][0] - a["procs"][p][0] for p in b["procs"]
                 if p in a["procs"] and p not in mine)
    out["others"] = round(others / (b["t"] - a["t"]), 3)
    return out


def sample():
    return {"t": time.time(), "procs": pl.all_procs_cpu()}


def window(proc_pid, seconds, t_start, pids):
    """CPU of pids over the middle half of a load that started at t_start."""
    w0, w1 = t_start + seconds * 0.25, t_start + seconds * 0.75
    time.sleep(max(0, w0 - time.time()))
    a = sample()
    time.sleep(max(0, w1 - time.time()))
    b = sample()
    return cpu_cores(a, b, dict(pids, driver=proc_pid))


def parse_wrk(text):
    out = {"status": {}}
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["sample"]:
            out.setdefault("samples", []).append(line[7:])
        elif f[:1] == ["status"] and len(f) == 3:
            out["status"][f[1]] = int(f[2])
        elif f[:1] == ["latency_us"]:
            out["latency_ms"] = {f[i]: round(int(f[i + 1]) / 1000, 1) for i in range(1, len(f), 2)}
        elif f[:1] == ["requests"]:
            out["requests"] = int(f[1])
            out["duration_s"] = int(f[3]) / 1e6
            out["errors"] = {f[i]: int(f[i + 1]) for i in range(5, len(f), 2)}
    if "requests" not in out:
        raise RuntimeError(f"wrk printed no summary: {text[-300:]}")
    out["rate"] = round(out["requests"] / out["duration_s"], 1)
    return out


def make_cert(work):
    """A throwaway CA-less self-signed ECDSA P-256 certificate for 127.0.0.1."""
    cert, key = os.path.join(work, "tls.pem"), os.path.join(work, "tls.key")
    pl.checked(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], {},
               "openssl req (bench certificate)", 60)
    return cert, key


def start_front(name, config, work, envx):
    """A holdfast http of its own instance and state dir; returns (Proc, ready port)."""
    cfg_path = os.path.join(work, f"{name}.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f)
    front = pl.Proc(["build/holdfast", "http", "--config", cfg_path, "--instance", name,
                     "--state-dir", os.path.join(work, f"state-{name}")],
                    os.path.join(work, f"{name}.log"), envx)
    wait_ready(config.get("http_ops_port", config["http_port"]))
    return front


def measure_wrk(label, url, conns, delay_ms, front_pid, pids, work, close=False):
    """One wrk run against url: its summary, CPU cores over the middle half, and the
    front's CPU per completed request over the whole run."""
    extra = ["close"] if close else []
    pl.checked(["wrk", "-t", "1", "-c", "4", "-d", "3s", "-s", "tests/bench/wrk_reserve.lua",
                url, "--", str(SKUS), "20", f"warm{label}{os.getpid()}", str(TTL_MS)] + extra, {},
               f"wrk warm-up ({label})", 60)
    out_path = os.path.join(work, f"wrk-{label}.out")
    cpu0, _ = pl.proc_cpu_s(front_pid)
    wrk = pl.Proc(["wrk", "-t", "2", "-c", str(conns), "-d", f"{SECONDS}s", "--timeout", "10s",
                   "-s", "tests/bench/wrk_reserve.lua", url, "--", str(SKUS), str(delay_ms),
                   f"{label}{os.getpid()}", str(TTL_MS)] + extra, out_path)
    cores = window(wrk.pid, SECONDS, time.time(), pids)
    wrk.p.wait(SECONDS + 120)
    wrk.f.close()
    cpu1, _ = pl.proc_cpu_s(front_pid)
    out = dict(parse_wrk(open(out_path).read()), connections=conns, delay_ms=delay_ms,
               cores=cores, url=url)
    out["front_cpu_s"] = round(cpu1 - cpu0, 3)
    out["front_cpu_us_per_request"] = round(1e6 * (cpu1 - cpu0) / max(out["requests"], 1), 1)
    return out


def one_rate(rate, n, work_root, broker):
    work = os.path.join(work_root, f"{n:02d}-{rate}")
    os.makedirs(work, exist_ok=True)
    prefix = f"hb{os.getpid()}-{n}-{rate}."
    envx = {"HOLDFAST_TOPIC_PREFIX": prefix, "HOLDFAST_APP_ID": prefix + "app",
            "HOLDFAST_BOOTSTRAP": pl.BOOTSTRAP}
    mport, hport = pl.free_port(), pl.free_port()
    config = {"metrics_port": mport, "http_port": hport}
    cfg_path = os.path.join(work, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f)
    row = {"rate": rate, "seconds": SECONDS, "prefix": prefix, "work": work}
    hf = front = front_tls = None
    try:
        pl.checked(["build/hfctl", "topics", "apply"], envx, "hfctl topics apply", 120)
        hf = pl.Proc(["build/holdfast", "run", "--stages", "counter,aggregator,gateway",
                      "--state-dir", os.path.join(work, "state"), "--config", cfg_path],
                     os.path.join(work, "holdfast.log"), envx)
        pl.checked(["build/hfbench", "seed", "--skus", str(SKUS), "--stock", str(STOCK)], envx,
                   "hfbench seed", 900)
        front = pl.Proc(["build/holdfast", "http", "--config", cfg_path, "--state-dir",
                         os.path.join(work, "state")], os.path.join(work, "http.log"), envx)
        wait_ready(hport)
        if TLS:
            cert, key = make_cert(work)
            tport = pl.free_port()
            front_tls = start_front("front-tls", {
                "http_port": tport, "http_ops_port": pl.free_port(), "http_tls_cert_file": cert,
                "http_tls_key_file": key}, work, envx)
        pl.wait_still(prefix, pl.SETTLED_QUIET_S, pl.IDLE_TIMEOUT_S, "seed")
        pids = {"broker": broker["pid"], "holdfast": hf.pid, "http": front.pid}

        pl.log(f"{rate}/s: kafka (hfbench) for {SECONDS} s")
        bench = pl.Proc(["build/hfbench", "run", "--scenario", "steady", "--rate", str(rate),
                         "--seconds", str(SECONDS), "--skus", str(SKUS), "--zipf", "0",
                         "--commit-pct", "0", "--abandon-pct", "0", "--dup-pct", "0",
                         "--ttl-ms", str(TTL_MS)], os.path.join(work, "hfbench.out"), envx)
        t_load = pl.wait_header(bench, 180)
        cores = window(bench.pid, SECONDS, t_load, pids)
        bench.p.wait(SECONDS + 600)
        bench.f.close()
        sm = pl.read_summary(bench.out_path)
        row["kafka"] = {"reserves": sm["reserves"], "held": sm["held"],
                        "without_reply": sm["without_reply"], "busy": sm.get("busy"),
                        "latency_ms": sm["reserve_ms"], "cores": cores}
        pl.wait_still(prefix, pl.IDLE_QUIET_S, pl.IDLE_TIMEOUT_S, "drain")

        # wrk is closed-loop: enough connections to carry the rate at the Kafka
        # run's median latency, each paced by a delay; never more than 3/4 of the
        # front's http_inflight_max (192), or the connections past it get instant
        # 503s and loop on them.
        est_ms = sm["reserve_ms"]["p50"] or 0
        conns = CONNECTIONS or min(144, max(4, -(-rate * (est_ms + 30) // 1000)))
        delay_ms = max(0, int(1000 * conns / rate - est_ms))
        pl.log(f"{rate}/s: http (wrk, {conns} connections, {delay_ms} ms pacing) for {SECONDS} s")
        # Each run has a warm-up, not measured (hfbench has its own): the first
        # requests after an idle pipeline meet a cold counter hop and may be shed BUSY.
        row["http"] = measure_wrk("w", f"http://127.0.0.1:{hport}", conns, delay_ms, front.pid,
                                  pids, work)
        pl.wait_still(prefix, pl.IDLE_QUIET_S, pl.IDLE_TIMEOUT_S, "drain")
        if front_tls:
            tpids = dict(pids, http=front_tls.pid)
            pl.log(f"{rate}/s: https (wrk, kept-alive) for {SECONDS} s")
            row["https"] = measure_wrk("t", f"https://127.0.0.1:{tport}", conns, delay_ms,
                                       front_tls.pid, tpids, work)
            pl.wait_still(prefix, pl.IDLE_QUIET_S, pl.IDLE_TIMEOUT_S, "drain")
            if TLS_CLOSE:
                pl.log(f"{rate}/s: https-close (wrk, a handshake per request) for {SECONDS} s")
                row["https-close"] = measure_wrk("tc", f"https://127.0.0.1:{tport}", conns,
                                                 delay_ms, front_tls.pid, tpids, work, close=True)
                pl.wait_still(prefix, pl.IDLE_QUIET_S, pl.IDLE_TIMEOUT_S, "drain")
        v = pl.reconcile({"hfctl": "build/hfctl"}, envx, os.path.join(work, "reconcile.json"), True)
        row["reconcile"] = v.get("verdict")
    except (RuntimeError, OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        row["error"] = str(e)
        pl.log(f"  {rate}/s: ERROR {e}")
    finally:
        for p in (front_tls, front, hf):
            if p:
                p.stop()
        subprocess.run([pl.TOPICS_TOOL, "delete", prefix], capture_output=True)
    return row


def fmt(v):
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:,.2f}"


def print_tls(rows):
    """TLS against plain: the front's CPU per request and the latency, per rate."""
    if not any("https" in r for r in rows):
        return
    print("\nTLS served by the front against plain HTTP (same pipeline, same wrk load, one "
          "run each, in this order; CPU = the front's utime + stime from /proc/<pid>/stat "
          "over the wrk run / requests completed):")
    print("| rate/s | path | achieved/s | front CPU us/request | x plain | p50 / p99 ms | "
          "p99 x plain |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r or "https" not in r:
            continue
        base = r["http"]
        for path in ("http", "https", "https-close"):
            if path not in r:
                continue
            h = r[path]
            cpu, lat = h["front_cpu_us_per_request"], h["latency_ms"]
            print(f"| {r['rate']} | {path} | {fmt(h['rate'])} | {cpu} | "
                  f"{cpu / max(base['front_cpu_us_per_request'], 0.1):.2f} | {lat['p50']} / "
                  f"{lat['p99']} | {lat['p99'] / max(base['latency_ms']['p99'], 0.1):.2f} |")


def main():
    broker_pid = pl.find_broker()
    if not broker_pid:
        sys.exit(f"bench-http: no broker at {pl.BOOTSTRAP} (make kafka-up)")
    broker = {"pid": broker_pid}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work_root = os.path.join(pl.OUT_DIR, f"http-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    rev = pl.run_text(["git", "log", "-1", "--format=%h %s"])[:80]
    print(f"bench-http: {os.cpu_count()} cores shared by the broker (pid {broker_pid}), "
          f"holdfast run, holdfast http and the driver; commit {rev}; {SKUS} SKUs x 5 "
          f"warehouses, stock {STOCK}; reserves of 1 unit, uniform SKUs, TTL {TTL_MS} ms, "
          f"{SECONDS} s per run; kafka = hfbench (open loop, from intended send times), "
          f"http = wrk over keep-alive connections (closed loop, paced)"
          + (f"; https = the same to a front serving TLS (GnuTLS "
             f"{pl.run_text(['pkg-config', '--modversion', 'gnutls']).strip()} under libmicrohttpd "
             f"{pl.run_text(['pkg-config', '--modversion', 'libmicrohttpd']).strip()}, ECDSA "
             f"P-256 certificate, wrk's OpenSSL client, TLS 1.3 by default)"
             + ("; https-close = a new connection and TLS handshake per request"
                if TLS_CLOSE else "") if TLS else ""), flush=True)
    rows = [one_rate(r, i, work_root, broker) for i, r in enumerate(RATES)]
    print("\n| rate/s | path | achieved/s | reserve p50 / p99 / p999 ms | answered | "
          "cores broker / holdfast run / http / driver / others | reconcile |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['rate']} | ERROR {r['error'][:80]} |")
            continue
        k, h = r["kafka"], r["http"]
        kc, hc = k["cores"], h["cores"]
        print(f"| {r['rate']} | kafka | {fmt(round(k['reserves'] / SECONDS))} | "
              f"{k['latency_ms']['p50']} / {k['latency_ms']['p99']} / {k['latency_ms']['p999']} | "
              f"{k['reserves'] - k['without_reply']}/{k['reserves']} (busy {k['busy']}) | "
              f"{kc['broker']} / {kc['holdfast']} / {kc['http']} / {kc['driver']} / {kc['others']} | "
              f"{r['reconcile']} |")
        for path in ("http", "https", "https-close"):
            if path not in r:
                continue
            h = r[path]
            hc = h["cores"]
            codes = ", ".join(f"{c}: {n}" for c, n in sorted(h["status"].items()))
            print(f"| {r['rate']} | {path} | {fmt(h['rate'])} | {h['latency_ms']['p50']} / "
                  f"{h['latency_ms']['p99']} / {h['latency_ms']['p999']} | {codes} "
                  f"(errors {sum(h['errors'].values())}) | {hc['broker']} / {hc['holdfast']} / "
                  f"{hc['http']} / {hc['driver']} / {hc['others']} | |")
        h = r["http"]
        hc = h["cores"]
        if k["latency_ms"]["p50"] and h["latency_ms"]["p50"]:
            print(f"|  | http / kafka | | p50 x{h['latency_ms']['p50'] / k['latency_ms']['p50']:.2f}, "
                  f"p99 x{h['latency_ms']['p99'] / max(k['latency_ms']['p99'], 1):.2f} | | "
                  f"http front {hc['http']} cores at {fmt(h['rate'])}/s | |")
    print_tls(rows)
    path = os.path.join(work_root, "http.json")
    with open(path, "w") as f:
        json.dump({"commit": rev, "rows": rows}, f, indent=1)
    print(f"json: {path}")
    return 0 if all("error" not in r and r.get("reconcile") == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
