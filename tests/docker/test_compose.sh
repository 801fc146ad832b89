#!/usr/bin/env bash
# make test-docker: checks the structure of docker-compose.yml, Dockerfile and
# .dockerignore without Docker (there is no Docker engine where holdfast is built and
# tested, so nothing here builds the image or starts a container). The checks are
# cross-checked against the repository: the Makefile's release target and pkg-config
# list, the stage registry (processor/stages.c), the options of `holdfast run`
# (processor/main.c), the single-node broker settings of tools/kafka/server.properties.in,
# the Kafka version of tools/kafka/pom.xml and the build group of tools/deps.sh.
#
# Then a self-test: each check is run against deliberately broken copies of those
# files (mutations applied in memory) and must fail on them, so a check that can no
# longer fail is itself reported as a failure.
#
# Package names are looked up with apt-cache when this machine is Debian 12 with
# package lists; otherwise against the list of known Debian 12 names in this file.
# HF_DOCKER_TEST_NO_APT=1 forces the list.
#
# usage: bash tests/docker/test_compose.sh [REPO_ROOT]
# Output: one line per check, then "N passed, M failed"; exit 1 on any failure.
set -euo pipefail
root=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)

# PyYAML: python3-yaml (tools/deps.sh, group python). The python3 first on PATH may
# be another installation than Debian's, so try Debian's too.
py=
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null && "$cand" -c 'import yaml' 2>/dev/null; then py=$cand; break; fi
done
if [ -z "$py" ]; then
  echo "test_compose: needs python3 with PyYAML (apt-get install python3-yaml, or: bash tools/deps.sh python)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

exec "$py" - "$root" <<'PY'
import fnmatch
import functools
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import yaml

ROOT = sys.argv[1]

# Debian 12 (bookworm) package names this project uses, for machines where apt-cache
# cannot answer for Debian 12. Verified with apt-cache on Debian 12.
DEBIAN12_KNOWN = {
    "build-essential", "pkg-config", "make", "gcc", "libc6-dev", "npm",
    "librdkafka-dev", "librocksdb-dev", "libavro-dev", "libjansson-dev", "libcmocka-dev",
    "librdkafka1", "librocksdb7.8", "libavro23", "libjansson4", "libcmocka0",
    "libzstd-dev", "libzstd1", "zlib1g-dev", "zlib1g",
    "libmicrohttpd-dev", "libmicrohttpd12", "libssl-dev", "libssl3", "libcurl4-openssl-dev", "libcurl4",
    "libgnutls28-dev", "libgnutls30",
    "ca-certificates", "tini", "bash", "python3", "python3-yaml",
}
# pkg-config name (Makefile PKGS) -> (Debian 12 packages to build with it, Debian 12
# packages it needs at run time)
PC_TO_DEB = {
    "libcurl": (["libcurl4-openssl-dev"], ["libcurl4"]),
    # Not Debian's librdkafka (2.0.2): tools/librdkafka.sh builds the pinned release from
    # its npm source package and the binaries link it statically, so the image needs npm
    # and the -dev packages that build uses, and at run time the libraries it links.
    "rdkafka": (["npm", "libssl-dev", "libcurl4-openssl-dev", "libzstd-dev", "zlib1g-dev"],
                ["libssl3", "libcurl4", "libzstd1", "zlib1g"]),
    "rocksdb": (["librocksdb-dev"], ["librocksdb7.8"]),
    "avro-c": (["libavro-dev"], ["libavro23"]),
    "jansson": (["libjansson-dev"], ["libjansson4"]),
    "libmicrohttpd": (["libmicrohttpd-dev"], ["libmicrohttpd12"]),
    "gnutls": (["libgnutls28-dev"], ["libgnutls30"]),
    "libcrypto": (["libssl-dev"], ["libssl3"]),
}
# Debian's own librdkafka packages: in the image they would only mislead (the binaries
# never load them).
DEBIAN_RDKAFKA = {"librdkafka-dev", "librdkafka1", "librdkafka++1"}
# Kafka settings a single broker needs for consumer groups and transactions.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
}
DEFAULT_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
# Commands a debian:12-slim image has besides the ones the Dockerfile copies in.
BASE_COMMANDS = {"sh", "bash", "cat", "echo", "ls", "sleep", "test", "true", "false", "env"}

INPUTS = {
    "compose": "docker-compose.yml",
    "dockerfile": "Dockerfile",
    "dockerignore": ".dockerignore",
    "makefile": "Makefile",
    "stages_c": "processor/stages.c",
    "main_c": "processor/main.c",
    "config_c": "processor/config.c",
    "hfctl_c": "tools/hfctl.c",
    "server_props": "tools/kafka/server.properties.in",
    "pom": "tools/kafka/pom.xml",
    "deps_sh": "tools/deps.sh",
}


def read_inputs():
    out = {}
    for k, rel in INPUTS.items():
        p = os.path.join(ROOT, rel)
        out[k] = open(p, encoding="utf-8").read() if os.path.exists(p) else None
    return out


def repo_files():
    try:
        r = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True)
        files = [f for f in r.stdout.splitlines() if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, fs in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in (".git", "build", ".cache")]
        files += [os.path.relpath(os.path.join(d, f), ROOT) for f in fs]
    return files


REPO_FILES = repo_files()
REPO_DIRS = {"."} | {"/".join(f.split("/")[:n]) for f in REPO_FILES for n in range(1, f.count("/") + 1)}


# ---------------------------------------------------------------- apt / Debian 12
def apt_usable():
    if os.environ.get("HF_DOCKER_TEST_NO_APT") == "1" or not shutil.which("apt-cache"):
        return False
    try:
        osr = open("/etc/os-release").read()
    except OSError:
        return False
    if not re.search(r"^VERSION_CODENAME=bookworm$", osr, re.M):
        return False
    return bool(glob.glob("/var/lib/apt/lists/*bookworm*Packages*"))


APT_CACHE = {}


def deb_exist(pkgs, use_apt):
    """{pkg: exists in Debian 12}. One apt-cache call for the names not asked yet (it
    prints the records it finds and exits non-zero if any name is unknown)."""
    if not use_apt:
        return {p: p in DEBIAN12_KNOWN for p in pkgs}
    todo = sorted(set(pkgs) - set(APT_CACHE))
    if todo:
        r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + todo, capture_output=True, text=True)
        found = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
        APT_CACHE.update({p: p in found for p in todo})
    return {p: APT_CACHE[p] for p in pkgs}


# ---------------------------------------------------------------- compose helpers
def interpolate(s):
    """Compose variable interpolation with every variable unset: ${V:-d} and ${V-d} give
    d, ${V} and $V give "", $$ gives $. ${V:?msg} / ${V?msg} raise."""
    if not isinstance(s, str):
        return s
    out, i = [], 0
    while i < len(s):
        if s.startswith("$$", i):
            out.append("$"); i += 2; continue
        if s.startswith("${", i):
            j = s.find("}", i)
            if j < 0:
                raise ValueError("unterminated ${ in %r" % s)
            body = s[i + 2:j]
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])(.*))?$", body)
            if not m:
                raise ValueError("bad variable ${%s}" % body)
            if m.group(2) and m.group(2).endswith("?"):
                raise ValueError("required variable ${%s}" % body)
            out.append(m.group(3) if m.group(2) else "")
            i = j + 1; continue
        m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)", s[i:])
        if m:
            i += m.end(); continue
        out.append(s[i]); i += 1
    return "".join(out)


def svc_env(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        d = {}
        for item in env:
            k, _, v = str(item).partition("=")
            d[k] = v
        env = d
    return {k: "" if v is None else interpolate(str(v).lower() if isinstance(v, bool) else str(v)) for k, v in env.items()}


def svc_command(svc):
    c = svc.get("command")
    if c is None:
        return None
    if isinstance(c, str):
        return shlex.split(interpolate(c))
    return [interpolate(str(x)) for x in c]


def svc_depends(svc):
    d = svc.get("depends_on") or {}
    if isinstance(d, list):
        return {k: "service_started" for k in d}
    return {k: (v or {}).get("condition", "service_started") for k, v in d.items()}


def svc_volumes(svc):
    """[(type, source, target)] of a service's mounts."""
    out = []
    for v in svc.get("volumes") or []:
        if isinstance(v, dict):
            out.append((v.get("type", "volume"), interpolate(v.get("source")), interpolate(v.get("target"))))
        else:
            parts = interpolate(str(v)).split(":")
            if len(parts) == 1:
                out.append(("volume", None, parts[0]))
            else:
                src = parts[0]
                t = "bind" if src.startswith((".", "/", "~")) else "volume"
                out.append((t, src, parts[1]))
    return out


def parse_listeners(s):
    """'NAME://host:port,...' -> {NAME: (host, port)}"""
    out = {}
    for item in filter(None, (x.strip() for x in (s or "").split(","))):
        m = re.match(r"^([A-Za-z0-9_]+)://\[?([^\]]*?)\]?:(\d+)$", item)
        if not m:
            raise ValueError("listener %r is not NAME://host:port" % item)
        out[m.group(1)] = (m.group(2), m.group(3))
    return out


def env_to_prop(k):
    """KAFKA_ABC___DEF__GH_I -> abc-def_gh.i (the apache/kafka image's naming)."""
    k = k[len("KAFKA_"):].lower()
    return k.replace("___", "\0").replace("__", "\1").replace("_", ".").replace("\0", "-").replace("\1", "_")


# ---------------------------------------------------------------- Dockerfile parser
def parse_dockerfile(text):
    """[{name, base, instrs: [(INSTR, args)]}] with continuation lines joined."""
    lines, buf = [], ""
    for raw in text.splitlines():
        s = raw.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if buf and s.startswith("#"):
            continue
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        lines.append(buf + s)
        buf = ""
    if buf:
        lines.append(buf)
    stages = []
    for ln in lines:
        instr, _, args = ln.partition(" ")
        instr = instr.upper()
        args = args.strip()
        if instr == "FROM":
            toks = args.split()
            toks = [t for t in toks if not t.startswith("--")]
            name = toks[2] if len(toks) >= 3 and toks[1].upper() == "AS" else str(len(stages))
            stages.append({"name": name, "base": toks[0], "instrs": []})
        elif stages:
            stages[-1]["instrs"].append((instr, args))
    return stages


def stage_workdir_at(stage, upto=None):
    wd = "/"
    for idx, (instr, args) in enumerate(stage["instrs"]):
        if upto is not None and idx >= upto:
            break
        if instr == "WORKDIR":
            wd = os.path.normpath(os.path.join(wd, args.strip()))
    return wd


def stage_env(stage):
    env = {}
    for instr, args in stage["instrs"]:
        if instr == "ENV":
            if "=" in args.split()[0]:
                for tok in shlex.split(args):
                    k, _, v = tok.partition("=")
                    env[k] = v
            else:
                k, _, v = args.partition(" ")
                env[k] = v.strip()
    return env


def copies(stage):
    """[(from_stage_or_None, [sources], dest_abs)] of a stage's COPY/ADD."""
    out = []
    for idx, (instr, args) in enumerate(stage["instrs"]):
        if instr not in ("COPY", "ADD"):
            continue
        if args.startswith("["):
            toks = json.loads(args)
            frm = None
        else:
            toks = shlex.split(args)
            frm = None
            flags = [t for t in toks if t.startswith("--")]
            toks = [t for t in toks if not t.startswith("--")]
            for f in flags:
                if f.startswith("--from="):
                    frm = f[len("--from="):]
        if len(toks) < 2:
            continue
        wd = stage_workdir_at(stage, idx)
        dest = toks[-1]
        dest_abs = os.path.normpath(os.path.join(wd, dest)) + ("/" if dest.endswith("/") or dest in (".", "./") else "")
        out.append((frm, toks[:-1], dest_abs))
    return out


def runs(stage):
    return [args for instr, args in stage["instrs"] if instr == "RUN"]


def apt_installs(stage):
    pkgs = []
    for r in runs(stage):
        for seg in re.split(r"&&|\|\||;|\|", r):
            toks = seg.split()
            for i, t in enumerate(toks):
                if t in ("apt-get", "apt") and "install" in toks[i + 1:]:
                    j = toks.index("install", i + 1)
                    pkgs += [p for p in toks[j + 1:] if not p.startswith("-")]
                    break
    return pkgs


def landing(src, dest_abs, path, src_is_dir):
    """Where repo/stage file `path` lands when COPY src dest copies it, or None."""
    s = os.path.normpath(src)
    if s == ".":
        return os.path.normpath(os.path.join(dest_abs, path))
    if src_is_dir:
        if path == s or path.startswith(s + "/"):
            return os.path.normpath(os.path.join(dest_abs, os.path.relpath(path, s)))
        return None
    if path != s:
        return None
    return os.path.normpath(os.path.join(dest_abs, os.path.basename(s))) if dest_abs.endswith("/") else os.path.normpath(dest_abs)


def repo_is_dir(rel):
    return os.path.normpath(rel) in REPO_DIRS


# ---------------------------------------------------------------- .dockerignore
@functools.lru_cache(maxsize=None)
def ignore_regex(pat):
    pat = pat.strip("/")
    rx, i = "", 0
    while i < len(pat):
        if pat.startswith("**/", i):
            rx += "(?:.*/)?"; i += 3
        elif pat.startswith("**", i):
            rx += ".*"; i += 2
        elif pat[i] == "*":
            rx += "[^/]*"; i += 1
        elif pat[i] == "?":
            rx += "[^/]"; i += 1
        else:
            rx += re.escape(pat[i]); i += 1
    return re.compile("^" + rx + "$")


def ignored(path, patterns):
    parts = os.path.normpath(path).split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    result = False
    for pat in patterns:
        neg = pat.startswith("!")
        rx = ignore_regex(pat[1:] if neg else pat)
        if any(rx.match(p) for p in prefixes):
            result = not neg
    return result


# ---------------------------------------------------------------- the checks
class Checks:
    def __init__(self):
        self.results = []  # (name, ok, detail)

    def add(self, name, problems):
        problems = [p for p in problems if p]
        self.results.append((name, not problems, "; ".join(problems)))

    def failed(self):
        return {n for n, ok, _ in self.results if not ok}


def validate(inp, use_apt):
    ck = Checks()

    def guard(name, fn):
        try:
            ck.add(name, fn())
        except Exception as e:  # a crash in a check is that check failing
            ck.add(name, ["%s: %s" % (type(e).__name__, e)])

    # ---- repository facts
    mk = inp["makefile"] or ""
    build_var = (re.search(r"^BUILD\s*\?=\s*(\S+)", mk, re.M) or [None, "build"])[1]
    rel_line = re.search(r"^release:\s*(.*)$", mk, re.M)
    release_bins = [os.path.basename(t) for t in rel_line.group(1).split()] if rel_line else []
    pkgs_line = re.search(r"^PKGS\s*:=\s*(.*)$", mk, re.M)
    pc_pkgs = pkgs_line.group(1).split() if pkgs_line else []
    # tools/deps.sh's build group: what `make release` installs when it is missing.
    deps_pkgs = re.search(r"declare -A pkgs=\((.*?)\n\)", inp["deps_sh"] or "", re.S)
    deps_build = re.search(r'^\s*\[build\]="([^"]*)"', deps_pkgs.group(1), re.M) if deps_pkgs else None
    build_group = deps_build.group(1).split() if deps_build else []
    stage_names = re.findall(r'\{\s*"([a-z0-9_]+)"\s*,\s*[a-z0-9_]+\s*\}', inp["stages_c"] or "")
    # holdfast run's options: the {"name", ...} entries of its run_opts[] table (hf_cli.h).
    run_table = re.search(r"run_opts\[\]\s*=\s*\{(.*?)\n\};", inp["main_c"] or "", re.S)
    run_opts = ["--" + o for o in re.findall(r'\{\s*"([a-z-]+)"\s*,', run_table.group(1))] if run_table else []
    props = dict(re.findall(r"^\s*([a-z][a-z0-9._-]*)\s*=\s*(\S*)\s*$", inp["server_props"] or "", re.M))
    kafka_version = (re.search(r"<kafka\.version>([^<]+)</kafka\.version>", inp["pom"] or "") or [None, None])[1]
    topics_default = (re.search(r'"(topics/[^"]+\.json)"', inp["hfctl_c"] or "") or [None, None])[1]
    # The working-directory path of the data-file search (common/hf_datafile.h), the
    # first place looked in, which the image's WORKDIR must hold.
    wh_default = (re.search(r'hf_datafile_find\(\s*"([^"]+)"', inp["config_c"] or "") or [None, None])[1]

    # ---- parse
    compose = None
    parse_err = None
    try:
        compose = yaml.load(inp["compose"], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if inp["compose"] is not None else None
    except yaml.YAMLError as e:
        parse_err = str(e).splitlines()[0]
    services = (compose or {}).get("services") if isinstance(compose, dict) else None
    ck.add("compose.parse", [
        "docker-compose.yml missing" if inp["compose"] is None else None,
        "YAML error: %s" % parse_err if parse_err else None,
        "no services mapping" if not isinstance(services, dict) and not parse_err and inp["compose"] is not None else None,
    ])
    services = services if isinstance(services, dict) else {}
    S = lambda n: services.get(n) or {}
    stages = parse_dockerfile(inp["dockerfile"] or "")
    build_stage = next((s for s in stages if any(re.search(r"\bmake\b.*\brelease\b", r) for r in runs(s))), None)
    runtime = stages[-1] if stages else None
    rt_wd = stage_workdir_at(runtime) if runtime else "/"
    rt_env = stage_env(runtime) if runtime else {}
    rt_path = rt_env.get("PATH", ":".join(DEFAULT_PATH)).split(":")
    copied_bins = {}
    if runtime and build_stage:
        bwd = stage_workdir_at(build_stage)
        for frm, srcs, dest in copies(runtime):
            if frm != build_stage["name"]:
                continue
            for src in srcs:
                for b in release_bins:
                    want = os.path.normpath(os.path.join(bwd, build_var, b))
                    if os.path.normpath(os.path.join(bwd, src)) == want:
                        tgt = os.path.join(dest, b) if dest.endswith("/") or len(srcs) > 1 else dest
                        copied_bins[b] = os.path.normpath(tgt)

    ck.add("compose.services", ["service '%s' missing" % n for n in ("kafka", "topics", "holdfast") if n not in services])
    ck.add("compose.no_version", ["top-level 'version' is obsolete (Compose warns)"] if isinstance(compose, dict) and "version" in compose else [])

    def env_types():
        bad = []
        for n, svc in services.items():
            env = (svc or {}).get("environment") or {}
            if isinstance(env, dict):
                # Older Compose v2 releases reject booleans here, and YAML 1.1 (PyYAML) and 1.2
                # (compose-go) disagree on yes/no/on/off: quoted strings mean the same everywhere.
                bad += ["%s.%s=%r (quote it: older Compose rejects booleans)" % (n, k, v) for k, v in env.items()
                        if isinstance(v, bool) or isinstance(v, (list, dict))]
        return bad
    guard("compose.env_types", env_types)

    # ---- kafka
    kafka = S("kafka")
    kenv = svc_env(kafka)

    def kafka_image():
        img = kafka.get("image")
        want = "apache/kafka:%s" % kafka_version
        return [None if kafka_version else "no <kafka.version> in tools/kafka/pom.xml",
                "kafka image is %r, want %r (the version tools/kafka/pom.xml runs)" % (img, want) if img != want else None]
    guard("kafka.image", kafka_image)

    def listeners():
        return parse_listeners(kenv.get("KAFKA_LISTENERS")), parse_listeners(kenv.get("KAFKA_ADVERTISED_LISTENERS"))

    def kraft():
        p = []
        roles = set(x.strip() for x in kenv.get("KAFKA_PROCESS_ROLES", "").split(","))
        if roles != {"broker", "controller"}:
            p.append("KAFKA_PROCESS_ROLES must be broker,controller (single combined node), is %r" % kenv.get("KAFKA_PROCESS_ROLES"))
        node = kenv.get("KAFKA_NODE_ID")
        if not node:
            p.append("KAFKA_NODE_ID missing")
        lis, adv = listeners()
        ctl_names = [x.strip() for x in kenv.get("KAFKA_CONTROLLER_LISTENER_NAMES", "").split(",") if x.strip()]
        if not ctl_names:
            p.append("KAFKA_CONTROLLER_LISTENER_NAMES missing")
        for c in ctl_names:
            if c not in lis:
                p.append("controller listener %s not in KAFKA_LISTENERS" % c)
            if c in adv:
                p.append("controller listener %s must not be advertised" % c)
        voters = kenv.get("KAFKA_CONTROLLER_QUORUM_VOTERS", "")
        if not voters:
            p.append("KAFKA_CONTROLLER_QUORUM_VOTERS missing")
        kafka_hosts = {"kafka", kafka.get("hostname"), kafka.get("container_name"), "localhost", "127.0.0.1"}
        ctl_ports = {lis[c][1] for c in ctl_names if c in lis}
        for v in filter(None, voters.split(",")):
            m = re.match(r"^(\d+)@([^:]+):(\d+)$", v.strip())
            if not m:
                p.append("voter %r is not id@host:port" % v)
            elif m.group(1) != node or m.group(2) not in kafka_hosts or m.group(3) not in ctl_ports:
                p.append("voter %r is not this node's controller listener (node %s, ports %s)" % (v, node, sorted(ctl_ports)))
        secmap = dict(x.split(":", 1) for x in kenv.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "").split(",") if ":" in x)
        for n in set(lis) | set(adv):
            if n not in secmap and n not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                p.append("listener %s has no security protocol in KAFKA_LISTENER_SECURITY_PROTOCOL_MAP" % n)
        for n in adv:
            if n not in lis:
                p.append("advertised listener %s is not in KAFKA_LISTENERS" % n)
        ibl = kenv.get("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT")
        if ibl not in adv:
            p.append("inter-broker listener %s is not advertised" % ibl)
        return p
    guard("kafka.kraft", kraft)

    def single_node():
        p = []
        got = {env_to_prop(k): v for k, v in kenv.items() if k.startswith("KAFKA_")}
        for prop, want in SINGLE_NODE.items():
            dev = props.get(prop)
            if dev != want:
                p.append("tools/kafka/server.properties.in has %s=%s, this test expects %s (keep them in step)" % (prop, dev, want))
            if got.get(prop) != want:
                p.append("kafka env lacks %s=%s (KAFKA_%s), has %r" % (prop, want, prop.upper().replace(".", "_"), got.get(prop)))
        return p
    guard("kafka.single_node_txn", single_node)

    def healthcheck():
        hc = kafka.get("healthcheck")
        if not isinstance(hc, dict) or hc.get("disable"):
            return ["kafka has no healthcheck (topics waits for service_healthy)"]
        test = hc.get("test")
        if isinstance(test, str):
            test = ["CMD-SHELL", test]
        if not test or test[0] not in ("CMD", "CMD-SHELL") or len(test) < 2 or test == ["NONE"]:
            return ["healthcheck test must be [CMD|CMD-SHELL, ...], is %r" % test]
        text = " ".join(test[1:])
        lis, _ = listeners()
        ctl = {x.strip() for x in kenv.get("KAFKA_CONTROLLER_LISTENER_NAMES", "").split(",")}
        ports = {port for n, (h, port) in lis.items() if n not in ctl}
        probed = re.findall(r"(?:localhost|127\.0\.0\.1|kafka):(\d+)", text)
        p = []
        if not probed or any(x not in ports for x in probed):
            p.append("healthcheck must probe a broker listener port %s, probes %s" % (sorted(ports), probed))
        if not re.search(r"kafka-(broker-api-versions|topics|cluster|metadata-quorum)\.sh", text):
            p.append("healthcheck should ask the broker (a Kafka CLI tool), not only open a port")
        if "retries" not in hc or "interval" not in hc:
            p.append("healthcheck needs interval and retries")
        return p
    guard("kafka.healthcheck", healthcheck)

    top_vols = (compose or {}).get("volumes") or {} if isinstance(compose, dict) else {}

    def named_mount_at(svc, target):
        return any(t == "volume" and src and os.path.normpath(tgt) == os.path.normpath(target) for t, src, tgt in svc_volumes(svc))

    def kafka_data():
        d = kenv.get("KAFKA_LOG_DIRS")
        if not d:
            return ["KAFKA_LOG_DIRS not set (the image default is under /tmp)"]
        return [None if named_mount_at(kafka, d) else "no named volume mounted at KAFKA_LOG_DIRS %s" % d]
    guard("kafka.data_volume", kafka_data)

    def host_port():
        lis, adv = listeners()
        p = []
        ports = []
        for spec in kafka.get("ports") or []:
            if isinstance(spec, dict):
                ports.append((str(spec.get("published")), str(spec.get("target"))))
            else:
                parts = interpolate(str(spec)).split(":")
                ports.append((parts[-2] if len(parts) >= 2 else None, parts[-1].split("/")[0]))
        host_adv = {n: hp for n, hp in adv.items() if hp[0] in ("127.0.0.1", "localhost")}
        if not host_adv:
            return ["no listener advertised to the host (127.0.0.1 or localhost)"]
        for n, (h, port) in host_adv.items():
            if n not in lis:
                continue
            if (port, lis[n][1]) not in ports:
                p.append("listener %s advertises %s:%s but ports does not publish %s -> %s (has %s)" % (n, h, port, port, lis[n][1], ports))
        return p
    guard("kafka.host_port", host_port)

    # ---- services running the holdfast image
    hf_services = {n: s for n, s in services.items() if isinstance(s, dict) and (s.get("build") is not None or s.get("image") == S("holdfast").get("image"))}

    def image_shared():
        p = []
        imgs = set()
        for n in ("topics", "holdfast") + (("bench",) if "bench" in services else ()):
            s = S(n)
            b = s.get("build")
            ctx = b if isinstance(b, str) else (b or {}).get("context")
            df = "Dockerfile" if isinstance(b, str) else (b or {}).get("dockerfile", "Dockerfile")
            if b is None:
                p.append("%s has no build (would pull %r)" % (n, s.get("image")))
                continue
            if os.path.normpath(ctx or "") != ".":
                p.append("%s builds from context %r, want the repository root '.'" % (n, ctx))
            if os.path.normpath(df) != "Dockerfile":
                p.append("%s builds %r, want Dockerfile" % (n, df))
            imgs.add(s.get("image"))
        if len(imgs) > 1 or None in imgs:
            p.append("topics/holdfast/bench must share one image tag, have %s" % sorted(map(str, imgs)))
        return p
    guard("image.shared", image_shared)

    def topics_cmd():
        c = svc_command(S("topics"))
        return [None if c and c[:3] == ["hfctl", "topics", "apply"] else "topics command must be hfctl topics apply, is %r" % c]
    guard("topics.command", topics_cmd)
    ck.add("topics.depends", [None if svc_depends(S("topics")).get("kafka") == "service_healthy"
                              else "topics must depend on kafka: service_healthy, has %r" % svc_depends(S("topics"))])
    r = S("topics").get("restart", "no")
    ck.add("topics.one_shot", [None if r in ("no", False) else "topics is one-shot: restart must be absent or \"no\", is %r" % r])

    def hf_command():
        c = svc_command(S("holdfast"))
        if not c or c[:2] != ["holdfast", "run"]:
            return ["holdfast command must start holdfast run, is %r" % c]
        p = []
        args = c[2:]
        if len(args) % 2:
            p.append("holdfast run takes --option value pairs: %r" % args)
        opts = dict(zip(args[::2], args[1::2]))
        for o in opts:
            if o not in run_opts:
                p.append("holdfast run has no option %s (processor/main.c: %s)" % (o, run_opts))
        st = opts.get("--stages")
        if not st:
            p.append("no --stages (default is counter only)")
        else:
            lst = st.split(",")
            p += ["stage %r is not in processor/stages.c (%s)" % (x, stage_names) for x in lst if x not in stage_names]
            if sorted(lst) != sorted(["counter", "aggregator", "gateway"]):
                p.append("--stages must be counter,aggregator,gateway, is %s" % st)
        cfg = opts.get("--config")
        if cfg:
            full = os.path.normpath(os.path.join(rt_wd, cfg))
            rel = os.path.relpath(full, rt_wd)
            mounted = any(os.path.normpath(tgt) == full or full.startswith(os.path.normpath(tgt) + "/") for _, _, tgt in svc_volumes(S("holdfast")))
            if not mounted:
                if rel.startswith("..") or rel not in REPO_FILES and not os.path.exists(os.path.join(ROOT, rel)):
                    p.append("--config %s is neither in the image (%s/%s) nor mounted" % (cfg, rt_wd, rel))
                else:
                    try:
                        if not isinstance(json.load(open(os.path.join(ROOT, rel))), dict):
                            p.append("--config %s is not a JSON object" % cfg)
                    except (OSError, ValueError) as e:
                        p.append("--config %s: %s" % (cfg, e))
        return p
    guard("holdfast.command", hf_command)

    r = str(S("holdfast").get("restart"))
    ck.add("holdfast.restart", [None if re.match(r"^on-failure(:\d+)?$", r) else "holdfast restart must be on-failure, is %r" % r])
    d = svc_depends(S("holdfast"))
    ck.add("holdfast.depends", [None if d.get("topics") == "service_completed_successfully"
                                else "holdfast must depend on topics: service_completed_successfully, has %r" % d])

    def state_dir():
        c = svc_command(S("holdfast")) or []
        opts = dict(zip(c[2::2], c[3::2]))
        sd = opts.get("--state-dir") or svc_env(S("holdfast")).get("HOLDFAST_STATE_DIR") or rt_env.get("HOLDFAST_STATE_DIR") or "./.state"
        sd = os.path.normpath(os.path.join(rt_wd, sd))
        return [None if named_mount_at(S("holdfast"), sd) else "holdfast state dir %s has no named volume mounted on it" % sd]
    guard("holdfast.state_volume", state_dir)

    def bootstrap():
        lis, adv = listeners()
        names = {"kafka"} | {x for x in (kafka.get("hostname"), kafka.get("container_name")) if x}
        p = []
        for n, s in hf_services.items():
            bs = svc_env(s).get("HOLDFAST_BOOTSTRAP")
            if not bs:
                p.append("%s: HOLDFAST_BOOTSTRAP not set (default 127.0.0.1:9092 is the container itself)" % n)
                continue
            for one in bs.split(","):
                host, _, port = one.rpartition(":")
                if host not in names:
                    p.append("%s: HOLDFAST_BOOTSTRAP host %r is not the kafka service (%s)" % (n, host, sorted(names)))
                elif (host, port) not in adv.values():
                    p.append("%s: HOLDFAST_BOOTSTRAP %s is not an advertised listener (%s)" % (n, one, adv))
                elif not any(adv[k] == (host, port) and k in lis and lis[k][1] == port for k in adv):
                    p.append("%s: %s is advertised but kafka listens on another port for it" % (n, one))
            if S(n).get("depends_on") is None:
                p.append("%s depends on nothing" % n)
        return p
    guard("env.bootstrap", bootstrap)

    def vols_declared():
        p = []
        for n, s in services.items():
            for t, src, tgt in svc_volumes(s or {}):
                if t == "volume" and src and src not in top_vols:
                    p.append("%s uses volume %s, not declared under top-level volumes" % (n, src))
        return p
    guard("volumes.declared", vols_declared)

    def binaries():
        avail = set(copied_bins) | BASE_COMMANDS
        p = []
        for n, s in hf_services.items():
            c = svc_command(s)
            if not c:
                continue
            if c[0] in ("sh", "bash") and len(c) >= 3 and c[1] == "-c":
                cmds = [seg.split()[0] for seg in re.split(r"&&|\|\||;|\||\n", c[2]) if seg.split()]
            else:
                cmds = [c[0]]
            p += ["%s runs %r, which the image does not provide (has %s)" % (n, x, sorted(copied_bins)) for x in cmds if x not in avail]
        return p
    guard("commands.binaries", binaries)

    def bench():
        if "bench" not in services:
            return []
        b = S("bench")
        c = " ".join(svc_command(b) or [])
        return [None if "bench" in (b.get("profiles") or []) else "bench must be in the 'bench' profile (else `up` runs it)",
                None if re.search(r"\bhfbench\b", c) else "bench does not run hfbench",
                None if "holdfast" in svc_depends(b) else "bench must depend on holdfast"]
    guard("bench.profile", bench)

    # ---- Dockerfile
    def df_stages():
        if inp["dockerfile"] is None:
            return ["Dockerfile missing"]
        p = []
        if len(stages) < 2:
            p.append("want a multi-stage build (build + runtime), have %d stage(s)" % len(stages))
        deb12 = re.compile(r"^(docker\.io/(library/)?)?debian:(12|bookworm)([.-][A-Za-z0-9.-]*)?(@sha256:[0-9a-f]+)?$")
        for s in stages:
            if not deb12.match(s["base"]) and s["base"] not in [x["name"] for x in stages]:
                p.append("stage %s is FROM %s, want debian:12 (bookworm)" % (s["name"], s["base"]))
        if build_stage is None:
            p.append("no stage runs make release")
        elif build_stage is runtime:
            p.append("the runtime stage is the build stage")
        return p
    guard("dockerfile.stages", df_stages)

    def df_build():
        if build_stage is None:
            return ["no stage RUNs `make ... release`"]
        bwd = stage_workdir_at(build_stage)
        need = {"Makefile"}
        for var in ("MAIN_SRCS", "LIB_SRCS", "SCHEMAS"):
            m = re.search(r"^%s\s*:=\s*(.*)$" % var, mk, re.M)
            for pat in re.findall(r"(?<![\w$(])([a-z][\w.-]*/[^\s,)]*)", m.group(1) if m else ""):
                need |= {f for f in REPO_FILES if fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/")}
        gen = re.search(r"^\$\(GEN_SRC\):(.*)$", mk, re.M)
        need |= {t for t in (gen.group(1).split() if gen else []) if not t.startswith("$")}
        for d in re.findall(r"-I([a-z][\w/]*)", (re.search(r"^INCS\s*:=(.*)$", mk, re.M) or [None, ""])[1]):
            need |= {f for f in REPO_FILES if f.startswith(d + "/") and f.endswith(".h")}
        cps = [(srcs, dest) for frm, srcs, dest in copies(build_stage) if frm is None]
        missing = []
        for f in sorted(need):
            ok = any(landing(s, dest, f, repo_is_dir(s)) == os.path.normpath(os.path.join(bwd, f)) for srcs, dest in cps for s in srcs)
            if not ok:
                missing.append(f)
        return ["build stage does not copy %d file(s) make release reads into %s: %s" % (len(missing), bwd, ", ".join(missing[:5]))] if missing else []
    guard("dockerfile.build_make_release", df_build)

    def df_build_pkgs():
        if build_stage is None:
            return ["no build stage"]
        got = set(apt_installs(build_stage))
        p = []
        for pc in pc_pkgs:
            if pc not in PC_TO_DEB:
                p.append("Makefile PKGS has %s: add its Debian packages to PC_TO_DEB in this test" % pc)
            else:
                p += ["build stage does not install %s (pkg-config %s)" % (d, pc) for d in PC_TO_DEB[pc][0] if d not in got]
        if not build_group:
            p.append("could not read the build group of tools/deps.sh")
        p += ["build stage does not install %s (tools/deps.sh build group: make release would call apt)" % d
              for d in build_group if d not in got]
        p += ["build stage installs %s: Debian's librdkafka, which tools/librdkafka.sh replaces" % d for d in sorted(got & DEBIAN_RDKAFKA)]
        if "pkg-config" not in got:
            p.append("build stage does not install pkg-config (the Makefile asks it for flags)")
        if "build-essential" not in got and not {"gcc", "make", "libc6-dev"} <= got:
            p.append("build stage installs no compiler (build-essential)")
        return p
    guard("dockerfile.build_packages", df_build_pkgs)

    def df_rt_pkgs():
        if runtime is None or runtime is build_stage:
            return ["no separate runtime stage"]
        got = apt_installs(runtime)
        p = ["runtime stage installs %s (build-time only)" % x for x in got if x.endswith("-dev") or x in ("build-essential", "gcc", "make", "pkg-config")]
        p += ["runtime stage does not install %s (pkg-config %s)" % (r, pc) for pc in pc_pkgs if pc in PC_TO_DEB for r in PC_TO_DEB[pc][1] if r not in got]
        p += ["runtime stage installs %s: Debian's librdkafka, which the binaries do not load (linked statically)" % x for x in got if x in DEBIAN_RDKAFKA]
        return p
    guard("dockerfile.runtime_packages", df_rt_pkgs)

    def df_rt_bins():
        p = []
        if not release_bins:
            return ["no release: target in the Makefile"]
        for b in release_bins:
            if b not in copied_bins:
                p.append("runtime stage does not COPY --from=<build stage> %s/%s" % (build_var, b))
            elif os.path.dirname(copied_bins[b]) not in rt_path or os.path.basename(copied_bins[b]) != b:
                p.append("%s lands at %s, not as %s in a PATH directory" % (b, copied_bins[b], b))
        return p
    guard("dockerfile.runtime_binaries", df_rt_bins)

    def df_rt_data():
        if runtime is None:
            return ["no runtime stage"]
        p = []
        for rel in (topics_default, wh_default):
            if not rel:
                p.append("could not read the default topics/warehouses path from tools/hfctl.c / processor/config.c")
                continue
            want = os.path.normpath(os.path.join(rt_wd, rel))
            ok = any(landing(s, dest, rel, repo_is_dir(s)) == want for frm, srcs, dest in copies(runtime) if frm is None for s in srcs)
            if not ok:
                p.append("%s does not land at %s (the runtime WORKDIR %s + the tools' default path)" % (rel, want, rt_wd))
        return p
    guard("dockerfile.runtime_data", df_rt_data)

    def rt_user():
        users = [a.split(":")[0] for i, a in (runtime or {"instrs": []})["instrs"] if i == "USER"]
        return users[-1] if users else "root"

    ck.add("dockerfile.nonroot", [None if rt_user() not in ("root", "0") else "the runtime stage runs as root (set USER)"])

    def vol_dirs():
        u = rt_user()
        if u in ("root", "0"):
            return []
        text = " ".join(runs(runtime)) if runtime else ""
        p = []
        for n, s in hf_services.items():
            for t, src, tgt in svc_volumes(s):
                if t != "volume":
                    continue
                tgt = os.path.normpath(tgt)
                made = re.search(r"mkdir\b[^&;]*\s%s(\s|$)" % re.escape(tgt), text)
                owned = re.search(r"chown\b[^&;]*\b%s\b[^&;]*\s%s(\s|$)" % (re.escape(u), re.escape(tgt)), text)
                if not (made and owned):
                    p.append("%s mounts a volume at %s: the runtime stage must mkdir and chown it to %s, or a fresh volume is root's" % (n, tgt, u))
        return p
    guard("dockerfile.volume_dirs", vol_dirs)

    def deb_names():
        names = sorted({p for s in stages for p in apt_installs(s)})
        if not names:
            return ["no apt-get install in the Dockerfile"]
        ok = deb_exist(names, use_apt)
        return ["%s is not a Debian 12 package (%s)" % (n, "apt-cache show" if use_apt else "known list in this test") for n in names if not ok[n]]
    guard("packages.debian12", deb_names)

    def dockerignore():
        if inp["dockerignore"] is None:
            return [".dockerignore missing (the whole checkout, build/ included, would be sent)"]
        pats = [l.strip() for l in inp["dockerignore"].splitlines() if l.strip() and not l.strip().startswith("#")]
        p = ["%s/ is not excluded from the build context" % d for d in (build_var, ".cache", ".git") if not ignored(d + "/x", pats)]
        for s in stages:
            for frm, srcs, dest in copies(s):
                if frm is not None:
                    continue
                for src in srcs:
                    src = os.path.normpath(src)
                    under = [f for f in REPO_FILES if src == "." or f == src or f.startswith(src + "/")]
                    if not under:
                        p.append("COPY source %s does not exist in the repository" % src)
                    bad = [f for f in under if ignored(f, pats) and not re.search(r"\.(o|d|a|pyc)$", f)]
                    if bad and src != ".":
                        p.append(".dockerignore drops %d file(s) COPY %s needs, e.g. %s" % (len(bad), src, bad[0]))
        return p
    guard("dockerignore", dockerignore)
    return ck


# ---------------------------------------------------------------- self-test mutations
def sub(old, new, count=1):
    def f(t):
        if t is None or old not in t:
            raise LookupError("mutation target %r not found" % old)
        return t.replace(old, new, count)
    return f


MUTATIONS = [
    # (input, transform, check that must then fail, what)
    ("compose", sub("  topics:\n    <<:", "  topicz:\n    <<:"), "compose.services", "topics service renamed"),
    ("compose", sub("services:\n", "services: [\n"), "compose.parse", "YAML syntax error"),
    ("compose", lambda t: "version: '3.8'\n" + t, "compose.no_version", "obsolete version key"),
    ("compose", sub('KAFKA_AUTO_CREATE_TOPICS_ENABLE: "false"', "KAFKA_AUTO_CREATE_TOPICS_ENABLE: false"), "compose.env_types", "unquoted boolean in environment"),
    ("compose", sub("image: apache/kafka:4.1.1", "image: apache/kafka:3.9.0"), "kafka.image", "other Kafka version"),
    ("pom", sub("<kafka.version>4.1.1<", "<kafka.version>4.2.0<"), "kafka.image", "pom moves to another Kafka"),
    ("compose", sub("KAFKA_CONTROLLER_QUORUM_VOTERS: 1@kafka:9093", "KAFKA_CONTROLLER_QUORUM_VOTERS: 1@kafka:9094"), "kafka.kraft", "voter on a non-controller port"),
    ("compose", sub("KAFKA_PROCESS_ROLES: broker,controller", "KAFKA_PROCESS_ROLES: broker"), "kafka.kraft", "broker-only role"),
    ("compose", sub("PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT,", "PLAINTEXT:PLAINTEXT,"), "kafka.kraft", "listener without security protocol"),
    ("compose", sub("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 1", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 2"), "kafka.single_node_txn", "transaction log min ISR 2"),
    ("compose", sub("      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1\n", ""), "kafka.single_node_txn", "offsets topic RF missing"),
    ("compose", sub("      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 1\n", ""), "kafka.single_node_txn", "transaction log RF missing"),
    ("compose", sub("      KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR: 1\n", ""), "kafka.single_node_txn", "share coordinator RF missing"),
    ("compose", sub("KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR: 1", "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR: 3"), "kafka.single_node_txn", "share coordinator min ISR 3"),
    ("compose", sub("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: 0", "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: 3000"), "kafka.single_node_txn", "rebalance delay 3 s"),
    ("compose", sub('KAFKA_AUTO_CREATE_TOPICS_ENABLE: "false"', 'KAFKA_AUTO_CREATE_TOPICS_ENABLE: "true"'), "kafka.single_node_txn", "topic auto-creation on"),
    ("server_props", sub("transaction.state.log.min.isr=1", "transaction.state.log.min.isr=2"), "kafka.single_node_txn", "dev broker config drifts"),
    ("compose", lambda t: re.sub(r"    healthcheck:\n(      .*\n)+", "", t), "kafka.healthcheck", "healthcheck removed"),
    ("compose", sub("--bootstrap-server localhost:19092", "--bootstrap-server localhost:29092"), "kafka.healthcheck", "healthcheck probes no listener"),
    ("compose", sub("kafka-data:/var/lib/kafka/data", "kafka-data:/var/lib/kafka/other"), "kafka.data_volume", "data volume not on KAFKA_LOG_DIRS"),
    ("compose", sub('"127.0.0.1:${HOLDFAST_KAFKA_PORT:-9092}:9092"', '"127.0.0.1:${HOLDFAST_KAFKA_PORT:-9092}:9093"'), "kafka.host_port", "host port published to the controller"),
    ("compose", sub("HOST://127.0.0.1:${HOLDFAST_KAFKA_PORT:-9092}", "HOST://127.0.0.1:9094"), "kafka.host_port", "advertised host port not published"),
    ("compose", sub("    context: .\n", "    context: ./tools\n"), "image.shared", "wrong build context"),
    ("compose", sub('["hfctl", "topics", "apply"]', '["hfctl", "topics", "list"]'), "topics.command", "topics runs something else"),
    ("compose", sub('        condition: service_healthy\n    restart: "no"', '        condition: service_started\n    restart: "no"'), "topics.depends", "topics does not wait for healthy kafka"),
    ("compose", sub('        condition: service_healthy\n    restart: "no"', '        condition: service_healthy\n    restart: on-failure'), "topics.one_shot", "topics restarts"),
    ("compose", sub('"counter,aggregator,gateway", "--state-dir"', '"counter,aggregator,gatewy", "--state-dir"'), "holdfast.command", "unknown stage"),
    ("compose", sub('"counter,aggregator,gateway", "--state-dir"', '"counter,aggregator", "--state-dir"'), "holdfast.command", "gateway stage missing"),
    ("stages_c", sub('{"gateway", gateway_stage},', ""), "holdfast.command", "stage registry loses gateway"),
    ("compose", sub('"--state-dir", "/var/lib/holdfast"]', '"--state-dir", "/var/lib/holdfast", "--threads", "2"]'), "holdfast.command", "option holdfast run lacks"),
    ("compose", sub('"--state-dir", "/var/lib/holdfast"]', '"--state-dir", "/var/lib/holdfast", "--config", "config/missing.json"]'), "holdfast.command", "--config file not in the image"),
    ("compose", sub("restart: on-failure", "restart: always"), "holdfast.restart", "restart always"),
    ("compose", sub("condition: service_completed_successfully", "condition: service_started"), "holdfast.depends", "holdfast does not wait for topics"),
    ("compose", sub("- holdfast-state:/var/lib/holdfast\n", "- holdfast-state:/var/lib/holdfast-x\n"), "holdfast.state_volume", "state volume elsewhere"),
    ("compose", sub('"--state-dir", "/var/lib/holdfast"', '"--state-dir", "/tmp/state"'), "holdfast.state_volume", "state dir without volume"),
    ("compose", sub("HOLDFAST_BOOTSTRAP: kafka:19092", "HOLDFAST_BOOTSTRAP: localhost:9092"), "env.bootstrap", "bootstrap is the container itself"),
    ("compose", sub("HOLDFAST_BOOTSTRAP: kafka:19092", "HOLDFAST_BOOTSTRAP: kafka:9092"), "env.bootstrap", "bootstrap on the host listener"),
    ("compose", sub("\n  holdfast-state:\n", "\n"), "volumes.declared", "volume not declared"),
    ("compose", sub("        hfctl reconcile", "        hfctl-x reconcile"), "commands.binaries", "command the image lacks"),
    ("compose", sub('    profiles: ["bench"]\n', ""), "bench.profile", "bench runs on plain up"),
    ("dockerfile", sub("FROM debian:12 AS build", "FROM debian:11 AS build"), "dockerfile.stages", "build on Debian 11"),
    ("dockerfile", sub("FROM debian:12-slim AS runtime", "FROM ubuntu:24.04 AS runtime"), "dockerfile.stages", "runtime on Ubuntu"),
    ("dockerfile", sub('RUN make -j"$(nproc)" release', 'RUN make -j"$(nproc)" san'), "dockerfile.build_make_release", "no make release"),
    ("dockerfile", sub("COPY state/ state/\n", ""), "dockerfile.build_make_release", "state/ sources not copied"),
    ("dockerfile", sub("COPY schemas/ schemas/", "COPY schemas/ avro/"), "dockerfile.build_make_release", "schemas copied elsewhere"),
    ("dockerfile", sub(" librocksdb-dev ", " "), "dockerfile.build_packages", "-dev package missing"),
    ("makefile", sub("PKGS    := rdkafka rocksdb avro-c jansson", "PKGS    := rdkafka rocksdb avro-c jansson libzstd"), "dockerfile.build_packages", "new pkg-config dependency"),
    ("dockerfile", sub(" npm ", " "), "dockerfile.build_packages", "no npm for librdkafka's source package"),
    ("dockerfile", sub(" libzstd-dev ", " "), "dockerfile.build_packages", "librdkafka's zstd -dev missing"),
    ("dockerfile", sub(" libcmocka-dev ", " "), "dockerfile.build_packages", "deps.sh build package missing"),
    ("dockerfile", sub(" librocksdb-dev ", " librdkafka-dev librocksdb-dev "), "dockerfile.build_packages", "Debian's librdkafka in the build"),
    ("deps_sh", sub(" zlib1g-dev ", " zlib1g-dev libfoo-dev "), "dockerfile.build_packages", "deps.sh build group grows"),
    ("dockerfile", sub("librocksdb7.8 libavro23 libjansson4", "librocksdb7.8 libjansson4"), "dockerfile.runtime_packages", "runtime lib missing"),
    ("dockerfile", sub(" libcurl4 libzstd1 ", " libcurl4 "), "dockerfile.runtime_packages", "static librdkafka's zstd missing"),
    ("dockerfile", sub("librocksdb7.8 libavro23 libjansson4", "librdkafka1 librocksdb7.8 libavro23 libjansson4"), "dockerfile.runtime_packages", "Debian's librdkafka in the runtime"),
    ("dockerfile", sub("librocksdb7.8 libavro23 libjansson4", "librocksdb7.8 libavro23 libjansson4 libjansson-dev"), "dockerfile.runtime_packages", "-dev in runtime"),
    ("dockerfile", sub(" /src/build/hfbench ", " "), "dockerfile.runtime_binaries", "binary not copied"),
    ("dockerfile", sub("/src/build/hfbench /usr/local/bin/", "/src/build/hfbench /opt/bin/"), "dockerfile.runtime_binaries", "binaries off PATH"),
    ("makefile", sub("release: $(BUILD)/holdfast $(BUILD)/hfctl $(BUILD)/hfbench", "release: $(BUILD)/holdfast $(BUILD)/hfctl $(BUILD)/hfbench $(BUILD)/hfextra"), "dockerfile.runtime_binaries", "new release binary"),
    ("dockerfile", sub("COPY config/ config/", "COPY config/ conf/"), "dockerfile.runtime_data", "config/ elsewhere"),
    ("dockerfile", sub("WORKDIR /opt/holdfast\nCOPY topics/ topics/\nCOPY config/ config/\n", "WORKDIR /opt/holdfast\nCOPY topics/ topics/\nCOPY config/ config/\nWORKDIR /\n"), "dockerfile.runtime_data", "WORKDIR moved off the data"),
    ("dockerfile", sub("USER holdfast", "USER root"), "dockerfile.nonroot", "runs as root"),
    ("dockerfile", sub("chown holdfast:holdfast /var/lib/holdfast /var/lib/holdfast-http /opt/holdfast/reports", "chown holdfast:holdfast /var/lib/holdfast /var/lib/holdfast-http"), "dockerfile.volume_dirs", "volume dir root-owned"),
    ("dockerfile", sub("librocksdb7.8 libavro23", "librocksdb8.9 libavro23"), "packages.debian12", "Debian 13 package name"),
    ("dockerignore", sub("\nbuild\n", "\n"), "dockerignore", "build/ sent to the daemon"),
    ("dockerignore", lambda t: t + "tools/lib\n", "dockerignore", "needed sources ignored"),
    ("dockerignore", lambda t: t + "tools/*.sh\n", "dockerignore", "embed-schemas.sh ignored"),
]


def main():
    inp = read_inputs()
    use_apt = apt_usable()
    passed = failed = 0
    print("# structure of docker-compose.yml, Dockerfile, .dockerignore (no Docker engine: nothing is built or run)")
    print("# Debian 12 package names checked with %s" % ("apt-cache" if use_apt else "the known list in this test"))
    for name, ok, detail in validate(inp, use_apt).results:
        if ok:
            passed += 1
            print("ok   %s" % name)
        else:
            failed += 1
            print("FAIL %s: %s" % (name, detail))
    print("# self-test: every check must fail on a broken copy")
    covered = set()
    modes = [use_apt, False] if use_apt else [False]
    for key, fn, want, what in MUTATIONS:
        for mode in (modes if want == "packages.debian12" else [use_apt]):
            label = "%s%s" % (what, " (%s)" % ("apt-cache" if mode else "list") if want == "packages.debian12" else "")
            try:
                mutated = dict(inp)
                mutated[key] = fn(inp[key])
            except LookupError as e:
                failed += 1
                print("FAIL self-test '%s': %s (update the mutation with the file)" % (label, e))
                continue
            bad = validate(mutated, mode).failed()
            if want in bad:
                passed += 1
                covered.add(want)
                print("ok   self-test '%s' -> %s fails" % (label, want))
            else:
                failed += 1
                print("FAIL self-test '%s': %s still passes" % (label, want))
    all_checks = {n for n, _, _ in validate(inp, use_apt).results}
    for n in sorted(all_checks - covered):
        failed += 1
        print("FAIL self-test: no mutation makes %s fail" % n)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


sys.exit(main())
PY
