"""The hooks of docs/hook-contract.md's MapController (exec)."""
import json
import os
import sys

req = json.load(sys.stdin)
hook = os.environ["KUBECTL_META_HOOK"]

if hook == "tombstone":
    answer = {"outputs": []}  # keep nothing of a ConfigMap that is gone
else:
    source = req["input"]
    answer = {"outputs": [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": source["metadata"]["name"] + "-backup"},
        "data": source.get("data", {}),
    }]}
json.dump(answer, sys.stdout)
