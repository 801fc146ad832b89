#!/usr/bin/env python3
"""make bench-pipeline: the full pipeline's throughput yardstick (standard library only).

For each build (BENCH_BUILDS) and each rate of the ladder (BENCH_RATES), alternating
builds rate by rate for BENCH_ROUNDS rounds, on fresh topics each time (own topic
prefix and app id):
  hfctl topics apply; holdfast run --stages counter,aggregator,gateway (metrics_port
  set); hfbench seed; wait until the topics stand still; snapshot end offsets, log
  sizes and /metrics; hfbench run --scenario steady; CPU of broker, holdfast (and each
  of its threads), hfbench and everything else over the middle half of the load;
  wait until the topics stand still again (holds expire); snapshot; hfctl reconcile
  --quiescent 1; stop holdfast; delete the topics (unless BENCH_KEEP_TOPICS=1).
Then the broker's ceiling (Kafka's ProducerPerformance, transactional, acks=all, 8
partitions, holdfast's mean record size) and an overload run at 2x the highest
sustained rate. One table on stdout, everything in build/bench/pipeline-<stamp>.json,
throughput against reserve p99 in a PNG beside it.

A rate is sustained when every reserve was answered, at most 0.1 % of them BUSY (shed),
reserve p99 < 500 ms and the backlog did not grow (the per-second reserve p99 of the last
third of the load is not above 2x that of the first third plus 100 ms). A sustained rate
is also "within target" when its reserve p99 is at most BENCH_TARGET_P99_MS (default 50,
the product brief's reserve p99): the highest such rate is printed beside the highest
sustained one, since a rate answered at 400 ms is carried but not served as promised.

Env (defaults): BENCH_RATES "1000 2000 3000 5000 8000", BENCH_SECONDS 15, BENCH_SKUS
10000, BENCH_PER_SKU 5, BENCH_STOCK 100000, BENCH_BUILDS "current=build/holdfast",
BENCH_ROUNDS 1, BENCH_KEEP_TOPICS 0, BENCH_LADDER_STOP 1 (a build stops climbing after
two unsustained rates in a row, the ladder once every build has), BENCH_OVERLOAD_SECONDS 20 (0: none), BENCH_CEILING_SECONDS 15 (0:
none), BENCH_CONFIG (JSON merged into holdfast's config), BENCH_BUILD_CONFIG (JSON
{build name: config merged over that, for that build only: the same binary run as two
"builds" with different settings, as make bench-hot does), BENCH_BUILD_PROCESSES (JSON
{build name: N}, 1 for a build it does not name: N > 1 runs that build as N holdfast
processes of the same app id sharing the partitions through the consumer groups, each
with its own --instance i, state dir work/state-i, config-i.json with its own
metrics_port and holdfast-i.log; the seed starts once every one answers /readyz and the
partitions each stage's processes own have stood still for 3 s; their CPU (whole run
and window), transactions and records (/metrics) are the sums over the N, with each
process's cores and partitions owned beside them in the run's JSON, and each of their
threads listed with its pid; e.g.
BENCH_BUILDS="1p=build/holdfast 2p-2t=build/holdfast" BENCH_BUILD_CONFIG='{"2p-2t":
{"threads_per_stage": 2}}' BENCH_BUILD_PROCESSES='{"2p-2t": 2}'; the range assignor gives
partition p to the p-th task by instance id, so with more tasks (N x threads_per_stage)
than partitions the last processes own none and are only standbys: a warning says so;
BENCH_PARTITIONS gives them some), BENCH_PARTITIONS (unset: each build's own
topics/topics.json; N: a copy of it in BENCH_OUT with every topic of more than one
partition given N, for every build alike),
BENCH_HFBENCH_ARGS (extra hfbench run options), BENCH_IDLE_TIMEOUT_S 300,
BENCH_TARGET_P99_MS 50,
BENCH_WARMUP_SECONDS (unset: 60 when the broker has been up under 10 minutes, else 0; one
run of the first build at the first rate, not counted, so the broker's JIT is not
charged to the first build), BENCH_OUT build/bench, BENCH_KAFKA_LIBS (the broker's
classpath by default), BENCH_QUICK=1 (the CI form: one rate of 200/s for 5 s over 1,000
SKUs, 5 s overload and ceiling). HOLDFAST_BOOTSTRAP as everywhere."""
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
os.chdir(ROOT)
CLK_TCK = os.sysconf("SC_CLK_TCK")
BOOTSTRAP = os.environ.get("HOLDFAST_BOOTSTRAP") or "127.0.0.1:9092"
P99_SUSTAINED_MS = 500
BUSY_SUSTAINED_MAX = 0.001  # share of reserves a sustained rate may answer BUSY
TTL_MS = 3000  # hfbench's default hold TTL: the run lasts this + 9 s past the load
IDLE_QUIET_S = 8  # longer than the gateway's result timeout and sweeper period
SETTLED_QUIET_S = 3


def env(name, default):
    v = os.environ.get(name)
    return default if v is None or v == "" else v


def env_int(name, default):
    try:
        return int(env(name, default))
    except ValueError:
        sys.exit(f"bench-pipeline: {name}={os.environ[name]!r} is not an integer")


QUICK = env("BENCH_QUICK", "0") == "1"
RATES = [int(r) for r in re.split(r"[ ,]+", env("BENCH_RATES", "200" if QUICK else
                                               "1000 2000 3000 5000 8000").strip())]
SECONDS = env_int("BENCH_SECONDS", 5 if QUICK else 15)
SKUS = env_int("BENCH_SKUS", 1000 if QUICK else 10000)
PER_SKU = env_int("BENCH_PER_SKU", 5)
STOCK = env_int("BENCH_STOCK", 100000)
ROUNDS = env_int("BENCH_ROUNDS", 1)
KEEP_TOPICS = env("BENCH_KEEP_TOPICS", "0") == "1"
LADDER_STOP = env("BENCH_LADDER_STOP", "1") == "1"
OVERLOAD_S = env_int("BENCH_OVERLOAD_SECONDS", 5 if QUICK else 20)
CEILING_S = env_int("BENCH_CEILING_SECONDS", 5 if QUICK else 15)
IDLE_TIMEOUT_S = env_int("BENCH_IDLE_TIMEOUT_S", 300)
TARGET_P99_MS = env_int("BENCH_TARGET_P99_MS", 50)  # the brief's reserve p99
# A broker in its first minutes is still compiling its hot paths (JIT): the first run
# against it would pay for that. Unset: warm up for WARMUP_DEFAULT_S when the broker is
# younger (20 s proved too short: the first rates after it still ran slow).
WARMUP_AFTER_BROKER_S = 600
WARMUP_DEFAULT_S = 60
WARMUP_S = env_int("BENCH_WARMUP_SECONDS", 0 if QUICK else -1)
EXTRA_CONFIG = json.loads(env("BENCH_CONFIG", "{}"))
BUILD_CONFIG = json.loads(env("BENCH_BUILD_CONFIG", "{}"))
BUILD_PROCESSES = json.loads(env("BENCH_BUILD_PROCESSES", "{}"))
if not isinstance(BUILD_PROCESSES, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 16
        for v in BUILD_PROCESSES.values()):
    sys.exit("bench-pipeline: BENCH_BUILD_PROCESSES must be JSON {build name: processes "
             f"1..16}}, not {env('BENCH_BUILD_PROCESSES', '')!r}")
PARTITIONS = env_int("BENCH_PARTITIONS", 0)
if PARTITIONS < 0 or PARTITIONS > 64:
    sys.exit(f"bench-pipeline: BENCH_PARTITIONS must be 1..64 (0 or unset: the topics file's), "
             f"not {PARTITIONS}")
ASSIGN_TIMEOUT_S = 180  # N processes: until every one is ready and the assignment settled
ASSIGN_STILL_S = 3
HFBENCH_ARGS = shlex.split(env("BENCH_HFBENCH_ARGS", ""))
OUT_DIR = env("BENCH_OUT", "build/bench")
HFBENCH = "build/hfbench"  # one driver for every build: same load, same measurement
TOPICS_TOOL = "build/pipeline-topics"


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_builds():
    builds = []
    for item in env("BENCH_BUILDS", "current=build/holdfast").split():
        name, _, path = item.partition("=")
        if not path:
            name, path = os.path.basename(os.path.dirname(os.path.abspath(item))), item
        path = os.path.abspath(path)
        if not os.access(path, os.X_OK):
            sys.exit(f"bench-pipeline: build {name}: {path} is not an executable holdfast "
                     "(make release there first)")
        bdir = os.path.dirname(path)
        root = os.path.dirname(bdir)
        hfctl = os.path.join(bdir, "hfctl")
        seeder = os.path.join(bdir, "hfbench")
        topics = os.path.join(root, "topics", "topics.json")
        rev = run_text(["git", "-C", root, "log", "-1", "--format=%h %s"]) or "?"
        builds.append({"name": name, "holdfast": path,
                       "hfctl": hfctl if os.access(hfctl, os.X_OK) else os.path.abspath("build/hfctl"),
                       "topics_file": topics if os.path.exists(topics) else "topics/topics.json",
                       # the stock feed is seeded by the build's own hfbench (its
                       # StockFeed schema is the one its counter reads); the load is
                       # always build/hfbench's
                       "seeder": seeder if os.access(seeder, os.X_OK) else HFBENCH,
                       "commit": rev[:100]})
    if PARTITIONS:
        for b in builds:
            b["topics_file"] = repartitioned(b["topics_file"], b["name"])
    return builds


def repartitioned(topics_file, name):
    """A copy of topics_file in OUT_DIR with every topic of more than one partition
    given PARTITIONS (co-partitioned groups stay equal; single-partition topics such as
    the dead letters stay single)."""
    doc = json.load(open(topics_file))
    for t in doc["topics"]:
        if t["partitions"] > 1:
            t["partitions"] = PARTITIONS
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.abspath(os.path.join(OUT_DIR, f"topics-{name}-{PARTITIONS}p.json"))
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def run_text(cmd, timeout=30):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


# ---- /proc

def proc_stat(path):
    """(comm, the fields after it) of a /proc/.../stat file, or (None, None): fields[0] is
    the state (field 3 in proc(5)), so field N of proc(5) is fields[N - 3]."""
    try:
        with open(path) as f:
            s = f.read()
    except OSError:
        return None, None
    return s[s.index("(") + 1:s.rindex(")")], s[s.rindex(")") + 2:].split()


def proc_cpu_s(pid, tid=None):
    comm, fields = proc_stat(f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat")
    if fields is None:
        return None, None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK, comm


def process_age_s(pid):
    """Seconds since the process started (proc(5) field 22, in clock ticks since boot)."""
    _, fields = proc_stat(f"/proc/{pid}/stat")
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - int(fields[19]) / CLK_TCK
    except (OSError, TypeError, ValueError, IndexError):
        return None


def all_procs_cpu():
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            cpu, comm = proc_cpu_s(d)
            if cpu is not None:
                out[int(d)] = (cpu, comm)
    return out


def threads_cpu(pid):
    out = {}
    for t in glob.glob(f"/proc/{pid}/task/*"):
        tid = os.path.basename(t)
        cpu, comm = proc_cpu_s(pid, tid)
        if cpu is not None:
            out[int(tid)] = (cpu, comm)
    return out


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def listener_pid(port):
    """The pid of the local process listening on port, from /proc/net/tcp* and the
    processes' socket fds (None when not local or not readable)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in open(table).readlines()[1:]:
                f = line.split()
                if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f[9])
        except (OSError, IndexError, ValueError):
            pass
    for d in os.listdir("/proc"):
        if not d.isdigit() or not inodes:
            continue
        try:
            for fd in os.listdir(f"/proc/{d}/fd"):
                link = os.readlink(f"/proc/{d}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(d)
        except OSError:
            pass
    return None


def find_broker():
    """The pid of the broker at HOLDFAST_BOOTSTRAP: the java kafka.Kafka process that
    listens on its port, else .cache/kafka/kafka.pid here or in /work/main."""
    try:
        pid = listener_pid(int(BOOTSTRAP.split(",")[0].rsplit(":", 1)[1]))
        if pid and "kafka.Kafka" in cmdline(pid):
            return pid
    except ValueError:
        pass
    for pidfile in (".cache/kafka/kafka.pid", "/work/main/.cache/kafka/kafka.pid"):
        try:
            pid = int(open(pidfile).read().strip())
            if "kafka.Kafka" in cmdline(pid):
                return pid
        except (OSError, ValueError):
            pass
    for d in os.listdir("/proc"):
        if d.isdigit() and "kafka.Kafka" in cmdline(int(d)):
            return int(d)
    return None


def broker_facts(pid):
    args = cmdline(pid) if pid else []
    age_s = process_age_s(pid) if pid else None
    facts = {"pid": pid, "version": None, "heap": None, "gc": None, "log_dirs": [],
             "classpath": None, "config": None, "up_s": None if age_s is None else round(age_s)}
    for i, a in enumerate(args):
        if a.startswith("-Xmx"):
            facts["heap"] = a[4:]
        elif a.startswith("-XX:+Use") and a.endswith("GC"):
            facts["gc"] = a[8:]
        elif a in ("-cp", "-classpath") and i + 1 < len(args):
            facts["classpath"] = args[i + 1]
    if facts["classpath"]:
        for jar in glob.glob(facts["classpath"].split(":")[0]):
            m = re.search(r"kafka-clients-([\w.\-]+)\.jar$", jar)
            if m:
                facts["version"] = m.group(1)
    if args and args[-1].endswith(".properties"):
        facts["config"] = args[-1]
        try:
            for line in open(args[-1]):
                if line.startswith("log.dirs=") or line.startswith("log.dir="):
                    facts["log_dirs"] = line.split("=", 1)[1].strip().split(",")
        except OSError:
            pass
    return facts


# ---- Kafka side: offsets, log sizes, metrics

def topic_offsets(prefix):
    """{topic (without prefix): sum of partition high watermarks} and per partition.
    A topic created moments ago may still answer "Not leader for partition" while its
    leaders settle: asked again for up to 10 s."""
    for attempt in range(20):
        r = subprocess.run([TOPICS_TOOL, "offsets", prefix], capture_output=True, text=True,
                           timeout=60)
        if r.returncode == 0:
            return {t[len(prefix):]: highs for t, highs in json.loads(r.stdout).items()}
        if "Not leader" not in r.stderr and "not the leader" not in r.stderr.lower():
            break
        time.sleep(0.5)
    raise RuntimeError(f"pipeline-topics offsets: {r.stderr.strip()}")


def offsets_total(offs):
    return sum(sum(v) for v in offs.values())


def log_bytes(log_dirs, prefix):
    """Bytes of the log segments per topic, read from the broker's own log dirs (None
    when they cannot be read from here)."""
    if not log_dirs:
        return None
    out = {}
    for d in log_dirs:
        if not os.path.isdir(d):
            return None
        for part in os.listdir(d):
            if not part.startswith(prefix):
                continue
            topic = part[len(prefix):].rsplit("-", 1)[0]
            size = 0
            for seg in glob.glob(os.path.join(d, part, "*.log")):
                try:
                    size += os.path.getsize(seg)
                except OSError:
                    pass
            out[topic] = out.get(topic, 0) + size
    return out


def scrape_metrics(port):
    """{(metric, stage): value} from holdfast's /metrics; stage None for a metric
    without that label (the gateway view's gauges)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(holdfast_[a-z_]+)(?:\{stage="([^"]+)"\})? (\S+)$', line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_still(prefix, quiet_s, timeout_s, what):
    """Until no topic under prefix moved for quiet_s; returns seconds waited (or None
    on timeout)."""
    t0 = time.time()
    last, since = None, time.time()
    while time.time() - t0 < timeout_s:
        cur = topic_offsets(prefix)
        if cur != last:
            last, since = cur, time.time()
        elif time.time() - since >= quiet_s:
            return round(time.time() - t0, 1)
        time.sleep(1)
    log(f"  {what}: topics still moving after {timeout_s} s")
    return None


# ---- one run of the pipeline

class Proc:
    """A child process with its output in a file; stopped by its own pid only."""

    def __init__(self, cmd, out_path, env_extra=None):
        self.out_path = out_path
        self.f = open(out_path, "w")
        e = dict(os.environ, **(env_extra or {}))
        self.p = subprocess.Popen(cmd, stdout=self.f, stderr=subprocess.STDOUT, env=e)
        self.pid = self.p.pid

    def stop(self, grace_s=60):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.f.close()
        return self.p.returncode


def checked(cmd, env_extra, what, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **env_extra),
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{what} exit {r.returncode}: {(r.stderr or r.stdout).strip()[-400:]}")
    return r.stdout


def reconcile(build, env_extra, path, quiescent):
    args = [build["hfctl"], "reconcile", "--violations", "5"]
    args += ["--quiescent", "1"] if quiescent else ["--settle-attempts", "1"]
    r = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, **env_extra),
                       timeout=900)
    with open(path, "w") as f:
        f.write(r.stdout + r.stderr)
    verdict = None
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            verdict = json.loads(line)
    if verdict is None:
        verdict = {"verdict": "NO VERDICT", "detail": r.stderr.strip()[-300:]}
    verdict["exit"] = r.returncode
    return verdict


def broker_jmx_url(broker):
    """The broker's JMX address: BENCH_BROKER_JMX (host:port), else the loopback port
    its command line opened (tools/kafka/kafka-up.sh does); None when it has none."""
    where = env("BENCH_BROKER_JMX", "")
    if not where:
        try:
            with open(f"/proc/{broker['pid']}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            return None
        ports = [a.split("=", 1)[1] for a in args
                 if a.startswith("-Dcom.sun.management.jmxremote.port=")]
        if not ports:
            return None
        where = "127.0.0.1:" + ports[0]
    return f"service:jmx:rmi:///jndi/rmi://{where}/jmxrmi"


def kafka_libs(broker):
    """The classpath of Kafka's own tools: BENCH_KAFKA_LIBS, the jars kafka-up.sh fetched,
    or the broker's own classpath."""
    libs = env("BENCH_KAFKA_LIBS", "")
    if not libs:
        libs = ".cache/kafka/libs/*" if os.path.isdir(".cache/kafka/libs") else broker["classpath"]
    return libs if libs and shutil.which("java") else None


def broker_requests(broker):
    """The broker's request counts by type (kafka.network RequestMetrics RequestsPerSec,
    summed over versions) and its own timestamp, read with Kafka's JmxTool: the broker
    pays per request, so these say where its CPU goes. None without JMX."""
    url = broker_jmx_url(broker)
    libs = kafka_libs(broker)
    if not url or not libs:
        return None
    try:
        r = subprocess.run(["java", "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", libs,
                            "org.apache.kafka.tools.JmxTool", "--jmx-url", url, "--object-name",
                            "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*",
                            "--attributes", "Count", "--one-time", "true",
                            "--report-format", "properties"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    counts, t_ms = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r"time=(\d+)", line)
        if m:
            t_ms = int(m.group(1))
        m = re.search(r"request=([A-Za-z]+),version=\d+:Count=(\d+)", line)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + int(m.group(2))
    return {"t_ms": t_ms, "counts": counts} if t_ms and counts else None


def requests_per_s(r0, r1, reservations_per_s):
    """Requests/s by type between two broker_requests() snapshots, busiest first, and per
    reservation."""
    if not r0 or not r1 or r1["t_ms"] <= r0["t_ms"]:
        return None
    dt = (r1["t_ms"] - r0["t_ms"]) / 1000
    rows = {k: round((v - r0["counts"].get(k, 0)) / dt, 1) for k, v in r1["counts"].items()}
    rows = {k: v for k, v in sorted(rows.items(), key=lambda kv: -kv[1]) if v > 0}
    # FetchConsumer and FetchFollower are Fetch again, split by who asked: not summed.
    total = round(sum(v for k, v in rows.items() if k not in ("FetchConsumer", "FetchFollower")), 1)
    return {"seconds": round(dt, 2), "total_per_s": total, "by_type_per_s": rows,
            "per_reservation": round(total / reservations_per_s, 2) if reservations_per_s else None}


def holdfast_pids(ids):
    """The holdfast processes of a run: ids["holdfast_pids"] when it has several."""
    return ids.get("holdfast_pids") or [ids["holdfast"]]


def sum_metrics(each):
    """One /metrics view of several processes: every value summed (the counters
    stage_rates reads), {} when one of them did not answer (as for one process)."""
    if not all(each):
        return {}
    out = {}
    for m in each:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


def window_sample(ids):
    """CPU of every process and of holdfast's threads, offsets, metrics, at one time.
    Several holdfast processes (ids["holdfast_pids"], ids["ports"]): their threads in
    one map (thread_pid says whose), their metrics summed ("metrics") and each
    process's ("metrics_each")."""
    pids = holdfast_pids(ids)
    if len(pids) == 1:
        return {"t": time.time(), "procs": all_procs_cpu(), "threads": threads_cpu(pids[0]),
                "offsets": topic_offsets(ids["prefix"]), "metrics": scrape_metrics(ids["port"])}
    t, procs, threads, owner = time.time(), all_procs_cpu(), {}, {}
    for pid in pids:
        th = threads_cpu(pid)
        threads.update(th)
        owner.update({tid: pid for tid in th})
    each = [scrape_metrics(port) for port in ids["ports"]]
    return {"t": t, "procs": procs, "threads": threads, "thread_pid": owner,
            "offsets": topic_offsets(ids["prefix"]), "metrics": sum_metrics(each),
            "metrics_each": each}


def cores(a, b, pid):
    if pid in a["procs"] and pid in b["procs"]:
        return round((b["procs"][pid][0] - a["procs"][pid][0]) / (b["t"] - a["t"]), 3)
    return None


def cores_sum(a, b, pids):
    """Cores of several processes together; None when one of them is missing."""
    each = [cores(a, b, p) for p in pids]
    return None if None in each else round(sum(each), 3)


def partitions_owned(metrics):
    """{stage: holdfast_partitions_owned} of one /metrics view."""
    return {s: int(v) for (k, s), v in metrics.items()
            if k == "holdfast_partitions_owned" and s is not None}


def stage_rates(m0, m1, dt):
    out = {}
    stages = sorted({s for (_, s) in m1 if s is not None})
    for s in stages:
        def d(name):
            return m1.get((name, s), 0) - m0.get((name, s), 0)
        txns, recs = d("holdfast_transactions_committed_total"), d("holdfast_records_applied_total")
        csum, ccount = d("holdfast_transaction_commit_ms_sum"), d("holdfast_transaction_commit_ms_count")
        out[s] = {"transactions": int(txns), "transactions_per_s": round(txns / dt, 1) if dt else None,
                  "records_applied": int(recs),
                  "records_per_transaction": round(recs / txns, 1) if txns else None,
                  "aborts": int(d("holdfast_transactions_aborted_total")),
                  "commit_ms_mean": round(csum / ccount, 1) if ccount else None}
    return out


def cpu_window(a, b, ids):
    dt = b["t"] - a["t"]
    pids = holdfast_pids(ids)
    mine = {ids["broker"], ids["hfbench"], *pids}
    others = []
    for pid, (cpu1, comm) in b["procs"].items():
        if pid in mine or pid not in a["procs"]:
            continue
        c = (cpu1 - a["procs"][pid][0]) / dt
        if c >= 0.01:
            others.append({"pid": pid, "comm": comm, "cores": round(c, 3)})
    others.sort(key=lambda x: -x["cores"])
    threads = []
    for tid, (cpu1, comm) in b["threads"].items():
        if tid in a["threads"]:
            threads.append({"tid": tid, "comm": comm,
                            "cores": round((cpu1 - a["threads"][tid][0]) / dt, 3)})
            if "thread_pid" in b:
                threads[-1]["pid"] = b["thread_pid"][tid]
    threads.sort(key=lambda x: -x["cores"])
    recs = offsets_total(b["offsets"]) - offsets_total(a["offsets"])
    broker = cores(a, b, ids["broker"])
    out = {"seconds": round(dt, 2),
           "cores": {"broker": broker, "holdfast": cores_sum(a, b, pids),
                     "hfbench": cores(a, b, ids["hfbench"]),
                     "others": round(sum(o["cores"] for o in others), 3)},
           "others": others[:8], "holdfast_threads": threads,
           "records_per_s": round(recs / dt, 1),
           "broker_cpu_s_per_million_records": round(broker * dt / recs * 1e6, 2)
           if broker is not None and recs else None,
           "stages": stage_rates(a["metrics"], b["metrics"], dt)}
    if len(pids) > 1:
        # Each process's share: cores, and the partitions it owned at the window's end.
        out["holdfast_processes"] = [
            {"pid": p, "cores": cores(a, b, p),
             "partitions_owned": partitions_owned(b["metrics_each"][i])}
            for i, p in enumerate(pids)]
    return out


def backlog_growth(report):
    """Per-second reserve p99 of the load's last third against its first third."""
    rows = [r for r in report.get("per_second", []) if r.get("reserve_p99_ms", -1) >= 0]
    rows = rows[:SECONDS] if len(rows) > SECONDS else rows
    if len(rows) < 3:
        return {"first_third_p99_ms": None, "last_third_p99_ms": None, "growing": False}
    k = max(1, len(rows) // 3)
    first = statistics.median(r["reserve_p99_ms"] for r in rows[:k])
    last = statistics.median(r["reserve_p99_ms"] for r in rows[-k:])
    return {"first_third_p99_ms": first, "last_third_p99_ms": last,
            "growing": last > 2 * first + 100}


def per_reservation(d_offsets, d_bytes, d_data, reservations):
    out = {}
    for t in sorted(d_offsets):
        if d_offsets[t] == 0 and not (d_bytes or {}).get(t):
            continue
        row = {"records": round(d_offsets[t] / reservations, 2)}
        if d_data is not None and t in d_data:
            row["data_records"] = round(d_data[t] / reservations, 2)
            row["markers"] = round((d_offsets[t] - d_data[t]) / reservations, 2)
        if d_bytes is not None:
            row["bytes"] = round(d_bytes.get(t, 0) / reservations, 1)
        out[t] = row
    return out


def readyz(port):
    """(HTTP status, body) of holdfast's GET /readyz; (None, why) when it did not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, r.read().decode(errors="replace").strip()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace").strip()
    except OSError as e:
        return None, str(e)


# Each stage's primary input: its partition count is what its processes own together.
STAGE_PRIMARY = {"counter": "counter-commands", "aggregator": "stock-levels",
                 "gateway": "requests"}


def stage_partitions(topics_file):
    """{stage: partitions of its primary input} from a topics file."""
    by_name = {t["name"].split(".", 1)[-1]: t["partitions"]
               for t in json.load(open(topics_file))["topics"]}
    return {st: by_name[t] for st, t in STAGE_PRIMARY.items() if t in by_name}


def wait_assigned(hfs, ports, timeout_s, want):
    """Until every one of several holdfast processes answers /readyz 200 (each of its
    tasks assigned, restored, a loop done), the processes together own every partition
    of each stage (want: {stage: partitions}), and what each owns has not changed for
    ASSIGN_STILL_S: the group's last rebalance is over. Returns
    seconds waited and each process's partitions owned; raises naming what was not ready."""
    t0 = time.time()
    last, since, why = None, time.time(), "no answer yet"
    while time.time() - t0 < timeout_s:
        for i, hf in enumerate(hfs):
            if hf.p.poll() is not None:
                raise RuntimeError(f"holdfast process {i} exited {hf.p.returncode} before its "
                                   f"partitions were assigned: {open(hf.out_path).read()[-300:]}")
        answers = [readyz(p) for p in ports]
        owned = [partitions_owned(scrape_metrics(p)) for p in ports]
        stages = {s for o in owned for s in o}
        totals = {s: sum(o.get(s, 0) for o in owned) for s in stages}
        not_ready = [f"process {i}: {a[0]} {a[1][:120]}" for i, a in enumerate(answers)
                     if a[0] != 200]
        if not_ready or not stages or any(totals.get(st) != n for st, n in want.items()):
            why = "; ".join(not_ready) or f"partitions owned by stage {totals}"
            last, since = None, time.time()
        elif owned != last:
            last, since = owned, time.time()
        elif time.time() - since >= ASSIGN_STILL_S:
            return round(time.time() - t0, 1), owned
        time.sleep(0.5)
    raise RuntimeError(f"{len(hfs)} holdfast processes not all ready with their partitions "
                       f"assigned after {timeout_s} s: {why} (their logs: "
                       f"{', '.join(hf.out_path for hf in hfs)})")


def one_run(build, rate, seconds, kind, rnd, n, work_root, broker):
    name = f"{n:02d}-{build['name']}-{rate}-{kind}"
    work = os.path.join(work_root, name)
    os.makedirs(work, exist_ok=True)
    prefix = f"pb{os.getpid()}-{n}-{re.sub(r'[^a-zA-Z0-9]', '', build['name'])}-{rate}."
    envx = {"HOLDFAST_TOPIC_PREFIX": prefix, "HOLDFAST_APP_ID": prefix + "app",
            "HOLDFAST_BOOTSTRAP": BOOTSTRAP}
    nproc = BUILD_PROCESSES.get(build["name"], 1)
    # One process keeps the names it always had (config.json, holdfast.log, state);
    # several get -0, -1, ... and --instance 0, 1, ... (distinct static members and
    # transactional ids; one id twice would fence the other).
    sfx = [""] if nproc == 1 else [f"-{i}" for i in range(nproc)]
    ports = []
    while len(ports) < nproc:
        p = free_port()
        if p not in ports:
            ports.append(p)
    port = ports[0]
    config = dict({"metrics_port": port}, **EXTRA_CONFIG)
    config.update(BUILD_CONFIG.get(build["name"], {}))
    for i in range(nproc):
        with open(os.path.join(work, f"config{sfx[i]}.json"), "w") as f:
            json.dump(config if nproc == 1 else dict(config, metrics_port=ports[i]), f)
    run = {"build": build["name"], "rate": rate, "seconds": seconds, "kind": kind, "round": rnd,
           "prefix": prefix, "work": work, "config": config}
    if nproc > 1:
        run.update({"processes": nproc, "metrics_ports": ports})
    log(f"{name}: {build['name']} at {rate}/s for {seconds} s (prefix {prefix}"
        f"{'' if nproc == 1 else f', {nproc} holdfast processes'})")
    hfs = []
    try:
        checked([build["hfctl"], "topics", "apply", "--file", build["topics_file"]], envx,
                "hfctl topics apply", 120)
        for i in range(nproc):
            hfs.append(Proc([build["holdfast"], "run", "--stages", "counter,aggregator,gateway",
                             "--state-dir", os.path.join(work, f"state{sfx[i]}"), "--config",
                             os.path.join(work, f"config{sfx[i]}.json")]
                            # zero-padded: the range assignor orders members as strings
                            + ([] if nproc == 1 else ["--instance", f"{i:02d}"]),
                            os.path.join(work, f"holdfast{sfx[i]}.log"), envx))
        _pids["holdfast"] = hfs[0].pid
        _pids["holdfast_all"] = [hf.pid for hf in hfs]
        if nproc > 1:
            run["assign_wait_s"], run["partitions_owned_at_seed"] = \
                wait_assigned(hfs, ports, ASSIGN_TIMEOUT_S, stage_partitions(build["topics_file"]))
            log(f"  {nproc} processes ready in {run['assign_wait_s']} s, partitions owned "
                f"{run['partitions_owned_at_seed']}")
            idle = [i for i, o in enumerate(run["partitions_owned_at_seed"])
                    if not any(o.values())]
            if idle:
                log(f"  WARNING: process(es) {idle} own no partition: more tasks (processes x "
                    "threads_per_stage) than the topics' partitions, and the range assignor "
                    "hands them to the first tasks by instance id; those processes only "
                    "follow changelogs as standbys")
        checked([build["seeder"], "seed", "--skus", str(SKUS), "--per-sku", str(PER_SKU), "--stock",
                 str(STOCK)], envx, "hfbench seed", 900)
        run["seed_settle_s"] = wait_still(prefix, SETTLED_QUIET_S, IDLE_TIMEOUT_S, "seed")
        before = reconcile(build, envx, os.path.join(work, "reconcile-before.json"), False)
        ids = {"prefix": prefix, "port": port, "broker": broker["pid"], "holdfast": hfs[0].pid}
        if nproc > 1:
            ids.update({"holdfast_pids": [hf.pid for hf in hfs], "ports": ports})
        s0 = window_sample(dict(ids, hfbench=-1))
        b0 = log_bytes(broker["log_dirs"], prefix)
        report_path = os.path.join(work, "hfbench-report.json")
        bench = Proc([HFBENCH, "run", "--scenario", "steady", "--rate", str(rate), "--seconds",
                      str(seconds), "--skus", str(SKUS), "--report", report_path] + HFBENCH_ARGS,
                     os.path.join(work, "hfbench.out"), envx)
        ids["hfbench"] = bench.pid
        t_load = wait_header(bench, 180)
        # The middle half of the load: warm-up, start and drain left out.
        w0, w1 = t_load + seconds * 0.25, t_load + max(seconds * 0.75, seconds * 0.25 + 1)
        time.sleep(max(0, w0 - time.time() - 1))
        # JmxTool's JVM runs outside the CPU window: before a, after b.
        q0 = broker_requests(broker)
        time.sleep(max(0, w0 - time.time()))
        a = window_sample(ids)
        time.sleep(max(0, w1 - time.time()))
        b = window_sample(ids)
        q1 = broker_requests(broker)
        run["window"] = cpu_window(a, b, ids)
        run["window"]["broker_requests"] = requests_per_s(q0, q1, rate)
        rc = bench.p.wait(seconds + TTL_MS / 1000 + 600)
        bench.f.close()
        run["hfbench_exit"] = rc
        run["summary"] = read_summary(bench.out_path)
        report = json.load(open(report_path)) if os.path.exists(report_path) else {}
        run["backlog"] = backlog_growth(report)
        run["per_second"] = [{k: r[k] for k in ("t", "sent", "replies", "reserve_p99_ms")}
                             for r in report.get("per_second", [])]
        run["idle_wait_s"] = wait_still(prefix, IDLE_QUIET_S, IDLE_TIMEOUT_S, "drain")
        s1 = window_sample(ids)
        b1 = log_bytes(broker["log_dirs"], prefix)
        verdict = reconcile(build, envx, os.path.join(work, "reconcile.json"), True)
        if verdict["verdict"] == "FAIL" and '"scope":"record"' not in json.dumps(verdict):
            # An end-state violation may come from a replay taken too early: once more.
            wait_still(prefix, IDLE_QUIET_S, IDLE_TIMEOUT_S, "drain (retry)")
            verdict = reconcile(build, envx, os.path.join(work, "reconcile-2.json"), True)
        run["reconcile"] = {k: verdict.get(k) for k in
                            ("verdict", "exit", "violations_total", "violations_by_kind",
                             "violations", "detail")}
        run["reconcile"]["counts"] = {k: v for k, v in (verdict.get("counts") or {}).items()
                                      if k != "records"}
        summarize_run(run, s0, s1, b0, b1, before, verdict)
    except (RuntimeError, OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        run["error"] = str(e)
        log(f"  {name}: ERROR {e}")
    finally:
        # Each stopped by its own pid, in turn (a SIGTERM each first: they leave together).
        for hf in hfs if nproc > 1 else []:
            if hf.p.poll() is None:
                hf.p.send_signal(signal.SIGTERM)
        exits = [hf.stop() for hf in hfs]
        if exits:
            run["holdfast_exit"] = exits[0] if nproc == 1 else exits
        if not KEEP_TOPICS:
            r = subprocess.run([TOPICS_TOOL, "delete", prefix], capture_output=True, text=True)
            run["topics_deleted"] = r.returncode == 0
        for x in sfx:
            shutil.rmtree(os.path.join(work, f"state{x}"), ignore_errors=True)
    log("  " + one_line(run))
    return run


def wait_header(bench, timeout_s):
    """hfbench prints its header once its warm-up is done; the load starts 0.5 s later."""
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        try:
            if any(l.startswith("hfbench ") for l in open(bench.out_path)):
                return time.time() + 0.5
        except OSError:
            pass
        if bench.p.poll() is not None:
            raise RuntimeError(f"hfbench exited {bench.p.returncode} before its load: "
                               f"{open(bench.out_path).read()[-300:]}")
        time.sleep(0.1)
    raise RuntimeError(f"hfbench did not start its load in {timeout_s} s")


def read_summary(path):
    summary = None
    for line in open(path):
        if line.startswith('{"scenario"'):
            summary = json.loads(line)
    if summary is None:
        raise RuntimeError(f"hfbench printed no summary: {open(path).read()[-300:]}")
    return summary


def summarize_run(run, s0, s1, b0, b1, before, verdict):
    sm = run["summary"]
    reserves = sm["reserves"]
    answered = reserves - sm["without_reply"]
    d_off = {t: sum(s1["offsets"].get(t, [])) - sum(s0["offsets"].get(t, []))
             for t in s1["offsets"]}
    d_bytes = None if b0 is None or b1 is None else {t: b1.get(t, 0) - b0.get(t, 0) for t in b1}
    recs0 = (before.get("counts") or {}).get("records")
    recs1 = (verdict.get("counts") or {}).get("records")
    d_data = None
    if recs0 and recs1:
        strip = len(run["prefix"])
        d_data = {t[strip:] if t.startswith(run["prefix"]) else t: recs1[t] - recs0.get(t, 0)
                  for t in recs1}
    total_recs = sum(d_off.values())
    run["answered"] = answered
    run["answered_fraction"] = round(answered / reserves, 4) if reserves else None
    within = sm["reserve_ms"].get("answered_within_1000ms")
    run["answered_within_1s_fraction"] = round(within / reserves, 4) if within is not None else None
    run["answered_per_s"] = round(answered / run["seconds"], 1)
    run["latency_ms"] = {k: {p: sm[k + "_ms"].get(p) for p in ("p50", "p99", "p999")}
                         for k in ("reserve", "commit", "release")}
    run["per_reservation"] = {
        "reservations": reserves,
        "records": round(total_recs / reserves, 2),
        "bytes": round(sum(d_bytes.values()) / reserves, 1) if d_bytes else None,
        "data_records": round(sum(d_data.values()) / reserves, 2) if d_data else None,
        "by_topic": per_reservation(d_off, d_bytes, d_data, reserves)}
    run["mean_record_bytes"] = round(sum(d_bytes.values()) / total_recs, 1) \
        if d_bytes and total_recs else None
    dt = s1["t"] - s0["t"]
    run["whole_run"] = {"seconds": round(dt, 1), "stages": stage_rates(s0["metrics"], s1["metrics"], dt),
                        "cpu_s": {k: round(s1["procs"][p][0] - s0["procs"][p][0], 2)
                                  for k, p in (("broker", run_pid(s0, s1, "broker")),
                                               ("holdfast", run_pid(s0, s1, "holdfast"))) if p}}
    hf_all = _pids.get("holdfast_all") or []
    if len(hf_all) > 1:
        # Several processes: holdfast's CPU is theirs together (none when one is gone).
        each = [round(s1["procs"][p][0] - s0["procs"][p][0], 2)
                if p in s0["procs"] and p in s1["procs"] else None for p in hf_all]
        run["whole_run"]["cpu_s"].pop("holdfast", None)
        if None not in each:
            run["whole_run"]["cpu_s"]["holdfast"] = round(sum(each), 2)
        run["whole_run"]["holdfast_cpu_s_per_process"] = each
    for k in ("broker", "holdfast"):
        c = run["whole_run"]["cpu_s"].get(k)
        run["whole_run"][f"{k}_cpu_ms_per_reservation"] = round(c * 1000 / reserves, 3) \
            if c is not None else None
    lat = run["latency_ms"]["reserve"]["p99"]
    # A BUSY answer is an answer, but not service: a rate that sheds is above the
    # pipeline's, however quick its answers are.
    run["sustained"] = bool(sm["without_reply"] == 0 and lat is not None and lat >= 0
                            and lat < P99_SUSTAINED_MS and not run["backlog"]["growing"]
                            and (sm.get("busy") or 0) <= BUSY_SUSTAINED_MAX * reserves)
    run["within_target"] = bool(run["sustained"] and lat <= TARGET_P99_MS)


_pids = {}


def run_pid(s0, s1, role):
    p = _pids.get(role)
    return p if p in s0["procs"] and p in s1["procs"] else None


def one_line(run):
    if "error" in run:
        return f"{run['build']} {run['rate']}/s: error"
    lat = run["latency_ms"]
    w = run["window"]["cores"]
    each = run["window"].get("holdfast_processes")
    each = f" ({' + '.join(str(p['cores']) for p in each)})" if each else ""
    return (f"{run['build']} {run['rate']}/s: answered {run['answered_fraction']:.1%}, reserve "
            f"p50/p99 {lat['reserve']['p50']}/{lat['reserve']['p99']} ms, "
            f"{run['per_reservation']['records']} records/reservation, broker {w['broker']} / "
            f"holdfast {w['holdfast']}{each} cores, reconcile {run['reconcile']['verdict']}, "
            f"{'sustained' if run['sustained'] else 'NOT sustained'}")



def exit_with_checks(checks, report_path):
    """A bench's verdict: one PASS or FAIL line a check, the report's path, and the exit
    status (0 only when every check passed)."""
    for k, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}: {k}")
    print(f"  report: {report_path}")
    sys.exit(0 if all(checks.values()) else 1)


# ---- the broker's ceiling

def ceiling(broker, record_bytes, seconds, work_root):
    """ProducerPerformance, transactional (20 ms transactions), acks=all, 8 partitions,
    on a fresh topic; broker CPU and records over the middle of its run."""
    libs = kafka_libs(broker)
    if not libs:
        return {"error": "no Kafka jars (BENCH_KAFKA_LIBS) or no java"}
    prefix = f"pb{os.getpid()}-ceiling."
    topic = prefix + "perf"
    res = {"record_bytes": record_bytes, "partitions": 8, "acks": "all",
           "transaction_duration_ms": 20, "topic": topic}
    try:
        checked([TOPICS_TOOL, "create", topic, "8"], {}, "pipeline-topics create", 60)
        cmd = ["java", "-Xmx512m", "-cp", libs, "org.apache.kafka.tools.ProducerPerformance",
               "--topic", topic, "--num-records", "100000000", "--record-size", str(record_bytes),
               "--throughput", "-1", "--transactional-id", prefix + "txn",
               "--transaction-duration-ms", "20", "--producer-props",
               f"bootstrap.servers={BOOTSTRAP}", "acks=all"]
        res["command"] = " ".join(shlex.quote(c) for c in cmd)
        log(f"ceiling: ProducerPerformance, {record_bytes} B records, {seconds} s")
        pp = Proc(cmd, os.path.join(work_root, "producer-perf.out"))
        _pids["pp"] = pp.pid
        t0 = time.time()
        while time.time() - t0 < 60 and offsets_total(topic_offsets(prefix)) == 0:
            if pp.p.poll() is not None:
                raise RuntimeError(open(pp.out_path).read()[-400:])
            time.sleep(0.5)
        time.sleep(2)  # past the producer's first, slow transactions
        ids = {"prefix": prefix, "port": 0, "broker": broker["pid"], "holdfast": pp.pid,
               "hfbench": -1}
        a = window_sample(ids)
        time.sleep(seconds)
        b = window_sample(ids)
        pp.stop(10)
        w = cpu_window(a, b, ids)
        res.update({"seconds": w["seconds"], "records_per_s": w["records_per_s"],
                    "broker_cores": w["cores"]["broker"], "producer_cores": w["cores"]["holdfast"],
                    "others_cores": w["cores"]["others"],
                    "broker_cpu_s_per_million_records": w["broker_cpu_s_per_million_records"]})
        lines = [l for l in open(pp.out_path) if "records/sec" in l]
        res["producer_perf_last_line"] = lines[-1].strip() if lines else None
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        res["error"] = str(e)
    finally:
        subprocess.run([TOPICS_TOOL, "delete", prefix], capture_output=True)
    log(f"  ceiling: {res.get('records_per_s')} records/s, "
        f"{res.get('broker_cpu_s_per_million_records')} broker CPU-s per million records")
    return res


# ---- medians, table, plot

def med(vals):
    vals = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(vals) if vals else None


def median_row(runs):
    """The median over rounds of the figures the table shows."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"build": runs[0]["build"], "rate": runs[0]["rate"], "rounds": len(runs),
                "error": runs[0]["error"]}

    def m(f):
        return med([f(r) for r in ok])
    row = {"build": ok[0]["build"], "rate": ok[0]["rate"], "kind": ok[0]["kind"],
           "rounds": len(runs), "rounds_ok": len(ok),
           "answered_fraction": m(lambda r: r["answered_fraction"]),
           "answered_within_1s_fraction": m(lambda r: r["answered_within_1s_fraction"]),
           "answered_per_s": m(lambda r: r["answered_per_s"]),
           "latency_ms": {k: {p: m(lambda r, k=k, p=p: r["latency_ms"][k][p])
                              for p in ("p50", "p99", "p999")}
                          for k in ("reserve", "commit", "release")},
           "records_per_reservation": m(lambda r: r["per_reservation"]["records"]),
           "bytes_per_reservation": m(lambda r: r["per_reservation"]["bytes"]),
           "cores": {k: m(lambda r, k=k: r["window"]["cores"][k])
                     for k in ("broker", "holdfast", "hfbench", "others")},
           "records_per_s": m(lambda r: r["window"]["records_per_s"]),
           "broker_cpu_s_per_million_records":
               m(lambda r: r["window"]["broker_cpu_s_per_million_records"]),
           "holdfast_cpu_ms_per_reservation":
               m(lambda r: r["whole_run"]["holdfast_cpu_ms_per_reservation"]),
           "broker_cpu_ms_per_reservation":
               m(lambda r: r["whole_run"]["broker_cpu_ms_per_reservation"]),
           "expiry_lag_ms_max": {
               k: m(lambda r, k=k: r["reconcile"]["counts"].get(f"{k}_expiry_lag_ms_max"))
               for k in ("gateway", "counter")},
           "stages": {}, "reconcile": [r["reconcile"]["verdict"] for r in ok],
           "sustained_rounds": sum(r["sustained"] for r in ok)}
    row["sustained"] = row["sustained_rounds"] * 2 > len(runs)
    if ok[0].get("processes", 1) > 1:
        row["processes"] = ok[0]["processes"]
        row["holdfast_cores_per_process"] = [
            m(lambda r, i=i: (r["window"].get("holdfast_processes") or [{}] * (i + 1))[i]
              .get("cores")) for i in range(row["processes"])]
    row["within_target_rounds"] = sum(r["within_target"] for r in ok)
    row["within_target"] = row["within_target_rounds"] * 2 > len(runs)
    for s in ("counter", "aggregator", "gateway"):
        row["stages"][s] = {
            k: m(lambda r, s=s, k=k: (r["window"]["stages"].get(s) or {}).get(k))
            for k in ("transactions_per_s", "records_per_transaction", "commit_ms_mean")}
    kinds = sorted({k for r in ok for k in ((r["window"].get("broker_requests") or {})
                                            .get("by_type_per_s") or {})})
    row["broker_requests_per_s"] = {
        k: m(lambda r, k=k: ((r["window"].get("broker_requests") or {}).get("by_type_per_s")
                             or {}).get(k, 0) if r["window"].get("broker_requests") else None)
        for k in kinds}
    row["broker_requests_per_reservation"] = m(
        lambda r: (r["window"].get("broker_requests") or {}).get("per_reservation"))
    topics = sorted({t for r in ok for t in r["per_reservation"]["by_topic"]})
    row["by_topic"] = {t: {k: m(lambda r, t=t, k=k: r["per_reservation"]["by_topic"].get(t, {}).get(k))
                           for k in ("records", "data_records", "markers", "bytes")} for t in topics}
    return row


def fmt(v, nd=0):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}" if nd else f"{v:.0f}"
    return str(v)


def lat3(l):
    return "/".join(fmt(l[p]) for p in ("p50", "p99", "p999"))


def print_table(conditions, rows, ceil, out):
    w = out.write
    w("\n== bench-pipeline: holdfast run --stages counter,aggregator,gateway under "
      "hfbench run --scenario steady\n")
    c = conditions
    w(f"cores: {c['cores']} ({c['cpu_model']}); sharing them: broker pid {c['broker']['pid']}, "
      f"and before the runs: {c['before_runs_busy'] or 'nothing above 0.02 cores'}\n")
    w(f"broker: Kafka {c['broker']['version']}, heap {c['broker']['heap']}, "
      f"{c['broker']['gc']}; {BOOTSTRAP}; up {c['broker'].get('up_s')} s before the runs"
      f"{'; warm-up run ' + str(c['warmup_seconds']) + ' s, not counted' if c.get('warmup_seconds') else ''}\n")
    for b in c["builds"]:
        extra = f"; its own config {json.dumps(b['config'])}" if b.get("config") else ""
        if b.get("processes", 1) > 1:
            extra += (f"; {b['processes']} holdfast processes (one app id, own state, instance "
                      "and metrics port each; cores, txn/s and CPU per reservation are their sums)")
        w(f"build {b['name']}: {b['holdfast']} ({b['commit']}), topics {b['topics_file']}: "
          f"{b['partitions']}{extra}\n")
    w(f"holdfast config: {json.dumps(c['holdfast_config'])}; catalog {SKUS} SKUs x {PER_SKU} "
      f"warehouses, stock {STOCK}; {SECONDS} s per rate, {ROUNDS} round(s), medians\n")
    w("latencies in ms from intended send time (p50/p99/p999); cores over the middle half "
      "of the load; rec = offsets (records + markers) per reservation\n\n")
    hdr = (f"{'build':<10} {'offered':>7} {'answ/s':>7} {'answ%':>6} {'reserve':>16} "
           f"{'commit':>14} {'release':>14} {'rec':>5} {'bytes':>6} {'brk':>5} {'hf':>5} "
           f"{'drv':>5} {'oth':>5} {'txn/s c/a/g':>14} {'rec/txn c/a/g':>15} "
           f"{'rec/s:ceil':>10} {'brkCPU:ceil':>11} {'reconcile':>10} sustained\n")
    w(hdr)
    for r in rows:
        if "error" in r:
            w(f"{r['build']:<10} {r['rate']:>7} error: {r['error'][:100]}\n")
            continue
        st = r["stages"]
        tx = "/".join(fmt(st[s]["transactions_per_s"]) for s in ("counter", "aggregator", "gateway"))
        rt = "/".join(fmt(st[s]["records_per_transaction"]) for s in ("counter", "aggregator", "gateway"))
        ratio_r = ratio_c = None
        if ceil and ceil.get("records_per_s") and r["records_per_s"]:
            ratio_r = r["records_per_s"] / ceil["records_per_s"]
        if ceil and ceil.get("broker_cpu_s_per_million_records") and r["broker_cpu_s_per_million_records"]:
            ratio_c = r["broker_cpu_s_per_million_records"] / ceil["broker_cpu_s_per_million_records"]
        l = r["latency_ms"]
        label = r["rate"] if r["kind"] == "ladder" else f"{r['rate']}!"
        w(f"{r['build']:<10} {label:>7} {fmt(r['answered_per_s']):>7} "
          f"{fmt(r['answered_fraction'] * 100 if r['answered_fraction'] is not None else None, 1):>6} "
          f"{lat3(l['reserve']):>16} {lat3(l['commit']):>14} {lat3(l['release']):>14} "
          f"{fmt(r['records_per_reservation'], 1):>5} {fmt(r['bytes_per_reservation']):>6} "
          f"{fmt(r['cores']['broker'], 2):>5} {fmt(r['cores']['holdfast'], 2):>5} "
          f"{fmt(r['cores']['hfbench'], 2):>5} {fmt(r['cores']['others'], 2):>5} {tx:>14} {rt:>15} "
          f"{fmt(ratio_r, 3):>10} {fmt(ratio_c, 1):>11} {','.join(r['reconcile']):>10} "
          f"{('yes+' if r.get('within_target') else 'yes') if r['sustained'] else 'no'}\n")
    w("(offered N! = the overload run; rec/s:ceil = holdfast's records/s over the broker's "
      f"ceiling, brkCPU:ceil = broker CPU per record over the ceiling's; yes+ = sustained with "
      f"reserve p99 <= {TARGET_P99_MS} ms)\n")
    if ceil:
        w(f"\nbroker ceiling (ProducerPerformance, transactional 20 ms, acks=all, 8 partitions, "
          f"{ceil.get('record_bytes')} B): {fmt(ceil.get('records_per_s'))} records/s, "
          f"{fmt(ceil.get('broker_cpu_s_per_million_records'), 2)} broker CPU-s per million "
          f"records (broker {fmt(ceil.get('broker_cores'), 2)} cores, producer "
          f"{fmt(ceil.get('producer_cores'), 2)}){' ERROR ' + ceil['error'] if ceil.get('error') else ''}\n")
    topics = sorted({t for r in rows if "by_topic" in r for t in r["by_topic"]})
    if topics:
        w("\nrecords (offsets) / data records per reservation by topic, bytes per reservation\n")
        w(f"{'topic':<22}" + "".join(f"{r['build'][:8] + ' ' + str(r['rate']):>22}"
                                     for r in rows if "by_topic" in r) + "\n")
        for t in topics:
            cells = []
            for r in rows:
                if "by_topic" not in r:
                    continue
                x = r["by_topic"].get(t, {})
                cells.append(f"{fmt(x.get('records'), 2)}/{fmt(x.get('data_records'), 2)} "
                             f"{fmt(x.get('bytes'))}B")
            w(f"{t.replace('holdfast.', ''):<22}" + "".join(f"{c:>22}" for c in cells) + "\n")
        cells = [f"{fmt(sum(x.get('records') or 0 for x in r['by_topic'].values()), 2)}/"
                 f"{fmt(sum(x.get('data_records') or 0 for x in r['by_topic'].values()), 2)} "
                 f"{fmt(sum(x.get('bytes') or 0 for x in r['by_topic'].values()))}B"
                 for r in rows if "by_topic" in r]
        w(f"{'all topics':<22}" + "".join(f"{c:>22}" for c in cells) + "\n")
    print_requests(rows, w)


def print_requests(rows, w):
    """The broker's requests/s by type (JMX), busiest types first: the broker pays per
    request, so this is where its CPU per reservation comes from."""
    rows = [r for r in rows if r.get("broker_requests_per_s")]
    if not rows:
        w("\nbroker requests by type: no JMX (tools/kafka/kafka-up.sh opens it; "
          "BENCH_BROKER_JMX=host:port for another broker)\n")
        return
    total = {}
    for r in rows:
        for k, v in r["broker_requests_per_s"].items():
            total[k] = total.get(k, 0) + (v or 0)
    kinds = [k for k, v in sorted(total.items(), key=lambda kv: -kv[1]) if v >= 0.5][:14]
    w("\nbroker requests/s by type (kafka.network RequestMetrics, medians)\n")
    w(f"{'request':<22}" + "".join(f"{r['build'][:8] + ' ' + str(r['rate']):>16}" for r in rows) + "\n")
    for k in kinds:
        w(f"{k:<22}" + "".join(f"{fmt(r['broker_requests_per_s'].get(k), 1):>16}" for r in rows) + "\n")
    w(f"{'per reservation':<22}" + "".join(
        f"{fmt(r.get('broker_requests_per_reservation'), 2):>16}" for r in rows) + "\n")


def plot(rows, png):
    if not shutil.which("gnuplot"):
        return "gnuplot missing (bash tools/deps.sh plot)"
    dat = png[:-4] + ".dat"
    builds = []
    with open(dat, "w") as f:
        for b in dict.fromkeys(r["build"] for r in rows):
            pts = sorted((r["answered_per_s"], r["latency_ms"]["reserve"]["p99"],
                          f"{r['rate']}{'' if r['kind'] == 'ladder' else '!'}")
                         for r in rows if r["build"] == b and "error" not in r
                         and r["latency_ms"]["reserve"]["p99"] not in (None, -1))
            if not pts:
                continue
            builds.append(b)
            f.write(f"# {b}\n")
            for x, y, rate in pts:
                f.write(f"{x} {max(y, 1)} {rate}\n")
            f.write("\n\n")
    if not builds:
        return "nothing to plot"
    plots = ", ".join(f'"{dat}" index {i} using 1:2 with linespoints title "{b}", '
                      f'"{dat}" index {i} using 1:2:3 with labels offset 0,1 notitle'
                      for i, b in enumerate(builds))
    script = f"""set terminal pngcairo size 900,520 noenhanced
set output "{png}"
set title "holdfast full pipeline: reserves answered/s against reserve p99 (labels: offered/s, ! = overload)"
set xlabel "reserves answered / s"
set ylabel "reserve p99, ms (log)"
set logscale y
set xrange [0:*]
set offsets 0, graph 0.08, graph 0.1, 0
set grid
set key left top
plot {plots}, {P99_SUSTAINED_MS} with lines dashtype 2 title "{P99_SUSTAINED_MS} ms"
"""
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    return None if r.returncode == 0 else r.stderr.strip()


def partitions_of(topics_file):
    try:
        t = json.load(open(topics_file))["topics"]
        return " ".join(f"{x['name'].replace('holdfast.', '')}:{x['partitions']}" for x in t)
    except (OSError, KeyError, ValueError):
        return "?"


def conditions(builds, broker):
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    a = all_procs_cpu()
    t0 = time.time()
    time.sleep(2)
    b = all_procs_cpu()
    dt = time.time() - t0
    busy = sorted(((b[p][0] - a[p][0]) / dt, p, b[p][1]) for p in b if p in a)
    busy = [f"{comm}({pid}) {c:.2f}" for c, pid, comm in reversed(busy) if c >= 0.02][:6]
    for bl in builds:
        bl["partitions"] = partitions_of(bl["topics_file"])
        bl["config"] = BUILD_CONFIG.get(bl["name"], {})
        bl["processes"] = BUILD_PROCESSES.get(bl["name"], 1)
    return {"cores": os.cpu_count(), "cpu_model": model, "broker": broker,
            "before_runs_busy": ", ".join(busy), "builds": builds,
            "holdfast_config": dict({"metrics_port": "(free port)"}, **EXTRA_CONFIG),
            "catalog": {"skus": SKUS, "per_sku": PER_SKU, "stock": STOCK},
            "rates": RATES, "seconds": SECONDS, "rounds": ROUNDS,
            "overload_seconds": OVERLOAD_S, "ceiling_seconds": CEILING_S,
            "hfbench_args": HFBENCH_ARGS, "bootstrap": BOOTSTRAP,
            "load_average": open("/proc/loadavg").read().split()[:3]}


# ---- main

def main():
    for tool in (HFBENCH, TOPICS_TOOL, "build/hfctl"):
        if not os.access(tool, os.X_OK):
            sys.exit(f"bench-pipeline: {tool} missing: make release {TOPICS_TOOL}")
    builds = parse_builds()
    unknown = set(BUILD_PROCESSES) - {b["name"] for b in builds}
    if unknown:
        sys.exit(f"bench-pipeline: BENCH_BUILD_PROCESSES names {sorted(unknown)}, not builds of "
                 f"BENCH_BUILDS ({', '.join(b['name'] for b in builds)})")
    broker_pid = find_broker()
    if not broker_pid:
        sys.exit("bench-pipeline: no Kafka broker process (java kafka.Kafka) found: make kafka-up")
    broker = broker_facts(broker_pid)
    _pids["broker"] = broker_pid
    stamp = time.strftime("%Y%m%d-%H%M%S")
    os.makedirs(OUT_DIR, exist_ok=True)
    work_root = os.path.join(OUT_DIR, f"pipeline-{stamp}")
    os.makedirs(work_root, exist_ok=True)
    json_path = os.path.join(OUT_DIR, f"pipeline-{stamp}.json")
    cond = conditions(builds, broker)
    log(f"{len(builds)} build(s), rates {RATES}, {SECONDS} s each, {ROUNDS} round(s); "
        f"artifacts {work_root}")
    runs, n = [], 0
    warmup_s = WARMUP_S if WARMUP_S >= 0 else \
        (WARMUP_DEFAULT_S if (broker.get("up_s") or 0) < WARMUP_AFTER_BROKER_S else 0)
    cond["warmup_seconds"] = warmup_s
    if warmup_s > 0:
        log(f"warm-up: the broker has been up {broker.get('up_s')} s; {builds[0]['name']} at "
            f"{RATES[0]}/s for {warmup_s} s, not counted (BENCH_WARMUP_SECONDS=0 skips it)")
        n += 1
        runs.append(one_run(builds[0], RATES[0], warmup_s, "warmup", 0, n, work_root, broker))
    failed_at, fails_in_a_row = {}, {}
    ladder_rates = list(RATES)
    for rnd in range(1, ROUNDS + 1):
        for rate in ladder_rates:
            order = builds if rnd % 2 else list(reversed(builds))
            for b in order:
                if LADDER_STOP and rate > failed_at.get(b["name"], rate):
                    continue  # above the rate this build failed at in round 1
                n += 1
                r = one_run(b, rate, SECONDS, "ladder", rnd, n, work_root, broker)
                runs.append(r)
                if rnd == 1:
                    # Two unsustained rates in a row end a build's climb (one may be noise).
                    fails_in_a_row[b["name"]] = 0 if r.get("sustained") else \
                        fails_in_a_row.get(b["name"], 0) + 1
                    if fails_in_a_row[b["name"]] >= 2:
                        failed_at.setdefault(b["name"], rate)
            if rnd == 1 and LADDER_STOP and len(failed_at) == len(builds):
                ladder_rates = [x for x in RATES if x <= rate]
                log(f"every build failed two rates in a row, the last {rate}/s: the ladder "
                    "stops there")
                break
    ladder = group_rows([r for r in runs if r["kind"] == "ladder"])
    def highest_where(flag):  # each build's highest ladder rate whose row has flag set
        return {b["name"]: max([r["rate"] for r in ladder if r["build"] == b["name"]
                                and r.get(flag)], default=None) for b in builds}
    highest, highest_target = highest_where("sustained"), highest_where("within_target")
    mean_bytes = med([r.get("mean_record_bytes") for r in runs if r["kind"] != "warmup"]) or 150
    ceil = ceiling(broker, int(round(mean_bytes)), CEILING_S, work_root) if CEILING_S > 0 else None
    overload_rows = []
    best = max([h for h in highest.values() if h], default=None)
    overload_basis = "2x the highest sustained rate (of any build)"
    if best is None:
        best = min(RATES)
        overload_basis = "2x the lowest rate of the ladder: no rate was sustained"
    overload_rate = env_int("BENCH_OVERLOAD_RATE", 2 * best)
    if OVERLOAD_S > 0:
        log(f"overload: {overload_rate}/s for {OVERLOAD_S} s ({overload_basis})")
        over = []
        for b in builds:
            n += 1
            over.append(one_run(b, overload_rate, OVERLOAD_S, "overload", 1, n, work_root, broker))
        runs.extend(over)
        overload_rows = group_rows(over)
    rows = ladder + overload_rows
    png = json_path[:-5] + ".png"
    plot_err = plot(rows, png)
    result = {"conditions": cond, "highest_sustained_rate": highest,
              "highest_rate_within_target": highest_target, "ceiling": ceil,
              "rows": rows, "overload": {"rate": overload_rate, "seconds": OVERLOAD_S,
                                         "basis": overload_basis, "rows": overload_rows},
              "runs": runs,
              "png": None if plot_err else png, "plot_error": plot_err,
              "criteria": {"sustained": f"every reserve answered, at most {BUSY_SUSTAINED_MAX:.1%} BUSY, "
                                        f"reserve p99 < {P99_SUSTAINED_MS} ms, last-third per-second p99 <= 2x first third + 100 ms",
                           "within_target": f"sustained, and reserve p99 <= {TARGET_P99_MS} ms"}}
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    print_table(cond, rows, ceil, sys.stdout)
    for r in runs:
        if "window" in r and r["kind"] != "warmup":
            th = ", ".join(f"{t['tid']}({t['comm']}{'@' + str(t['pid']) if 'pid' in t else ''}) "
                           f"{t['cores']:.2f}"
                           for t in r["window"]["holdfast_threads"] if t["cores"] >= 0.01)
            print(f"threads {r['build']} {r['rate']}/s r{r['round']}: {th or '-'}")
            for i, p in enumerate(r["window"].get("holdfast_processes") or []):
                owned = "/".join(str(p["partitions_owned"].get(s, "-"))
                                 for s in ("counter", "aggregator", "gateway"))
                print(f"  holdfast process {i} (pid {p['pid']}): {fmt(p['cores'], 2)} cores, "
                      f"partitions owned c/a/g {owned}")
            oth = ", ".join(f"{o['comm']}({o['pid']}) {o['cores']:.2f}" for o in r["window"]["others"])
            print(f"  sharing the cores then: {oth or 'nothing above 0.01 cores'}")
    for r in overload_rows:
        if "error" not in r:
            print(f"overload {r['build']} {r['rate']}/s for {OVERLOAD_S} s: answered "
                  f"{fmt(r['answered_fraction'] * 100, 1)} %, within 1 s "
                  f"{fmt((r['answered_within_1s_fraction'] or 0) * 100, 1)} %, reserve p99 "
                  f"{fmt(r['latency_ms']['reserve']['p99'])} ms, expiry lag max (gateway/counter) "
                  f"{fmt(r['expiry_lag_ms_max']['gateway'])}/{fmt(r['expiry_lag_ms_max']['counter'])}"
                  f" ms, reconcile {','.join(r['reconcile'])} ({overload_basis})")
    print("highest sustained rate: " + ", ".join(f"{k} {v or 'none'}" for k, v in highest.items()))
    print(f"highest rate within reserve p99 <= {TARGET_P99_MS} ms (sustained too; a ladder "
          "step bounds it): " + ", ".join(f"{k} {v or 'none'}" for k, v in highest_target.items()))
    print(f"json: {json_path}\nplot: {png if not plot_err else plot_err}\nartifacts: {work_root}")
    return 0 if all("error" not in r for r in runs) else 1


def group_rows(runs):
    groups = {}
    for r in runs:
        groups.setdefault((r["rate"], r["build"]), []).append(r)
    return [median_row(g) for g in groups.values()]


if __name__ == "__main__":
    sys.exit(main())
