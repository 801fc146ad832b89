#!/usr/bin/env bash
# Starts a second single-node KRaft broker with SASL/SCRAM-SHA-512 over TLS, mutual TLS and
# ACLs (StandardAuthorizer), from the same jars as kafka-up.sh, on other ports: it never
# touches the development broker on 9092. Every start is fresh: a test CA, a broker
# certificate and one client certificate per principal (openssl, PEM files), random
# passwords, SCRAM users created when the storage is formatted, then the ACLs of
# docs/SECURITY.md through Kafka's AclCommand (the Admin API). Everything lives in
# .cache/kafka-secure/ and goes with kafka-secure-down.sh.
#
# usage: tools/kafka/kafka-secure-up.sh
# env:   HOLDFAST_SECURE_PORT (default 19094, SASL_SSL; the controller listens on PORT+1,
#        mutual TLS on PORT+2)
#        KAFKA_HEAP_OPTS (default -Xmx512M -Xms512M)
# makes: .cache/kafka-secure/ — librdkafka client configurations (HOLDFAST_KAFKA_CONFIG /
#        kafka_config_file) per principal:
#          {admin,holdfast,checkout,wms}.properties   SCRAM-SHA-512 over TLS, at `bootstrap`
#          {holdfast,checkout,wms}-mtls.properties    a client certificate, at `bootstrap-mtls`
#        and tls/: the test CA, the keys and the certificates (PEM).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
libs=$root/.cache/kafka/libs
home=$root/.cache/kafka-secure
data=$home/data
tls=$home/tls
pidfile=$home/kafka.pid
props=$home/server.properties
port=${HOLDFAST_SECURE_PORT:-19094}
cport=$((port + 1))
mport=$((port + 2))
start_timeout_s=90
broker_dn="CN=holdfast-secure-broker"

die() { echo "kafka-secure-up: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
broker_alive() {
  [ -f "$pidfile" ] || return 1
  local pid; pid=$(cat "$pidfile")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $props"
}
secret() { openssl rand -hex 16; }

command -v openssl >/dev/null || die "needs openssl"
bash "$here/kafka-up.sh" --fetch # the jars only; the development broker is left alone

if broker_alive && port_open "$port"; then
  echo "kafka-secure up: already running (pid $(cat "$pidfile")), bootstrap 127.0.0.1:$port"
  exit 0
fi
broker_alive && die "pid $(cat "$pidfile") is alive but not answering on $port; run kafka-secure-down.sh"
port_open "$port" && die "127.0.0.1:$port is taken (set HOLDFAST_SECURE_PORT)"
port_open "$cport" && die "127.0.0.1:$cport is taken (set HOLDFAST_SECURE_PORT)"
port_open "$mport" && die "127.0.0.1:$mport is taken (set HOLDFAST_SECURE_PORT)"
rm -rf "$home"
mkdir -p "$data" "$tls"
chmod 700 "$home"

# ---- TLS: a CA; a broker certificate for 127.0.0.1 / localhost, which serves as the
# listeners' server certificate and as the broker's client certificate on the controller
# listener; a client certificate per principal, CN=<name>,O=holdfast-secure-test, which
# the MTLS listener maps to User:<name> (ssl.principal.mapping.rules). PEM throughout:
# Kafka and librdkafka both read it, so no Java key store is needed.
client_o="holdfast-secure-test"
# sign NAME SUBJECT EXTENSIONS...: tls/NAME.key (PKCS#8, unencrypted) and tls/NAME.crt.
sign() {
  local name=$1 subject=$2; shift 2
  openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$tls/$name.key" \
    -out "$tls/$name.csr" 2>/dev/null || die "openssl could not make a key for $name"
  printf '%s\n' "$@" >"$tls/$name.ext"
  openssl x509 -req -in "$tls/$name.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/$name.ext" -out "$tls/$name.crt" 2>/dev/null \
    || die "openssl could not sign $name's certificate"
  rm -f "$tls/$name.csr" "$tls/$name.ext"
}
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=holdfast-secure-test-ca" \
  -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null || die "openssl could not make the CA"
sign broker "/$broker_dn" "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  "extendedKeyUsage=serverAuth,clientAuth"
cat "$tls/broker.key" "$tls/broker.crt" >"$tls/broker.pem"
for user in holdfast checkout wms; do
  sign "$user" "/O=$client_o/CN=$user" "extendedKeyUsage=clientAuth"
done

# ---- principals: admin (super user, SCRAM only), holdfast (all stages), checkout, wms
declare -A pw
for user in admin holdfast checkout wms; do pw[$user]=$(secret); done
sed -e "s|@PORT@|$port|g" -e "s|@MTLS_PORT@|$mport|g" -e "s|@CONTROLLER_PORT@|$cport|g" \
  -e "s|@DATA_DIR@|$data|g" -e "s|@TLS_DIR@|$tls|g" -e "s|@ADMIN_PASSWORD@|${pw[admin]}|g" \
  -e "s|@BROKER_DN@|$broker_dn|g" "$here/server-secure.properties.in" >"$props"
for user in admin holdfast checkout wms; do
  cat >"$home/$user.properties" <<PROPS
# librdkafka client configuration of principal $user: SCRAM-SHA-512 over TLS
# (HOLDFAST_KAFKA_CONFIG; bootstrap 127.0.0.1:$port)
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=$user
sasl.password=${pw[$user]}
ssl.ca.location=$tls/ca.crt
PROPS
  [ "$user" = admin ] && continue
  cat >"$home/$user-mtls.properties" <<PROPS
# librdkafka client configuration of principal $user: a client certificate (mutual TLS)
# (HOLDFAST_KAFKA_CONFIG; bootstrap 127.0.0.1:$mport)
security.protocol=SSL
ssl.ca.location=$tls/ca.crt
ssl.certificate.location=$tls/$user.crt
ssl.key.location=$tls/$user.key
PROPS
done
# The same for Kafka's Java tools (AclCommand --command-config).
cat >"$home/admin-java.properties" <<PROPS
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="${pw[admin]}";
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
PROPS
chmod 600 "$home"/*.properties "$tls"/*
echo "127.0.0.1:$port" >"$home/bootstrap"
echo "127.0.0.1:$mport" >"$home/bootstrap-mtls"

# ---- format with the SCRAM users: they exist before the broker first starts, so the
# broker can authenticate to itself as admin.
scram=()
for user in admin holdfast checkout wms; do
  scram+=(--add-scram "SCRAM-SHA-512=[name=$user,password=${pw[$user]}]")
done
cluster_id=$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid)
java -cp "$libs/*" kafka.tools.StorageTool format -t "$cluster_id" -c "$props" --standalone \
  "${scram[@]}" >"$data/format.log" 2>&1 || { cat "$data/format.log" >&2; die "format failed"; }

t0=$(date +%s%N)
# shellcheck disable=SC2086 # KAFKA_HEAP_OPTS is a list of flags
setsid java -cp "$libs/*" -Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.logs.dir="$data" \
  ${KAFKA_HEAP_OPTS:--Xmx512M -Xms512M} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
  -Djava.awt.headless=true kafka.Kafka "$props" </dev/null >"$data/stdout.log" 2>&1 &
echo $! >"$pidfile"
ready=0
for _ in $(seq $((start_timeout_s * 4))); do
  if ! broker_alive; then
    tail -n 30 "$data/stdout.log" "$data/server.log" 2>/dev/null >&2 || true
    die "broker exited during startup (logs in $data)"
  fi
  if grep -q "Kafka Server started" "$data/server.log" 2>/dev/null && port_open "$port"; then
    ready=1
    break
  fi
  sleep 0.25
done
[ "$ready" = 1 ] || die "broker not ready after ${start_timeout_s}s (logs in $data); run kafka-secure-down.sh"

# ---- ACLs (docs/SECURITY.md). --producer: Write, Describe, Create on the topics (and
# Write, Describe on the transactional ids); --consumer: Read, Describe on the topics
# and Read on the groups.
acl() {
  java -cp "$libs/*" -Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.logs.dir="$data" \
    org.apache.kafka.tools.AclCommand --bootstrap-server "127.0.0.1:$port" \
    --command-config "$home/admin-java.properties" --add "$@" >>"$data/acls.log" 2>&1 \
    || { tail -n 20 "$data/acls.log" >&2; die "AclCommand $* failed"; }
}
# holdfast runs every stage: every project topic, its groups and transactional ids
# (app_id "holdfast": groups holdfast-<stage>, transactional ids holdfast-<stage>-...).
acl --allow-principal User:holdfast --producer --consumer --resource-pattern-type prefixed \
  --topic holdfast. --group holdfast- --transactional-id holdfast-
# checkout: produce requests; read the replies topic and topics under holdfast.replies;
# its own groups (checkout*).
acl --allow-principal User:checkout --producer --topic holdfast.requests
acl --allow-principal User:checkout --consumer --resource-pattern-type prefixed \
  --topic holdfast.replies --group checkout
# wms: the stock feed only.
acl --allow-principal User:wms --producer --topic holdfast.stock-feed

echo "kafka-secure up: bootstrap 127.0.0.1:$port SASL_SSL (SCRAM-SHA-512), 127.0.0.1:$mport mutual TLS (pid $(cat "$pidfile"), ready in $((($(date +%s%N) - t0) / 1000000)) ms); client configs in $home/{admin,holdfast,checkout,wms}.properties and $home/{holdfast,checkout,wms}-mtls.properties"
