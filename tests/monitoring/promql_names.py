"""Metric names in the chart's PromQL: the alert rules and the Grafana dashboard.

Used by the tests in this folder. `python3 promql_names.py rules RULES_FILE` or
`python3 promql_names.py dashboard DASHBOARD_JSON` prints one `name<TAB>where` line per
metric use; `python3 promql_names.py exprs DASHBOARD_JSON` prints the dashboard's
queries as a Prometheus rules file (one recording rule per query, Grafana's variables
replaced by values), so that `promtool check rules` parses each of them.

The name finder is a small tokenizer, not a PromQL parser: it drops strings, label
matchers, ranges, grouping clauses and Grafana variables, then keeps every identifier
that is not a function call, a keyword or a number. It errs towards reporting too
much (a false name fails the test loudly) rather than too little.
"""
import json
import re
import sys

import yaml

KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
    "group_right", "offset", "bool", "inf", "nan", "atan2",
}
# What Grafana substitutes at query time; any valid value will do for parsing.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m", "${__rate_interval}": "5m", "$__interval": "1m",
    "$__range": "1h", "${__range}": "1h",
}


def strip_grafana(expr):
    for var, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(var, value)
    # Dashboard variables only appear inside label matchers ("=~\"$namespace\"").
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def metric_names(expr):
    e = strip_grafana(expr)
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', e)  # strings
    e = re.sub(r"'(?:[^'\\]|\\.)*'", "''", e)
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+\S+", " ", e)
    names = []
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS:
            continue
        names.append(word)
    return names


def label_values_selector(query):
    """The series selector inside Grafana's label_values(selector, label)."""
    m = re.match(r"\s*label_values\((.*),\s*\w+\s*\)\s*$", query)
    return m.group(1) if m else query


def rule_exprs(path):
    for group in yaml.safe_load(open(path))["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule.get("record"), rule["expr"]


def dashboard_exprs(path):
    dash = json.load(open(path))

    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            yield f"panel {p.get('id')} \"{p.get('title')}\" {t.get('refId')}", t.get("expr", "")
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
            yield f"variable {v['name']}", label_values_selector(q)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "exprs":
        rules = [{"record": f"dashboard:query_{i}", "expr": strip_grafana(expr)}
                 for i, (_, expr) in enumerate(dashboard_exprs(path))]
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sys.stdout,
                       sort_keys=False, width=1000)
        return
    source = rule_exprs(path) if mode == "rules" else dashboard_exprs(path)
    for where, expr in source:
        if not expr.strip():
            print(f"<empty query>\t{where}")
        for name in metric_names(expr):
            print(f"{name}\t{where}")


if __name__ == "__main__":
    main()
