# Local Kafka broker targets, included by the top-level Makefile (or run alone with
# `make -f tools/kafka/kafka.mk kafka-up`). The scripts hold the logic; see their headers.

KAFKA_TOOLS := $(CURDIR)/tools/kafka

.PHONY: kafka-fetch kafka-up kafka-down kafka-wipe kafka-secure-up kafka-secure-down \
        kafka-cluster-up kafka-cluster-down

# Get the broker jars into .cache/kafka/libs without starting anything.
kafka-fetch:
	@bash $(KAFKA_TOOLS)/kafka-up.sh --fetch

# Start the broker on 127.0.0.1:$${HOLDFAST_KAFKA_PORT:-9092}; a no-op if it is up.
kafka-up:
	@bash $(KAFKA_TOOLS)/kafka-up.sh

kafka-down:
	@bash $(KAFKA_TOOLS)/kafka-down.sh

# Stop it and delete all topics, offsets and logs.
kafka-wipe:
	@bash $(KAFKA_TOOLS)/kafka-down.sh --wipe

# A second, secured broker (SCRAM-SHA-512 over TLS on 127.0.0.1:$${HOLDFAST_SECURE_PORT:-19094},
# mutual TLS on PORT+2, ACLs); fresh certificates, users and ACLs at each start; down
# deletes all of it. docs/SECURITY.md.
kafka-secure-up:
	@bash $(KAFKA_TOOLS)/kafka-secure-up.sh

kafka-secure-down:
	@bash $(KAFKA_TOOLS)/kafka-secure-down.sh

# A local 3-broker cluster with 3 KRaft controllers, six JVMs on 127.0.0.1:19192-19194
# (brokers) and 19292-19294 (controllers), for the cluster fault scenarios
# (make test-faults-cluster); as root also the network namespace hfcl. Layout in
# tools/kafka/cluster-env.sh. Down keeps the data; CLUSTER_WIPE=1 deletes it and the
# namespace.
kafka-cluster-up:
	@bash $(KAFKA_TOOLS)/cluster-up.sh

kafka-cluster-down:
	@bash $(KAFKA_TOOLS)/cluster-down.sh $(if $(filter 1,$(CLUSTER_WIPE)),--wipe)
