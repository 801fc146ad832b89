"""What bench-flash and bench-burst share with bench-pipeline: the builds to compare
(BENCH_BUILDS, resolved by pipeline.py: each build's hfctl and hfbench beside its
holdfast), the conditions a run is read against (cores, CPU model, what shared the cores,
the broker's version, heap and age), a setting's default as a build documents it, and a
restart of the local broker for a run in its first minute. The /proc and broker helpers
are pipeline.py's own, imported, so the three benches describe a box the same way."""
import os
import re
import subprocess
import sys

import pipeline as pl

BOOTSTRAP = pl.BOOTSTRAP
LOCAL_BROKER_CONFIG = "/.cache/kafka/server.properties"  # tools/kafka/kafka-up.sh's


def builds(tool):
    """pipeline.py's reading of BENCH_BUILDS ("name=path/to/holdfast ..."), its refusals
    worded for this tool."""
    try:
        return pl.parse_builds()
    except SystemExit as e:
        sys.exit(str(e.code).replace("bench-pipeline", tool))


def broker(tool):
    pid = pl.find_broker()
    if not pid:
        sys.exit(f"{tool}: no Kafka broker process (java kafka.Kafka) found: make kafka-up")
    return pl.broker_facts(pid)


def broker_age_s(b):
    age = pl.process_age_s(b["pid"]) if b.get("pid") else None
    return None if age is None else round(age, 1)


def config_default(build, key):
    """The default of a setting as the build's docs/CONFIGURATION.md states it (its
    table's second column), or None."""
    path = os.path.join(os.path.dirname(os.path.dirname(build["holdfast"])), "docs",
                        "CONFIGURATION.md")
    try:
        for line in open(path):
            m = re.match(r"\|\s*`" + re.escape(key) + r"`\s*\|\s*([^|]*?)\s*\|", line)
            if m:
                return m.group(1)
    except OSError:
        pass
    return None


def conditions(bl, b):
    """The facts a reader needs beside the figures, as a dict and as lines of text. Takes
    2 s (what runs on the cores is sampled)."""
    c = pl.conditions(bl, b)
    age = b.get("up_s")
    facts = {"cores": c["cores"], "cpu_model": c["cpu_model"],
             "before_runs_busy": c["before_runs_busy"], "load_average": c["load_average"],
             "bootstrap": BOOTSTRAP,
             "broker": {k: b.get(k) for k in ("pid", "version", "heap", "gc", "up_s")},
             "builds": [{k: x[k] for k in ("name", "holdfast", "hfctl", "seeder", "commit")}
                        for x in bl]}
    text = [f"{c['cores']} cores ({c['cpu_model']}), shared with the broker; before the runs: "
            f"{c['before_runs_busy'] or 'nothing above 0.02 cores'}; load average "
            f"{' '.join(c['load_average'])}",
            f"broker {BOOTSTRAP}: Kafka {b.get('version') or '?'}, heap {b.get('heap') or '?'}, "
            f"{b.get('gc') or '?'}, up {'?' if age is None else f'{age} s'} (pid {b.get('pid')}); "
            "its own ceiling: make bench-pipeline"]
    text += [f"build {x['name']}: {x['holdfast']} ({x['commit']})" for x in bl]
    return facts, text


def local_broker_root(b):
    """The checkout whose tools/kafka/kafka-up.sh started the broker at BOOTSTRAP, or None
    (a remote broker, or one started some other way: not ours to restart)."""
    host = BOOTSTRAP.split(",")[0].rsplit(":", 1)[0]
    cfg = b.get("config") or ""
    if "," in BOOTSTRAP or host not in ("127.0.0.1", "localhost") or \
            not cfg.endswith(LOCAL_BROKER_CONFIG):
        return None
    root = cfg[:-len(LOCAL_BROKER_CONFIG)]
    ok = all(os.access(os.path.join(root, "tools", "kafka", s), os.X_OK)
             for s in ("kafka-up.sh", "kafka-down.sh"))
    return root if ok else None


def restart_local_broker(root, tool):
    """Stops the broker with its checkout's kafka-down.sh and starts it again with
    kafka-up.sh (same port); returns the new broker's facts."""
    port = BOOTSTRAP.rsplit(":", 1)[1]
    envx = dict(os.environ, HOLDFAST_KAFKA_PORT=port)
    for script in ("kafka-down.sh", "kafka-up.sh"):
        r = subprocess.run([os.path.join(root, "tools", "kafka", script)], env=envx,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"{script} exit {r.returncode}: "
                               f"{(r.stderr or r.stdout).strip()[-300:]}")
    return broker(tool)


def alternate(builds_list, rnd):
    """Builds in the order of round rnd: reversed every other round, as bench-pipeline."""
    return builds_list if rnd % 2 else list(reversed(builds_list))
