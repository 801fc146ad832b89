#!/usr/bin/env python3
"""What tests/ops/test_ops.sh asks of a live Prometheus, through its HTTP API only
(/api/v1/query, /api/v1/query_range, /api/v1/rules, /api/v1/alerts, /api/v1/targets):
the rules file's shortened copy, target health, every series each rule reads, every
dashboard query, and a timeline of alert states written by a watcher so that an alert
that fires and resolves between two checks of the test is still seen. A series or a
query counts as present only when one of its points over the part of the test that had
traffic (START..END, epoch seconds) is a finite number: a ratio of 0/0 or a quantile of
no observation is NaN, which Prometheus returns as a sample. Each command prints what it
found and exits 0 when the check holds, 1 when it does not, 2 on bad usage.

  prom.py shorten IN OUT FOR WINDOW AGE_SCALE
                                      rules file with every `for:` set to FOR, every
                                      range window [..] in an expr set to WINDOW and every
                                      threshold `..._age_seconds > N` set to N * AGE_SCALE
  prom.py config EXAMPLE OUT RULES RUN HTTP BLACKBOX
                                      the example config with this run's targets (RUN:
                                      host:port[,host:port...], HTTP: host:port), rules
                                      file and exporter address,
                                      scrape and evaluation interval 1 s
  prom.py targets BASE N TIMEOUT_S    wait until N targets are up (health "up")
  prom.py rules BASE RULES TIMEOUT_S  every rule of RULES loaded, evaluated, health ok
  prom.py series BASE RULES START END  every series every rule reads (and records) has a
                                      finite point in START..END
  prom.py dashboard BASE DASH INTERVAL START END
                                      every panel target's expr (dashboard variables
                                      replaced by INTERVAL) has a finite point in START..END
  prom.py value BASE QUERY            the query's first sample now ("none" when empty)
  prom.py watch BASE OUT              appends {"t", "alerts": [...]} to OUT every 0.5 s
  prom.py timeline OUT NAME...        per alert: first firing, resolved after it; exit 0
                                      when each fired and none is pending or firing now
  prom.py fired OUT NAME T0 T1 [LABEL=REGEX...]
                                      NAME (labels matching) was firing in a poll at T0..T1
                                      with an activeAt at or after T0: an episode that
                                      began after T0, not one still going from before
"""
import json
import math
import re
import sys
import time
import urllib.parse
import urllib.request

import yaml


def api(base, path, params=None):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise RuntimeError(f"{url}: {doc}")
    return doc["data"]


def query(base, q):
    return api(base, "/api/v1/query", {"query": q})["result"]


def has_finite(base, q, start, end):
    """Whether the range query q has a finite point in start..end (step 1 s); with the
    number of series it returned."""
    res = api(base, "/api/v1/query_range",
              {"query": q, "start": start, "end": end, "step": "1"})["result"]
    for series in res:
        for _, v in series.get("values", []):
            if math.isfinite(float(v)):
                return True, len(res)
    return False, len(res)


def load_rules(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    return [r for g in doc["groups"] for r in g["rules"]]


def rule_name(r):
    return r.get("record") or r.get("alert")


# The selectors an expression reads (a series name with its label matchers, if any):
# identifiers that are not followed by "(" (a function or aggregation), not PromQL
# keywords, not label names of by/without/on/ignoring/group_left/group_right (...).
# String literals are kept in the matchers; the rules' matchers hold no brace.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset", "inf", "nan"}
DURATION = re.compile(r"\[[^\]]*\]")


def series_selectors(expr):
    s = DURATION.sub("", expr)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\b\s*(\([^)]*\))?", "", s)
    sels = set()
    for m in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?", s):
        word, matchers = m.group(1), m.group(2) or ""
        if word.lower() in KEYWORDS or s[m.end():].lstrip().startswith("("):
            continue
        if s[:m.start()].count('"') % 2:
            continue  # inside a string literal
        sels.add(word + re.sub(r"\s+", " ", matchers))
    return sels


AGE_THRESHOLD = re.compile(r"(_age_seconds\s*>\s*)([0-9.]+)")


def cmd_shorten(src, dst, for_, window, age_scale):
    with open(src) as f:
        doc = yaml.safe_load(f)
    scale = float(age_scale)
    for g in doc["groups"]:
        for r in g["rules"]:
            r["expr"] = DURATION.sub(f"[{window}]", r["expr"])
            r["expr"] = AGE_THRESHOLD.sub(
                lambda m: m.group(1) + f"{float(m.group(2)) * scale:g}", r["expr"])
            if "for" in r:
                r["for"] = for_
    with open(dst, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return 0


def cmd_config(example, out, rules, run, http, blackbox):
    with open(example) as f:
        doc = yaml.safe_load(f)
    doc["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    doc["rule_files"] = [rules]
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    runs = run.split(",")
    jobs["holdfast-run"]["static_configs"] = [{"targets": runs}]
    jobs["holdfast-http"]["static_configs"] = [{"targets": [http]}]
    probe = jobs["holdfast-healthz"]
    probe["static_configs"] = [{"targets": [f"http://{t}/healthz" for t in runs + [http]]}]
    moved = [r for r in probe["relabel_configs"] if r.get("target_label") == "__address__"]
    if len(moved) != 1:
        print("config: holdfast-healthz has no single relabelling to the exporter's __address__")
        return 1
    moved[0]["replacement"] = blackbox
    with open(out, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return 0


def cmd_targets(base, n, timeout_s):
    deadline = time.time() + timeout_s
    while True:
        active = api(base, "/api/v1/targets")["activeTargets"]
        up = [t for t in active if t["health"] == "up"]
        if len(up) >= n:
            print(f"targets: {len(up)} of {len(active)} up")
            return 0
        if time.time() > deadline:
            for t in active:
                print(f"  {t['labels'].get('job')} {t['scrapeUrl']}: {t['health']} {t['lastError']}")
            print(f"targets: {len(up)} up, {n} expected after {timeout_s} s")
            return 1
        time.sleep(0.5)


def cmd_rules(base, rules_path, timeout_s):
    want = {rule_name(r) for r in load_rules(rules_path)}
    deadline = time.time() + timeout_s
    while True:
        got = {}
        for g in api(base, "/api/v1/rules")["groups"]:
            for r in g["rules"]:
                got[r["name"]] = r
        bad = []
        for name in sorted(want):
            r = got.get(name)
            if not r:
                bad.append(f"{name}: not loaded")
            elif r.get("health") != "ok":
                bad.append(f"{name}: health {r.get('health')!r} {r.get('lastError', '')}")
        if not bad:
            print(f"rules: {len(want)} loaded and evaluated, health ok")
            return 0
        if time.time() > deadline:
            print("rules: " + "; ".join(bad))
            return 1
        time.sleep(0.5)


def cmd_series(base, rules_path, start, end):
    missing, checked = [], 0
    for r in load_rules(rules_path):
        sels = series_selectors(r["expr"])
        if "record" in r:
            sels.add(r["record"])
        for sel in sorted(sels):
            checked += 1
            finite, n = has_finite(base, sel, start, end)
            if not finite:
                missing.append(f"{rule_name(r)}: {'only NaN in' if n else 'no'} series {sel}")
    for m in missing:
        print("  " + m)
    print(f"series: {checked - len(missing)} of {checked} (rule, series) pairs with a finite point")
    return 1 if missing else 0


def panel_targets(panels):
    for p in panels:
        yield from panel_targets(p.get("panels", []))
        for t in p.get("targets", []):
            if t.get("expr"):
                yield p.get("title", "?"), t["expr"]


def cmd_dashboard(base, dash_path, interval, start, end):
    with open(dash_path) as f:
        dash = json.load(f)
    empty, nan_now, n = [], [], 0
    for title, expr in panel_targets(dash["panels"]):
        q = re.sub(r"\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}",
                   interval, expr)
        if "$" in q:
            empty.append(f"{title}: an unknown dashboard variable in {expr}")
            continue
        n += 1
        try:
            finite, series = has_finite(base, q, start, end)
        except Exception as e:  # a query Prometheus refuses is as bad as an empty one
            empty.append(f"{title}: {q}: {e}")
            continue
        if not finite:
            empty.append(f"{title}: {q}: {'only NaN' if series else 'empty'}")
        elif not any(math.isfinite(float(r["value"][1])) for r in query(base, q)):
            nan_now.append(f"{title}: {q}")
    for e in empty:
        print("  " + e)
    for e in nan_now:
        print(f"  (finite while the traffic ran, no finite sample now: {e})")
    print(f"dashboard: {n - len(empty)} of {n} queries with a finite point")
    return 1 if empty or n == 0 else 0


def cmd_watch(base, out):
    with open(out, "a") as f:
        while True:
            try:
                alerts = api(base, "/api/v1/alerts")["alerts"]
                line = {"t": time.time(), "alerts": [
                    {"name": a["labels"]["alertname"], "state": a["state"], "labels": a["labels"],
                     "activeAt": a.get("activeAt")}
                    for a in alerts]}
            except Exception as e:
                line = {"t": time.time(), "error": str(e)}
            f.write(json.dumps(line) + "\n")
            f.flush()
            time.sleep(0.5)


def cmd_timeline(out, names):
    polls = []
    with open(out) as f:
        for line in f:
            try:
                polls.append(json.loads(line))
            except ValueError:
                pass  # the line being written
    polls = [p for p in polls if "alerts" in p]
    if not polls:
        print("timeline: no poll of /api/v1/alerts yet")
        return 1
    t0, ok = polls[0]["t"], True
    for name in names:
        fired = next((p["t"] for p in polls
                      if any(a["name"] == name and a["state"] == "firing" for a in p["alerts"])), None)
        now = [a["state"] for a in polls[-1]["alerts"] if a["name"] == name]
        if fired is None:
            print(f"  {name}: never fired")
            ok = False
            continue
        if now:
            print(f"  {name}: fired at +{fired - t0:.1f} s, still {'/'.join(sorted(set(now)))}")
            ok = False
            continue
        resolved = next(p["t"] for p in polls
                        if p["t"] > fired and not any(a["name"] == name for a in p["alerts"]))
        print(f"  {name}: fired at +{fired - t0:.1f} s, resolved at +{resolved - t0:.1f} s")
    return 0 if ok else 1


def parse_time(rfc3339):
    """Prometheus's activeAt (RFC 3339, nanoseconds) as epoch seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", rfc3339 or "")
    if not m:
        return None
    from datetime import datetime
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    t = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return t + float("0" + (m.group(2) or ""))


def cmd_fired(out, name, t0, t1, matchers):
    t0, t1 = float(t0), float(t1)
    want = [m.split("=", 1) for m in matchers]
    with open(out) as f:
        polls = []
        for line in f:
            try:
                polls.append(json.loads(line))
            except ValueError:
                pass
    seen = []
    for p in polls:
        if "alerts" not in p or not t0 <= p["t"] <= t1:
            continue
        for a in p["alerts"]:
            if a["name"] != name or not all(re.fullmatch(v, a["labels"].get(k, "")) for k, v in want):
                continue
            active = parse_time(a.get("activeAt"))
            seen.append(f"{a['state']} since {active - t0:+.1f} s" if active else a["state"])
            if a["state"] == "firing" and active is not None and active >= t0:
                print(f"  {name}: firing at +{p['t'] - t0:.1f} s, active since "
                      f"+{active - t0:.1f} s (window {t1 - t0:.1f} s)")
                return 0
    print(f"  {name} {' '.join(matchers)}: not firing with an episode begun in the window "
          f"({t1 - t0:.1f} s); seen: {', '.join(sorted(set(seen))) or 'nothing'}")
    return 1


def cmd_value(base, q):
    res = query(base, q)
    print(res[0]["value"][1] if res else "none")
    return 0


def main(argv):
    cmds = {
        "shorten": (5, lambda a: cmd_shorten(*a)),
        "config": (6, lambda a: cmd_config(*a)),
        "targets": (3, lambda a: cmd_targets(a[0], int(a[1]), float(a[2]))),
        "rules": (3, lambda a: cmd_rules(a[0], a[1], float(a[2]))),
        "series": (4, lambda a: cmd_series(*a)),
        "dashboard": (5, lambda a: cmd_dashboard(*a)),
        "value": (2, lambda a: cmd_value(*a)),
        "fired": (4, lambda a: cmd_fired(a[0], a[1], a[2], a[3], a[4:])),
        "watch": (2, lambda a: cmd_watch(*a)),
        "timeline": (2, lambda a: cmd_timeline(a[0], a[1:])),
    }
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 < cmds[argv[1]][0]:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]][1](argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
