"""The hooks of docs/hook-contract.md's CompositeController (exec: request on stdin, answer on
stdout, the hook's name in KUBECTL_META_HOOK)."""
import json
import os
import sys

req = json.load(sys.stdin)
hook = os.environ["KUBECTL_META_HOOK"]
parent = req["parent"]
name = parent["metadata"]["name"]

if hook == "customize":
    answer = {"relatedResources": [{"apiVersion": "v1", "resource": "configmaps",
                                    "names": ["site-defaults"]}]}
elif hook == "finalize":
    left = sum(len(req["children"][t]) for t in req["children"])
    answer = {"children": [], "finalized": left == 0}
else:
    theme = req["related"]["ConfigMap.v1"].get("site-defaults", {}).get("data", {}).get("theme", "light")
    labels = {"app": name}
    answer = {
        "status": {"configMaps": len(req["children"]["ConfigMap.v1"]),
                   "readyReplicas": sum(d.get("status", {}).get("readyReplicas", 0)
                                        for d in req["children"]["Deployment.apps/v1"].values())},
        "children": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name + "-content"},
             "data": {"index.html": parent["spec"].get("content", ""), "theme": theme}},
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": name},
             "spec": {"replicas": parent["spec"].get("replicas", 1),
                      "selector": {"matchLabels": labels},
                      "template": {"metadata": {"labels": labels},
                                   "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}},
        ],
    }
json.dump(answer, sys.stdout)
