# syntax=docker/dockerfile:1
# One image for every subcommand: controller, relay, compensate, cleanup,
# migrate, inspect, requeue.
#
#   docker build -t ghcr.io/outbox-operator/outbox-operator:0.1.0 .
#
# The runtime image is `FROM scratch` plus what scripts/image-rootfs.sh lays out in
# the build stage: the binary, the shared libraries it loads and the dynamic loader,
# CA certificates, the time zone database and a passwd/group naming the non-root
# user 65532. There is no shell, package manager or coreutils: the binary is the only
# program in it.
# tests/crd/dockerfile_runtime_libs.sh runs the same script against the built binary
# and the binary chrooted into its result, since no Docker engine runs in CI.

# --- build --------------------------------------------------------------------
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates tzdata curl cmake ninja-build g++ make pkg-config \
      libboost-dev libboost-system-dev libpqxx-dev libspdlog-dev libfmt-dev \
      nlohmann-json3-dev libyaml-cpp-dev libssl-dev libcli11-dev \
      libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# librdkafka 2.8.0 from Debian trixie's source (bookworm's 2.0.2 cannot do SCRAM with
# Kafka 4 brokers); its own layer, so a source change does not rebuild it.
COPY scripts/librdkafka.sh scripts/
# Stripped in place: the runtime image copies the files the binary loads from here.
RUN scripts/librdkafka.sh /usr/local \
 && strip --strip-unneeded "$(readlink -f /usr/local/lib/librdkafka.so.1)" \
      "$(readlink -f /usr/local/lib/librdkafka++.so.1)" \
 && ldconfig
# Only what the binary is built from: tests and benchmarks stay out of the image.
COPY CMakeLists.txt ./
COPY src/ src/
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DOUTBOX_BUILD_TESTS=OFF -DOUTBOX_BUILD_EXAMPLES=OFF \
      -DOUTBOX_LIBRDKAFKA_FROM_SOURCE=OFF \
 && cmake --build build --target outbox-operator \
 && install -D -m 0755 -s build/src/outbox-operator /out/usr/local/bin/outbox-operator \
 && /out/usr/local/bin/outbox-operator --version
# The runtime image's root filesystem: the binary, its libraries and loader, CA bundle,
# zoneinfo, passwd/group. A layer of its own, so a change to the script does not compile again.
COPY scripts/image-rootfs.sh scripts/
RUN scripts/image-rootfs.sh /out/usr/local/bin/outbox-operator /rootfs

# --- runtime ------------------------------------------------------------------
# Nothing but the build stage's /rootfs (see the header): no base image, no RUN.
FROM scratch AS runtime
COPY --from=build /rootfs/ /
# An image from scratch has no environment: a command given by name (`kubectl exec <pod> --
# outbox-operator ...`, for those allowed pods/exec) finds the binary by this PATH whatever the
# runtime's default.
ENV PATH=/usr/local/bin
LABEL org.opencontainers.image.title="outbox-operator" \
      org.opencontainers.image.description="Kubernetes operator for the transactional outbox pattern (PostgreSQL to Kafka)" \
      org.opencontainers.image.source="https://github.com/outbox-operator/outbox-operator"
# The uid/gid the Helm chart's securityContext expects (runAsUser 65532), named
# nonroot in the image's /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/outbox-operator"]
CMD ["--help"]
