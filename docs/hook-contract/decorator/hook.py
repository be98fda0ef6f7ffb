"""The hooks of docs/hook-contract.md's DecoratorController (exec)."""
import json
import os
import sys

req = json.load(sys.stdin)
hook = os.environ["KUBECTL_META_HOOK"]
target = req["object"]
name = target["metadata"]["name"]

if hook == "finalize":
    left = len(req["attachments"]["Service.v1"])
    answer = {"attachments": [], "labels": {"demo.example.com/exposed": None},
              "finalized": left == 0}
else:
    answer = {
        "labels": {"demo.example.com/exposed": "true"},
        "annotations": {"demo.example.com/service": name},
        "attachments": [{
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": target["metadata"]["namespace"]},
            "spec": {"selector": target["spec"]["selector"]["matchLabels"],
                     "ports": [{"port": 80, "targetPort": 80}]},
        }],
    }
json.dump(answer, sys.stdout)
