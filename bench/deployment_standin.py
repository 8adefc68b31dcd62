#!/usr/bin/env python3
"""Stands in for the Deployment controller of a control plane without one (the fleet bench's
test bed has no kube-controller-manager and no node), for the relay Deployments only, and
measures a rollout of the whole fleet.

  deployment_standin.py settle   mark every relay Deployment rolled out as it is now
  deployment_standin.py roll --image IMAGE --roll-seconds S --timeout T
        until every relay Deployment runs IMAGE: a Deployment whose generation is ahead of
        its status is reported rolled out S seconds after this first sees it; prints one
        line "converged_s peak_rolling patches" (peak_rolling: the most Deployments seen
        rolling at once, sampled every 0.2 s)

The API server, CA and client certificate come from $KUBECONFIG as the test bed writes it
(file paths, not inline data). Only the standard library.
"""
import argparse
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

SELECTOR = "app.kubernetes.io/component=relay,app.kubernetes.io/managed-by=outbox-operator"


def kubeconfig():
    path = os.environ["KUBECONFIG"]
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().partition(": ")
            if key in ("server", "certificate-authority", "client-certificate", "client-key"):
                fields[key] = value
    return fields


class Api:
    def __init__(self):
        cfg = kubeconfig()
        url = urllib.parse.urlparse(cfg["server"])
        ctx = ssl.create_default_context(cafile=cfg["certificate-authority"])
        ctx.load_cert_chain(cfg["client-certificate"], cfg["client-key"])
        self.conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx)
        self.patches = 0

    def call(self, method, path, body=None, content_type="application/json"):
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        payload = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {payload[:300]!r}")
        return json.loads(payload)

    def relay_deployments(self):
        query = urllib.parse.urlencode({"labelSelector": SELECTOR})
        return self.call("GET", f"/apis/apps/v1/deployments?{query}")["items"]

    def mark_rolled(self, d):
        meta = d["metadata"]
        replicas = d["spec"].get("replicas", 1)
        status = {
            "observedGeneration": meta["generation"],
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        }
        path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}/status"
        self.call("PATCH", path, {"status": status}, "application/merge-patch+json")
        self.patches += 1


def behind(d):
    return d.get("status", {}).get("observedGeneration", 0) < d["metadata"]["generation"]


def image(d):
    return d["spec"]["template"]["spec"]["containers"][0]["image"]


def settle(api):
    for d in api.relay_deployments():
        if behind(d):
            api.mark_rolled(d)
    print(api.patches)


def roll(api, args):
    start = time.monotonic()
    first_seen = {}
    peak = 0
    while time.monotonic() - start < args.timeout:
        deployments = api.relay_deployments()
        now = time.monotonic()
        rolling = [d for d in deployments if behind(d)]
        peak = max(peak, len(rolling))
        for d in rolling:
            key = (d["metadata"]["namespace"], d["metadata"]["name"], d["metadata"]["generation"])
            seen = first_seen.setdefault(key, now)
            if now - seen >= args.roll_seconds:
                api.mark_rolled(d)
        if deployments and all(image(d) == args.image and not behind(d) for d in deployments):
            print(f"{now - start:.1f} {peak} {api.patches}")
            return 0
        time.sleep(0.2)
    done = sum(1 for d in api.relay_deployments() if image(d) == args.image and not behind(d))
    print(f"timeout after {args.timeout} s: {done} rolled, peak {peak}", file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["settle", "roll"])
    parser.add_argument("--image", default="")
    parser.add_argument("--roll-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()
    api = Api()
    if args.mode == "settle":
        settle(api)
        return 0
    return roll(api, args)


if __name__ == "__main__":
    sys.exit(main())
