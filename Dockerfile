# holdfast image: build/holdfast, build/hfctl and build/hfbench on Debian 12, with the
# topic set (topics/) and the warehouse network (config/) they read by relative path.
# Used by docker-compose.yml. Not built in CI (there is no Docker engine there);
# tests/docker/test_compose.sh checks its structure.
#
#   docker build -t holdfast:local .

# ---- build: the Debian 12 packages of tools/deps.sh's build group (so `make release`
# installs nothing more), then librdkafka in a layer of its own: tools/librdkafka.sh
# fetches its pinned source package with npm, checks its sha256 and builds it into
# .cache/ (about a minute), which the binaries link statically. A source change does not
# rebuild it.
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential pkg-config librocksdb-dev libavro-dev libjansson-dev libcmocka-dev libmicrohttpd-dev libgnutls28-dev libssl-dev libcurl4-openssl-dev libzstd-dev zlib1g-dev npm ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY tools/librdkafka.sh tools/deps.sh tools/
RUN bash tools/librdkafka.sh
# Only what `make release` reads: the Makefile and the sources under these directories
# (schemas/*.avsc are embedded into the binary by tools/embed-schemas.sh).
COPY Makefile ./
COPY common/ common/
COPY processor/ processor/
COPY schemas/ schemas/
COPY state/ state/
COPY tools/ tools/
RUN make -j"$(nproc)" release

# ---- runtime: the shared libraries only (their own dependencies come with them); no
# librdkafka package: it is linked in, and needs libssl3, libcurl4, libzstd1 and zlib1g
FROM debian:12-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      librocksdb7.8 libavro23 libjansson4 libmicrohttpd12 libgnutls30 libssl3 libcurl4 libzstd1 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/holdfast --shell /usr/sbin/nologin holdfast \
 && mkdir -p /var/lib/holdfast /var/lib/holdfast-http /opt/holdfast/reports \
 && chown holdfast:holdfast /var/lib/holdfast /var/lib/holdfast-http /opt/holdfast/reports
COPY --from=build /src/build/holdfast /src/build/hfctl /src/build/hfbench /usr/local/bin/
# The tools open topics/topics.json and config/warehouses.json relative to the working
# directory, as they do in a checkout.
WORKDIR /opt/holdfast
COPY topics/ topics/
COPY config/ config/
# One RocksDB per stage below it; docker-compose.yml mounts a volume here (and one on
# reports/ for hfbench). A fresh named volume takes its directory's owner, so the
# holdfast user can write to both.
ENV HOLDFAST_STATE_DIR=/var/lib/holdfast
USER holdfast
CMD ["holdfast", "run", "--stages", "counter,aggregator,gateway"]
