"""ConfigMapPropagation: the hook logic, as plain functions (used by exec_hook.py and server.py).

customize: the source ConfigMap is a related object, so sync receives it (in request.related)
and is called again whenever it changes.
sync: a copy of the source's data and binaryData in every target namespace, with the source's
name. The parent is cluster-scoped, so every child names its namespace, and the request keys
namespaced objects as "namespace/name". The source namespace itself is skipped (the copy
would be the source). If the source is gone, so are the copies.
"""


def customize(request):
    """Related objects for one parent: {relatedResources}."""
    name, namespace, _ = source_and_targets(request["parent"])
    return {
        "relatedResources": [
            {"apiVersion": "v1", "resource": "configmaps", "namespace": namespace, "names": [name]}
        ]
    }


def sync(request):
    """Desired state for one parent: {status, children}."""
    name, namespace, targets = source_and_targets(request["parent"])
    related = (request.get("related") or {}).get("ConfigMap.v1") or {}
    source = next(
        (
            cm
            for cm in related.values()
            if cm["metadata"]["name"] == name and cm["metadata"].get("namespace") == namespace
        ),
        None,
    )
    observed = (request.get("children") or {}).get("ConfigMap.v1") or {}
    actual = sum(
        1
        for cm in observed.values()
        if cm["metadata"]["name"] == name and cm["metadata"].get("namespace") in targets
    )
    children = [] if source is None else [copy_of(source, target) for target in targets]
    return {
        "status": {"expectedCopies": len(targets), "actualCopies": actual},
        "children": children,
    }


def source_and_targets(parent):
    """(sourceName, sourceNamespace, target namespaces without duplicates or the source's)."""
    spec = parent.get("spec") or {}
    name, namespace = spec.get("sourceName"), spec.get("sourceNamespace")
    if not name or not namespace:
        raise ValueError("spec.sourceName and spec.sourceNamespace are required")
    targets = []
    for target in spec.get("targetNamespaces") or []:
        if target and target != namespace and target not in targets:
            targets.append(target)
    return name, namespace, targets


def copy_of(source, namespace):
    """The copy in `namespace`: only the fields this controller manages."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": source["metadata"]["name"], "namespace": namespace},
    }
    # Absent when empty, so that a source emptied later removes the keys from the copies too.
    for field in ("data", "binaryData"):
        if source.get(field):
            cm[field] = dict(source[field])
    return cm


# Hook name (as in KUBECTL_META_HOOK and the server's URL path) -> function.
HOOKS = {"customize": customize, "sync": sync}
