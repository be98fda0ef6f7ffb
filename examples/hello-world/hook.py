"""HelloWorld: the hook logic, as plain functions (used by exec_hook.py and server.py).

sync: one Pod named after the parent that echoes "Hello, <spec.who>!"; the parent's status
reports how many Pods were observed. The controller uses generateSelector, so the Pod needs no
labels: kubectl meta dev (like Metacontroller) adds controller-uid: <parent uid> itself.
"""


def sync(request):
    """Desired state for one HelloWorld: {status, children}."""
    parent = request["parent"]
    name = parent["metadata"]["name"]
    who = (parent.get("spec") or {}).get("who") or "World"
    observed_pods = (request.get("children") or {}).get("Pod.v1") or {}

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "OnFailure",
            "containers": [
                {
                    "name": "hello",
                    "image": "busybox",
                    "command": ["echo", "Hello, %s!" % who],
                }
            ],
        },
    }
    # Status reports what was observed, not what is about to be created.
    return {"status": {"replicas": len(observed_pods)}, "children": [pod]}


# Hook name (as in KUBECTL_META_HOOK and the server's URL path) -> function.
HOOKS = {"sync": sync}
