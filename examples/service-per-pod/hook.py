"""service-per-pod: the hook logic, as plain functions (used by exec_hook.py and server.py).

After Metacontroller's service-per-pod example. The DecoratorController decorates every
StatefulSet annotated `service-per-pod-label` with one Service per ordinal (0..spec.replicas-1)
named `<statefulset>-<ordinal>`, selecting the Pod whose label named by that annotation
(normally `statefulset.kubernetes.io/pod-name`, which the StatefulSet controller puts on each
Pod) is `<statefulset>-<ordinal>`. Ports come from the annotation `service-per-pod-ports`
(`port:targetPort,...`, default `80:80`).

sync: the desired Services (kubectl meta dev adds the ControllerRef and the annotation
metacontroller.k8s.io/decorator-controller to each), plus a label on the StatefulSet saying how
many Services it has. finalize (the annotation was removed, or the StatefulSet is being deleted):
no Services, and finalized once none is left.
"""

DEFAULT_LABEL = "statefulset.kubernetes.io/pod-name"


def ports(annotation):
    """`80:8080,443` -> [{port: 80, targetPort: 8080}, {port: 443, targetPort: 443}]."""
    out = []
    for part in (annotation or "80:80").split(","):
        part = part.strip()
        if not part:
            continue
        port, _, target = part.partition(":")
        try:
            out.append({"port": int(port), "targetPort": int(target or port)})
        except ValueError:
            raise ValueError("service-per-pod-ports: %r is not port[:targetPort]" % part)
    return out


def sync(request):
    """Desired state for one StatefulSet: {labels, attachments}."""
    sts = request["object"]
    meta = sts["metadata"]
    name = meta["name"]
    annotations = meta.get("annotations") or {}
    label = annotations.get("service-per-pod-label") or DEFAULT_LABEL
    replicas = (sts.get("spec") or {}).get("replicas")
    replicas = 1 if replicas is None else int(replicas)
    services = []
    for i in range(replicas):
        pod = "%s-%d" % (name, i)
        services.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": pod, "labels": {"app": "service-per-pod"}},
                "spec": {
                    "selector": {label: pod},
                    "ports": ports(annotations.get("service-per-pod-ports")),
                },
            }
        )
    return {
        "labels": {"service-per-pod/services": str(replicas)},
        "attachments": services,
    }


def finalize(request):
    """Remove every Service; finalized once none is observed any more."""
    observed = (request.get("attachments") or {}).get("Service.v1") or {}
    return {
        "labels": {"service-per-pod/services": None},
        "attachments": [],
        "finalized": len(observed) == 0,
    }


# Hook name (as in KUBECTL_META_HOOK and the server's URL path) -> function.
HOOKS = {"sync": sync, "finalize": finalize}
