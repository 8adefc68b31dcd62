#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# unit: what the on-call pages ask for is what the product grants.
#  - no runbook (docs/runbooks), alert text (the rendered PrometheusRule), NOTES.txt or
#    SECURITY.md runs `kubectl exec` (the image has no shell and the on-call role has no
#    pods/exec), and none says on-call commands run in a relay pod;
#  - every kubectl command of the runbooks and alerts that needs a subresource or an
#    OutboxRelay (logs, port-forward, attach, the pod proxy, get/describe/annotate obr,
#    get pods, the kubectl outbox plugin) and every `pods/...` they name is granted by the
#    documented on-call role (examples/oncall/rbac.yaml), whose table in docs/install.md
#    lists exactly its rules;
#  - SECURITY.md's tables of the operator's ClusterRole and leader-election Role list
#    exactly the verbs `helm template` renders with the default values.
# Needs OUTBOX_TESTBED_BIN (the test bed's helm) and python3-yaml.
source "$(dirname "$0")/lib.sh"
use_helm
use_promtool
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$HELM" template outbox-operator "$CHART_DIR" --namespace "$RELEASE_NS" >"$tmp/chart.yaml" ||
  die "helm template of the chart failed"
render_rules "$tmp/rules.yaml" || die "helm template of the PrometheusRule failed"

out=$(python3 - "$REPO_ROOT" "$tmp/chart.yaml" "$tmp/rules.yaml" <<'PY'
import glob, os, re, sys, yaml

root, chart, rules = sys.argv[1:]

def triples(rule_list):
    """(group, resource, verb) for every rule; resourceNames narrow a rule but grant its verbs."""
    out = set()
    for r in rule_list:
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                for v in r.get("verbs", []):
                    out.add((g, res, v))
    return out

def role(docs, kind, name_suffix=""):
    found = [d for d in docs if d and d.get("kind") == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{kind} *{name_suffix}: {len(found)} rendered"
    return triples(found[0]["rules"])

rendered = list(yaml.safe_load_all(open(chart)))
cluster_role = role(rendered, "ClusterRole")
leader_role = role(rendered, "Role", "-leader-election")
oncall_docs = list(yaml.safe_load_all(open(f"{root}/examples/oncall/rbac.yaml")))
oncall = role(oncall_docs, "ClusterRole", "outbox-oncall")

problems = []

# The pages on-call reads, as text: each runbook, each alert's annotations, NOTES.txt.
pages = {os.path.relpath(p, root): open(p).read() for p in sorted(glob.glob(f"{root}/docs/runbooks/*.md"))}
for g in yaml.safe_load(open(rules))["groups"]:
    for r in g["rules"]:
        if "alert" in r:
            pages[f"alert {r['alert']}"] = "\n".join(r.get("annotations", {}).values())
notes = "charts/outbox-operator/templates/NOTES.txt"
security = "SECURITY.md"
texts = dict(pages)
texts[notes] = open(f"{root}/{notes}").read()
texts[security] = open(f"{root}/{security}").read()

# A kubectl command line: kubectl, its flags, its subcommand and what follows on the line
# (up to a closing backtick in prose).
command = re.compile(r"\bkubectl((?:\s+(?:-n|--namespace|--context)(?:=|\s+)\S+)*)\s+([a-z-]+)([^`\n]*)")
in_pod = re.compile(r"\b(?:run|runs|running)\s+(?:inside|in)\s+(?:a|the)\s+relay\s+pod", re.I)
for where, text in texts.items():
    for m in command.finditer(text):
        if m.group(2) in ("exec", "cp"):
            problems.append(f"{where}: `kubectl {m.group(2)}` (no shell in the image, no pods/exec for on-call): {m.group(0).strip()}")
    for m in in_pod.finditer(text):
        problems.append(f"{where}: says a command runs in a relay pod: '{m.group(0)}'")

# What a command of the pages needs, as (group, resource, verb).
OBR = ("outbox.dev", "outboxrelays")
PLUGIN = {OBR + ("get",), OBR + ("patch",), ("", "pods", "list"), ("", "pods/proxy", "get"), ("", "events", "list")}
def needs(sub, rest):
    words = rest.split()
    kind = next((w for w in words if not w.startswith("-") and not w.startswith('"$')), "")
    if sub == "outbox":
        return PLUGIN
    if sub == "logs":
        return {("", "pods/log", "get")}
    if sub == "port-forward":
        return {("", "pods/portforward", "create")}
    if sub == "attach":
        return {("", "pods/attach", "create")}
    if sub == "get" and "--raw" in rest and "/proxy/" in rest:
        return {("", "pods/proxy", "get")}
    if kind in ("obr", "outboxrelay", "outboxrelays"):
        if sub == "describe":
            return {OBR + ("get",), ("", "events", "list")}
        if sub in ("annotate", "patch", "label"):
            return {OBR + ("get",), OBR + ("patch",)}
        if sub in ("get", "wait"):
            return {OBR + ("get",)}
    if sub == "get" and kind == "pods":
        return {("", "pods", "list")}
    return set()  # another resource: a platform team's command, not on-call's

for where, text in pages.items():
    for m in command.finditer(text):
        for need in sorted(needs(m.group(2), m.group(3)) - oncall):
            problems.append(f"{where}: `{m.group(0).strip()}` needs {need[2]} {need[1]}, which the on-call role does not grant")
    for sub in sorted(set(re.findall(r"`pods/([a-z]+)`", text))):
        if not any(r == f"pods/{sub}" for _, r, _ in oncall):
            problems.append(f"{where}: names `pods/{sub}`, which the on-call role does not grant")

# Markdown tables of RBAC: rows of backticked names. SECURITY.md: | API group | resources | verbs |
# (core for the "" group); docs/install.md: | resource[.group] | verbs | for |.
def section(text, heading):
    start = text.find(heading)
    if start < 0:
        problems.append(f"no section '{heading}'")
        return ""
    end = text.find("\n#", start + len(heading))
    return text[start:end if end >= 0 else len(text)]

def ticks(cell):
    return re.findall(r"`([^`]+)`", cell)

def security_table(text):
    out = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not ticks(cells[1]):
            continue
        groups = [""] if "core" in cells[0] else []
        groups += ticks(cells[0])
        out |= {(g, r, v) for g in groups for r in ticks(cells[1]) for v in ticks(cells[2])}
    return out

def install_table(text):
    out = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not ticks(cells[0]):
            continue
        for name in ticks(cells[0]):
            resource, _, group = name.partition(".")
            out |= {(group, resource, v) for v in ticks(cells[1])}
    return out

def compare(what, documented, granted):
    for t in sorted(documented - granted):
        problems.append(f"{what} lists {t[2]} {t[1]} (group '{t[0]}'), which is not granted")
    for t in sorted(granted - documented):
        problems.append(f"{what} leaves out {t[2]} {t[1]} (group '{t[0]}'), which is granted")

sec = texts[security]
compare("SECURITY.md's ClusterRole table", security_table(section(sec, "### The operator's ClusterRole")), cluster_role)
compare("SECURITY.md's leader-election Role table", security_table(section(sec, "### Its leader-election Role")), leader_role)
install = open(f"{root}/docs/install.md").read()
compare("docs/install.md's on-call table", install_table(section(install, "### The RBAC on-call needs")), oncall)

print("\n".join(problems))
PY
) || die "the check itself failed: $out"
expect_eq "the on-call pages, NOTES.txt and SECURITY.md ask for nothing the roles do not grant, and SECURITY.md lists the rendered RBAC" "$out" ""
finish
