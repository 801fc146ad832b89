# Shared by the broker scripts (kafka-up.sh, cluster-up.sh, ...): tools check, jar
# fetch, port and pid probes, and the JVM start line. Source it after setting
# `here` (this directory), `root` (the checkout) and `me` (the script's name for
# messages). Nothing here starts or stops a process by itself.

libs=$root/.cache/kafka/libs # the jars, shared by every broker of the project

die() { echo "$me: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# kafka_pid_is PIDFILE PROPS: the pid in PIDFILE still runs kafka.Kafka on PROPS
# (pids get reused, so a live pid alone proves nothing).
kafka_pid_is() {
  [ -f "$1" ] || return 1
  local pid; pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $2"
}

# Kafka 4 needs Java 17+; Maven fetches the jars. Install both if absent.
need_tools() {
  if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    echo "$me: the broker needs Java 17+ and Maven (openjdk-17-jre-headless maven); installing"
    bash "$root/tools/deps.sh" kafka || die "could not install Java 17 and Maven"
  fi
  local major
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ "${major:-0}" -ge 17 ] || die "Java $major found; Kafka 4 needs Java 17+ (apt-get install openjdk-17-jre-headless)"
}

# Jars are re-fetched whenever the pom changes; the stamp holds the pom's hash. ~/.m2 keeps
# the downloads, so a fresh checkout copies from it instead of downloading again.
fetch_jars() {
  local stamp; stamp=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
  [ "$(cat "$libs/.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  echo "$me: fetching Kafka jars from Maven Central into $libs"
  mkdir -p "$(dirname "$libs")"
  rm -rf "$libs.tmp"
  # Output only on failure: even quiet Maven 3.8 prints stray colour codes.
  local out
  out=$(mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs.tmp" 2>&1) \
    || { echo "$out" >&2; die "maven could not fetch the Kafka jars (see above)"; }
  echo "$stamp" >"$libs.tmp/.stamp"
  rm -rf "$libs" && mv "$libs.tmp" "$libs"
}

# kafka_format PROPS DATA_DIR CLUSTER_ID [FORMAT-ARGS...]: formats DATA_DIR/kraft once.
kafka_format() {
  local props=$1 data=$2 id=$3; shift 3
  [ -f "$data/kraft/meta.properties" ] && return 0
  java -cp "$libs/*" kafka.tools.StorageTool format -t "$id" -c "$props" "$@" >/dev/null \
    || die "formatting $data/kraft failed"
}

# kafka_start PROPS DATA_DIR PIDFILE HEAP_OPTS [JVM-OPTS...]: starts kafka.Kafka in its
# own session (setsid, so the caller's shell or make exiting does not take it down)
# with no inherited stdout (whoever ran us would wait on the pipe forever). The
# previous run's log is kept as server.log.prev; the fresh one is searched for
# "started" by kafka_wait_started.
kafka_start() {
  local props=$1 data=$2 pidfile=$3 heap=$4; shift 4
  [ -f "$data/server.log" ] && mv "$data/server.log" "$data/server.log.prev"
  # shellcheck disable=SC2086 # heap is a list of flags
  setsid java -cp "$libs/*" -Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.logs.dir="$data" \
    $heap -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true "$@" \
    kafka.Kafka "$props" </dev/null >"$data/stdout.log" 2>&1 &
  echo $! >"$pidfile"
}

# kafka_started DATA_DIR: the process logged that it started (metadata loaded,
# coordinators up).
kafka_started() { grep -q "Kafka Server started" "$1/server.log" 2>/dev/null; }
