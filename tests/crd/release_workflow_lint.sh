#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015,SC2016  # SC2016: the workflow's and scripts' own text, unexpanded
# unit: the release workflow (.github/workflows/release.yml) passes actionlint, which also
# runs shellcheck on each of its run: blocks; and it does what docs/release.md says it does:
# on a version tag, scripts/release.sh --keyless (cosign through the job's OIDC identity:
# id-token: write), build provenance for the image, the chart and the files, and the
# release verified with scripts/install-release.sh before it is published. The workflow is
# never run here (no GitHub), so this is what keeps it from rotting. actionlint is built from
# the Go module proxy (scripts/testbed/build-release-tools.sh; about a minute cold, cached).
# A workflow with a mistake actionlint knows is refused, so a silent linter cannot pass.
source "$(dirname "$0")/lib.sh"
wf=$REPO_ROOT/.github/workflows/release.yml
[ -f "$wf" ] || die "$wf is missing"
actionlint=$("$REPO_ROOT/scripts/testbed/build-release-tools.sh" actionlint | tail -n1) ||
  die "building actionlint failed"
command -v shellcheck >/dev/null || die "shellcheck is needed (scripts/deps.sh installs it)"
if out=$("$actionlint" -shellcheck "$(command -v shellcheck)" "$wf" 2>&1); then
  pass "actionlint: $wf is clean"
else
  fail "actionlint found problems:
$out"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/.github/workflows"
sed 's/runs-on: ubuntu-24.04/runs-on: ubuntu-24.04\n    permisions: {}/; s/id-token: write/id-token: writ/' "$wf" \
  >"$tmp/.github/workflows/release.yml"
if (cd "$tmp" && "$actionlint" -shellcheck= .github/workflows/release.yml >/dev/null 2>&1); then
  fail "actionlint accepted a workflow with a misspelt key and permission"
else
  pass "actionlint refuses a misspelt key and permission"
fi

text=$(cat "$wf")
expect_contains "it runs on version tags" "$text" 'tags: ["v[0-9]+.[0-9]+.[0-9]+*"]'
expect_contains "no permission by default" "$text" "permissions: {}"
expect_contains "keyless signing needs the OIDC token" "$text" "id-token: write"
expect_contains "it runs scripts/release.sh, keyless" "$text" \
  'scripts/release.sh "$VERSION" --image --push "$REGISTRY_PREFIX" --keyless'
expect_eq "build provenance for the image, the chart and the files" \
  "$(grep -c 'uses: actions/attest-build-provenance@' "$wf")" 3
expect_contains "it verifies as a user would before publishing" "$text" "scripts/install-release.sh"
expect_not_contains "no long-lived signing key" "$text" "COSIGN_PRIVATE_KEY"
expect_not_contains "no password in argv" "$text" "--password \""
# The tools at the test bed's versions, so what CI publishes is what the tests exercised.
lib=$REPO_ROOT/scripts/testbed/lib.sh tools=$REPO_ROOT/scripts/testbed/build-release-tools.sh
expect_contains "helm at the test bed's version" "$text" \
  "HELM_VERSION: $(sed -n 's/^HELM_VERSION="${HELM_VERSION:-\(.*\)}"$/\1/p' "$lib")"
expect_contains "cosign at the test bed's version" "$text" \
  "COSIGN_VERSION: $(sed -n 's/^COSIGN_VERSION="${COSIGN_VERSION:-\(.*\)}"$/\1/p' "$tools")"
expect_contains "crane at the test bed's version" "$text" \
  "CRANE_VERSION: $(sed -n 's/^CRANE_VERSION="${CRANE_VERSION:-\(.*\)}"$/\1/p' "$tools")"
finish
