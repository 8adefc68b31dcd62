#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# Prints what operator/install.yaml must contain: the chart rendered with its
# default values for release "outbox-operator" in namespace "outbox-system",
# preceded by that Namespace. Regenerate the file after a chart change with
#   OUTBOX_TESTBED_BIN=<dir with helm> tests/crd/render_install.sh > operator/install.yaml
# (tests/crd/install_manifest_sync.sh fails while the file is stale).
# Usage: render_install.sh [CHART]: CHART (a directory or a packaged .tgz) instead of the
# repository's chart; scripts/release.sh renders the released chart, which names the image
# by digest, this way.
source "$(dirname "$0")/lib.sh"
use_helm
chart=${1:-$CHART_DIR}
cat <<'HEADER'
# outbox-operator: plain manifests for a kubectl-only install.
#
# GENERATED FILE, do not edit. It is charts/outbox-operator rendered with the
# default values (release "outbox-operator", namespace "outbox-system"):
#   OUTBOX_TESTBED_BIN=<dir with helm> tests/crd/render_install.sh > operator/install.yaml
# tests/crd/install_manifest_sync.sh fails when it no longer matches the chart.
#
# Install (the CRD first, with server-side apply, which also upgrades it):
#   kubectl apply --server-side -f crds/
#   kubectl apply -f operator/install.yaml
---
apiVersion: v1
kind: Namespace
metadata:
  name: outbox-system
  labels:
    app.kubernetes.io/part-of: outbox-operator
    # The operator's pods meet the restricted Pod Security Standard.
    pod-security.kubernetes.io/enforce: restricted
HEADER
"$HELM" template outbox-operator "$chart" --namespace outbox-system
