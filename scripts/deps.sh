#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the demo need. Quick when
# everything is present already (checks with dpkg first, no apt-get update then).
set -euo pipefail
packages=(
  cmake ninja-build g++ ccache pkg-config openssl python3 clang-format shellcheck
  libboost-dev libboost-system-dev libssl-dev nlohmann-json3-dev libspdlog-dev
  libyaml-cpp-dev libcli11-dev libpqxx-dev libgtest-dev libgmock-dev
  # librdkafka 2.8 is built from source (scripts/librdkafka.sh): curl and what it links.
  curl libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev
  postgresql-15 postgresql-client-15 openjdk-17-jre-headless maven golang-go
  # The consumer examples (scripts/examples-deps.sh): a venv, and javac for the Java one.
  python3-venv openjdk-17-jdk-headless
  # The test bed's node: container runtime, pod network, image building without a registry.
  containerd runc containernetworking-plugins buildah debootstrap busybox-static socat
  iproute2 procps
  # A connection pooler the relay must tell apart by its pool mode (tests/relay/pooler_test).
  pgbouncer
  # promtool (tests/monitoring); Debian ships it only inside the server package.
  prometheus
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The machine's own Java and Go count (they may come from outside Debian).
if command -v java >/dev/null && java -version 2>&1 | grep -q 'version "17'; then
  missing=("${missing[@]/openjdk-17-jre-headless}")
fi
if command -v javac >/dev/null && javac -version 2>&1 | grep -q 'javac 17'; then
  missing=("${missing[@]/openjdk-17-jdk-headless}")
fi
python3 -c 'import ensurepip, venv' 2>/dev/null && missing=("${missing[@]/python3-venv}")
command -v mvn >/dev/null && missing=("${missing[@]/maven}")
command -v go >/dev/null && missing=("${missing[@]/golang-go}")
read -r -a missing <<<"${missing[*]}"
if [ ${#missing[@]} -gt 0 ]; then
  # Two callers at once (a demo and a test run) install one after the other: apt-get fails
  # at once, rather than waiting, when another one holds dpkg's lock. The second finds the
  # packages installed and installs nothing.
  exec 9>/tmp/outbox-operator-deps.lock
  flock 9
  still=()
  for p in "${missing[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || still+=("$p")
  done
  missing=("${still[@]}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
# Only promtool is wanted. Where services may start (systemd, or an init without
# a policy-rc.d that forbids it), installing the package starts and enables a
# Prometheus server on :9090: stop and disable it right after installing it. A
# server someone installed on purpose before is left alone (only a warning).
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
  if [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  elif [ -x /etc/init.d/prometheus ]; then
    /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
fi
if command -v pgrep >/dev/null && pgrep -x prometheus >/dev/null; then
  echo "[deps] warning: a prometheus server is running (pid $(pgrep -x prometheus | tr '\n' ' '));" \
    "the tests only need promtool" >&2
fi
