"""Validates the manifests `helm template` rendered from deploy/helm/sked, offline.

Every object must pass one of two schema checks, or the run fails (nothing is skipped):

- Kubernetes' own kinds: kubernetes-validate's strict schemas (unknown fields are errors) for
  each version given with --kube-version, from the schemas the PyPI package carries;
- KEDA's kinds (keda.sh/*): KEDA's CRD schemas, through keda.mjs and the npm package
  @kubernetes-models/keda. A CRD's schema cannot forbid unknown fields (the API server prunes
  them), so a misspelt field in a KEDA object passes: the checks below name the fields sked
  relies on.

Then what the chart promises, checked on the objects themselves: every container has liveness
and readiness probes, CPU and memory requests and limits, no privilege escalation; every pod runs
as non-root with a termination grace period that outlasts the worker's shutdown; every
Deployment has a PodDisruptionBudget selecting its pods; the workers are scaled by exactly one
ScaledObject or HorizontalPodAutoscaler; and the kinds rendered are the ones expected.

Usage: python validate.py --name NAME --kube-version 1.25.0 --kube-version 1.37.0 \
           --node node --node-modules DIR --expect Deployment=3,Service=1 RENDERED.yaml
Prints one line for the render, or each problem and exits 1.
"""

import argparse
import collections
import json
import subprocess
import sys

import yaml
from kubernetes_validate import utils as kv

KEDA_GROUP = "keda.sh"
# `sked worker` waits at most --grace + 5 s after SIGTERM (crates/sked/src/worker.rs).
WORKER_DRAIN_SECONDS = 5


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--name", required=True, help="what this render is, for the messages")
    parser.add_argument("--kube-version", action="append", required=True)
    parser.add_argument("--node", default="node")
    parser.add_argument("--node-modules", required=True)
    parser.add_argument("--keda-script", required=True)
    parser.add_argument("--expect", default="", help="Kind=count,… of the objects rendered")
    parser.add_argument("rendered")
    args = parser.parse_args()

    with open(args.rendered, encoding="utf-8") as f:
        objects = [o for o in yaml.safe_load_all(f) if o]
    problems = []
    problems += check_schemas(objects, args)
    problems += check_chart(objects)
    problems += check_kinds(objects, args.expect)
    if problems:
        for p in problems:
            print(f"helm-validate: {args.name}: {p}")
        sys.exit(1)
    kinds = collections.Counter(o["kind"] for o in objects)
    print(
        f"helm-validate: {args.name}: {len(objects)} objects valid "
        f"(Kubernetes {', '.join(args.kube_version)} strict; KEDA CRDs): "
        + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    )


def ident(o):
    return f"{o.get('kind', '?')}/{(o.get('metadata') or {}).get('name', '?')}"


def check_schemas(objects, args):
    problems, keda = [], []
    for o in objects:
        if not isinstance(o, dict) or not o.get("apiVersion") or not o.get("kind"):
            problems.append(f"not a Kubernetes object: {str(o)[:80]}")
            continue
        if o["apiVersion"].split("/")[0] == KEDA_GROUP:
            keda.append(o)
            continue
        for version in args.kube_version:
            try:
                kv.validate(o, version, strict=True)
            except kv.SchemaNotFoundError as e:
                problems.append(f"{ident(o)}: {e.message}")
            except kv.ValidationError as e:
                path = ".".join(str(p) for p in e.absolute_path) or "(top)"
                problems.append(f"{ident(o)} (Kubernetes {e.version}): {path}: {e.message}")
    if keda:
        done = subprocess.run(
            [args.node, args.keda_script, args.node_modules],
            input=json.dumps(keda),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            problems.append(f"keda.mjs failed: {done.stderr.strip()}")
        else:
            for o, error in zip(keda, json.loads(done.stdout)):
                if error:
                    problems.append(f"{ident(o)} (KEDA CRD): {error}")
    return problems


def check_chart(objects):
    problems = []
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    pdbs = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    scalers = [
        o
        for o in objects
        if o["kind"] in ("ScaledObject", "HorizontalPodAutoscaler")
    ]
    for d in deployments:
        name = ident(d)
        pod = d["spec"]["template"]["spec"]
        labels = d["spec"]["template"]["metadata"].get("labels", {})
        component = labels.get("app.kubernetes.io/component")
        if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
            problems.append(f"{name}: pod securityContext.runAsNonRoot is not true")
        period = pod.get("terminationGracePeriodSeconds")
        if not isinstance(period, int):
            problems.append(f"{name}: no terminationGracePeriodSeconds")
        for c in pod["containers"]:
            where = f"{name} container {c['name']}"
            for probe in ("livenessProbe", "readinessProbe"):
                if probe not in c:
                    problems.append(f"{where}: no {probe}")
            resources = c.get("resources") or {}
            for bound in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in (resources.get(bound) or {}):
                        problems.append(f"{where}: no {bound}.{r}")
            if (c.get("securityContext") or {}).get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: allowPrivilegeEscalation is not false")
            env = {e["name"]: e for e in c.get("env", [])}
            url = env.get("SKED_DATABASE_URL", {})
            if "secretKeyRef" not in (url.get("valueFrom") or {}):
                problems.append(f"{where}: SKED_DATABASE_URL does not come from a Secret")
            if component == "worker" and isinstance(period, int):
                problems += check_worker_grace(where, c.get("args", []), period)
        if not any(selects(p["spec"]["selector"], labels) for p in pdbs):
            problems.append(f"{name}: no PodDisruptionBudget selects its pods")
        if component == "worker":
            if "replicas" in d["spec"]:
                problems.append(f"{name}: sets replicas, which its autoscaler owns")
            targets = [s for s in scalers if s["spec"]["scaleTargetRef"]["name"] == d["metadata"]["name"]]
            if len(targets) != 1:
                problems.append(f"{name}: scaled by {len(targets)} ScaledObject/HPA, not 1")
    for s in (o for o in objects if o["kind"] == "ScaledObject"):
        for t in s["spec"]["triggers"]:
            meta = t.get("metadata", {})
            for field in ("query", "targetQueryValue"):
                if not meta.get(field):
                    problems.append(f"{ident(s)}: trigger {t.get('type')} has no {field}")
            ref = (t.get("authenticationRef") or {}).get("name")
            if t.get("type") == "postgresql" and not any(
                o["kind"] == "TriggerAuthentication" and o["metadata"]["name"] == ref for o in objects
            ):
                problems.append(f"{ident(s)}: no TriggerAuthentication named {ref!r}")
    return problems


def check_worker_grace(where, args, period):
    """The worker's --grace plus its drain must end before the kubelet's SIGKILL."""
    if "--grace" not in args:
        return [f"{where}: no --grace"]
    grace = int(args[args.index("--grace") + 1])
    if grace + WORKER_DRAIN_SECONDS >= period:
        return [
            f"{where}: --grace {grace} s + {WORKER_DRAIN_SECONDS} s drain does not end before "
            f"terminationGracePeriodSeconds {period} s"
        ]
    return []


def selects(selector, labels):
    return bool(selector.get("matchLabels")) and all(
        labels.get(k) == v for k, v in selector["matchLabels"].items()
    )


def check_kinds(objects, expect):
    if not expect:
        return []
    got = collections.Counter(o["kind"] for o in objects)
    want = {k: int(n) for k, n in (item.split("=") for item in expect.split(","))}
    return [
        f"expected {n} {kind}, rendered {got.get(kind, 0)}"
        for kind, n in sorted(want.items())
        if got.get(kind, 0) != n
    ] + [f"rendered {n} {kind}, not expected" for kind, n in sorted(got.items()) if kind not in want]


if __name__ == "__main__":
    main()
