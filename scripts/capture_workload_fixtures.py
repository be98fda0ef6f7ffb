#!/usr/bin/env python3
"""Capture the statuses kube-controller-manager writes for the workloads of
crates/kube-sandbox/tests/fixtures/real-workloads/objects.yaml, on a real control plane without kubelet or
scheduler (../shared/real-apiserver), into crates/kube-sandbox/tests/fixtures/real-workloads/<kind>-<name>.json.

It stands in for the scheduler and the kubelet as the sandbox simulates them: one Ready Node
`sandbox-node` (its Lease renewed), every Pod bound to it (pods/binding), then given the status
a kubelet writes (pods/status): Running and Ready, or for a Job's Pods Succeeded (exit 0) or
Failed (the exit code of the annotation sandbox.kubectl-meta.io/exit-code).

    KC=$(bash ../shared/real-apiserver/start.sh)
    python3 scripts/capture_workload_fixtures.py --kubeconfig "$KC"

tests/sandbox/sandbox_workloads.rs runs the same objects on the sandbox and compares field by field.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "crates", "kube-sandbox", "tests", "fixtures", "real-workloads")
NS = "wl"
NODE = "sandbox-node"
EXIT_ANNOTATION = "sandbox.kubectl-meta.io/exit-code"


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Kube:
    def __init__(self, kubeconfig):
        self.base = ["kubectl", "--kubeconfig", kubeconfig]

    def run(self, *args, stdin=None, check=True):
        p = subprocess.run(self.base + list(args), input=stdin, capture_output=True, text=True)
        if check and p.returncode != 0:
            sys.exit(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def json(self, *args):
        return json.loads(self.run(*args, "-o", "json"))

    def apply(self, obj):
        self.run("apply", "--server-side", "-f", "-", stdin=json.dumps(obj))

    def patch_status(self, kind, name, patch, ns=None):
        args = ["patch", kind, name, "--subresource=status", "--type=merge", "-p", json.dumps(patch)]
        if ns:
            args += ["-n", ns]
        self.run(*args, check=False)


def node_status():
    t = now()
    return {"status": {
        "conditions": [
            {"type": c, "status": "False", "reason": r, "message": m,
             "lastHeartbeatTime": t, "lastTransitionTime": t}
            for c, r, m in [
                ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available")]
        ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady",
              "message": "kubelet is posting ready status", "lastHeartbeatTime": t,
              "lastTransitionTime": t}],
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                      {"type": "Hostname", "address": NODE}],
    }}


def renew(k):
    k.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": NODE, "namespace": "kube-node-lease"},
             "spec": {"holderIdentity": NODE, "leaseDurationSeconds": 40, "renewTime": now_micro()}})
    k.patch_status("node", NODE, node_status())


def pod_status(pod):
    t = now()
    owner = next((o["kind"] for o in pod["metadata"].get("ownerReferences", []) if o.get("controller")), "")
    containers = pod["spec"]["containers"]
    cond = lambda typ, st, reason=None: dict(
        {"type": typ, "status": st, "lastProbeTime": None, "lastTransitionTime": t},
        **({"reason": reason} if reason else {}))
    base = {"hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": "10.244.0.10",
            "podIPs": [{"ip": "10.244.0.10"}], "startTime": t}
    if owner == "Job":
        code = int(pod["metadata"].get("annotations", {}).get(EXIT_ANNOTATION, "0"))
        phase = "Failed" if code else "Succeeded"
        reason = "Error" if code else "Completed"
        term = {"exitCode": code, "reason": reason, "startedAt": t, "finishedAt": t}
        return {"status": dict(base, phase=phase, conditions=[
            cond("PodReadyToStartContainers", "False"), cond("Initialized", "True", "PodCompleted"),
            cond("Ready", "False", "PodCompleted"), cond("ContainersReady", "False", "PodCompleted"),
            cond("PodScheduled", "True")],
            containerStatuses=[{"name": c["name"], "image": c["image"], "imageID": "", "ready": False,
                                "started": False, "restartCount": 0, "state": {"terminated": term}}
                               for c in containers])}
    return {"status": dict(base, phase="Running", conditions=[
        cond("PodReadyToStartContainers", "True"), cond("Initialized", "True"), cond("Ready", "True"),
        cond("ContainersReady", "True"), cond("PodScheduled", "True")],
        containerStatuses=[{"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                            "started": True, "restartCount": 0, "state": {"running": {"startedAt": t}}}
                           for c in containers])}


def kubelet_pass(k):
    for pod in k.json("get", "pods", "-n", NS)["items"]:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp"):
            # its containers have stopped: the kubelet deletes it for good
            k.run("delete", "pod", name, "-n", NS, "--grace-period=0", "--force", "--wait=false",
                  check=False)
            continue
        if not pod["spec"].get("nodeName"):
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": NS},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}
            k.run("create", "--raw", f"/api/v1/namespaces/{NS}/pods/{name}/binding", "-f", "-",
                  stdin=json.dumps(binding), check=False)
            continue
        if pod.get("status", {}).get("phase", "Pending") == "Pending":
            k.patch_status("pod", name, pod_status(pod), ns=NS)


def cond(obj, typ):
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == typ), {})


def settled(k):
    st = lambda kind, name: k.json("get", kind, name, "-n", NS)
    rs, dep, ds = st("rs", "rs"), st("deploy", "web"), st("ds", "ds")
    jobs = [st("job", n) for n in ("job", "ijob", "fail")]
    return (rs["status"].get("readyReplicas") == 2 and rs["status"].get("availableReplicas") == 2
            and dep["status"].get("availableReplicas") == 2
            and cond(dep, "Progressing").get("reason") == "NewReplicaSetAvailable"
            and ds["status"].get("numberAvailable") == 1
            and cond(jobs[0], "Complete").get("status") == "True"
            and cond(jobs[1], "Complete").get("status") == "True"
            and cond(jobs[2], "Failed").get("status") == "True"
            and not any(p["metadata"].get("finalizers") for p in k.json("get", "pods", "-n", NS)["items"]))


def strip(obj):
    obj["metadata"].pop("managedFields", None)
    return obj


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    k = Kube(a.kubeconfig)
    k.run("delete", "namespace", NS, "--ignore-not-found", "--wait=false")
    while k.run("get", "namespace", NS, "--ignore-not-found"):
        k.run("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", check=False)
        time.sleep(0.5)
    k.run("delete", "node", NODE, "--ignore-not-found")
    k.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {
        "kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}})
    renew(k)
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    while not k.run("get", "sa", "default", "-n", NS, check=False):
        time.sleep(0.2)
    k.run("apply", "-f", os.path.join(FIX, "objects.yaml"))
    deadline = time.time() + a.timeout
    while not settled(k):
        if time.time() > deadline:
            sys.exit("workloads did not settle")
        renew(k)
        kubelet_pass(k)
        time.sleep(0.5)
    time.sleep(2)  # let any last status write land
    out = {}
    for kind, name in [("replicaset", "rs"), ("deployment", "web"), ("daemonset", "ds"),
                       ("job", "job"), ("job", "ijob"), ("job", "fail")]:
        out[f"{kind}-{name}"] = strip(k.json("get", kind, name, "-n", NS))
    dep_uid = out["deployment-web"]["metadata"]["uid"]
    for rs in k.json("get", "rs", "-n", NS)["items"]:
        if any(o["uid"] == dep_uid for o in rs["metadata"].get("ownerReferences", [])):
            out["replicaset-of-web"] = strip(rs)
    pods = k.json("get", "pods", "-n", NS)["items"]
    by_owner = {}
    for p in pods:
        for o in p["metadata"].get("ownerReferences", []):
            by_owner.setdefault(o["uid"], []).append(p)
    for key in ("daemonset-ds", "job-ijob", "replicaset-rs"):
        mine = by_owner.get(out[key]["metadata"]["uid"], [])
        mine.sort(key=lambda p: p["metadata"]["name"])
        if mine:
            out["pod-of-" + key] = strip(mine[0])
    version = json.loads(k.run("version", "-o", "json", check=False) or "{}").get("serverVersion", {})
    for name, obj in out.items():
        with open(os.path.join(FIX, f"{name}.json"), "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")
    with open(os.path.join(FIX, "SOURCE"), "w") as f:
        f.write(f"captured {now()} from kube-apiserver + kube-controller-manager "
                f"{version.get('gitVersion', '?')} by scripts/capture_workload_fixtures.py\n")
    print(f"wrote {len(out)} fixtures to {os.path.normpath(FIX)}")


if __name__ == "__main__":
    main()
