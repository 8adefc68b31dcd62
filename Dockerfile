# syntax=docker/dockerfile:1
# One image for every subcommand: controller, relay, compensate, cleanup,
# migrate, inspect, requeue.
#
#   docker build -t ghcr.io/outbox-operator/outbox-operator:0.1.0 .
#
# The runtime stage installs exactly the shared libraries the binary and the
# librdkafka built in the first stage link;
# tests/crd/dockerfile_runtime_libs.sh checks that against the built binary
# (ldd + dpkg -S on a bookworm host), since no Docker engine runs in CI.

# --- build --------------------------------------------------------------------
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates curl cmake ninja-build g++ make pkg-config \
      libboost-dev libboost-system-dev libpqxx-dev libspdlog-dev libfmt-dev \
      nlohmann-json3-dev libyaml-cpp-dev libssl-dev libcli11-dev \
      libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# librdkafka 2.8.0 from Debian trixie's source (bookworm's 2.0.2 cannot do SCRAM with
# Kafka 4 brokers); its own layer, so a source change does not rebuild it.
COPY scripts/librdkafka.sh scripts/
RUN scripts/librdkafka.sh /usr/local && ldconfig \
 && install -D -m 0644 -s /usr/local/lib/librdkafka.so.1 /out/usr/local/lib/librdkafka.so.1 \
 && install -D -m 0644 -s /usr/local/lib/librdkafka++.so.1 /out/usr/local/lib/librdkafka++.so.1
# Only what the binary is built from: tests and benchmarks stay out of the image.
COPY CMakeLists.txt ./
COPY src/ src/
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DOUTBOX_BUILD_TESTS=OFF -DOUTBOX_BUILD_EXAMPLES=OFF \
      -DOUTBOX_LIBRDKAFKA_FROM_SOURCE=OFF \
 && cmake --build build --target outbox-operator \
 && install -D -m 0755 -s build/src/outbox-operator /out/usr/local/bin/outbox-operator \
 && /out/usr/local/bin/outbox-operator --version

# --- runtime ------------------------------------------------------------------
FROM debian:bookworm-slim AS runtime
# Runtime libraries only (no -dev packages, no compiler). Keep this list in
# step with what the binary links: tests/crd/dockerfile_runtime_libs.sh.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libpq5 libpqxx-6.4 libspdlog1.10 libfmt9 \
      libyaml-cpp0.7 libssl3 libboost-system1.74.0 \
      libsasl2-2 libzstd1 liblz4-1 zlib1g \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /
RUN ldconfig
LABEL org.opencontainers.image.title="outbox-operator" \
      org.opencontainers.image.description="Kubernetes operator for the transactional outbox pattern (PostgreSQL to Kafka)" \
      org.opencontainers.image.source="https://github.com/outbox-operator/outbox-operator"
# The uid/gid the Helm chart's securityContext expects (runAsUser 65532).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/outbox-operator"]
CMD ["--help"]
