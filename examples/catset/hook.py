"""CatSet: the hook logic, as plain functions (used by exec_hook.py and server.py).

A StatefulSet-like set of pods, after Metacontroller's catset example:

- Pods are named <catset>-<ordinal>. Pod N is created only once pods 0..N-1 are Running and
  Ready, one per sync (the next sync comes when the simulated kubelet, or a real one, marks
  the new pod Ready).
- Each pod gets one PersistentVolumeClaim per spec.volumeClaimTemplates entry, named
  <template>-<catset>-<ordinal> and mounted as the volume <template>. Claims are kept when
  the set scales down (like a StatefulSet) and go away with the CatSet (garbage collection).
- Scale down removes the highest ordinal first, one pod at a time, once all the wanted pods
  are Ready.
- Pods are listed highest ordinal first: that is the order of a RollingRecreate rollout.
- finalize (the CatSet is being deleted): the same with zero replicas, so pods are deleted
  highest first, one at a time; finalized once no pod is left.

Children carry the labels of spec.template.metadata.labels, which must match spec.selector.
"""

import copy
import re

ORDINAL = re.compile(r"^(.*)-(\d+)$")


def sync(request):
    """Desired state for one CatSet: {status, children} (plus finalized when finalizing)."""
    catset = request["parent"]
    name = catset["metadata"]["name"]
    spec = catset.get("spec") or {}
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ValueError("spec.replicas must be a non-negative integer, got %r" % (replicas,))
    if not isinstance(spec.get("template"), dict):
        raise ValueError("spec.template (the pod template) is required")
    finalizing = bool(request.get("finalizing"))
    children = request.get("children") or {}
    all_pods = list((children.get("Pod.v1") or {}).values())
    observed_pvcs = list((children.get("PersistentVolumeClaim.v1") or {}).values())

    # Observed pods by ordinal (a pod not named <catset>-<N> is not wanted: it is deleted).
    pods = {}
    for pod in all_pods:
        ordinal = ordinal_of(name, pod["metadata"]["name"])
        if ordinal is not None:
            pods[ordinal] = pod

    wanted = 0 if finalizing else replicas
    # Pods 0..ready-1 are all Ready.
    ready = 0
    while ready < wanted and is_ready(pods.get(ready)):
        ready += 1

    # Keep every existing pod, add the first missing one once all lower ordinals are Ready.
    desired = {ordinal: new_pod(catset, ordinal) for ordinal in pods}
    if ready < wanted and ready not in desired:
        desired[ready] = new_pod(catset, ready)
    # Scale down (or tear down) from the highest ordinal, one at a time, once the wanted pods
    # are all Ready. A pod that is still terminating keeps the next one alive.
    surplus = [ordinal for ordinal in desired if ordinal >= wanted]
    if ready == wanted and surplus:
        del desired[max(surplus)]

    response = {
        "status": {
            "replicas": len(pods),
            "readyReplicas": sum(1 for pod in pods.values() if is_ready(pod)),
        },
        "children": [desired[ordinal] for ordinal in sorted(desired, reverse=True)],
    }
    response["children"] += claims(catset, sorted(desired), observed_pvcs)
    if finalizing:
        # Done only when the pods are really gone, not when their deletion was asked for.
        response["finalized"] = not all_pods
    return response


def finalize(request):
    """Ordered teardown: sync() with zero replicas (the request has finalizing: true)."""
    return sync(request)


def ordinal_of(base, name):
    """N for a name <base>-N, else None."""
    match = ORDINAL.match(name)
    if match and match.group(1) == base:
        return int(match.group(2))
    return None


def is_ready(pod):
    """Running, Ready and not being deleted."""
    if not pod or pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def pod_labels(catset):
    return ((catset["spec"]["template"].get("metadata") or {}).get("labels")) or {}


def claim_templates(catset):
    return catset["spec"].get("volumeClaimTemplates") or []


def claim_name(template, catset_name, ordinal):
    return "%s-%s-%d" % (template["metadata"]["name"], catset_name, ordinal)


def new_pod(catset, ordinal):
    """Pod <catset>-<ordinal> from spec.template, with its claims mounted."""
    name = catset["metadata"]["name"]
    template = copy.deepcopy(catset["spec"]["template"])
    pod_name = "%s-%d" % (name, ordinal)
    metadata = template.get("metadata") or {}
    metadata["name"] = pod_name
    pod_spec = template.get("spec") or {}
    pod_spec["hostname"] = pod_name
    if catset["spec"].get("serviceName"):
        pod_spec["subdomain"] = catset["spec"]["serviceName"]
    claim_volumes = [
        {
            "name": t["metadata"]["name"],
            "persistentVolumeClaim": {"claimName": claim_name(t, name, ordinal)},
        }
        for t in claim_templates(catset)
    ]
    if claim_volumes:
        # A claim template replaces a template volume of the same name (as in a StatefulSet).
        claimed = {v["name"] for v in claim_volumes}
        volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in claimed]
        pod_spec["volumes"] = volumes + claim_volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def claims(catset, pod_ordinals, observed_pvcs):
    """The claims of the desired pods, plus every existing claim (kept after scale down)."""
    name = catset["metadata"]["name"]
    observed_names = {pvc["metadata"]["name"] for pvc in observed_pvcs}
    result = []
    for template in claim_templates(catset):
        if not (template.get("metadata") or {}).get("name"):
            raise ValueError("every spec.volumeClaimTemplates entry needs metadata.name")
        base = "%s-%s" % (template["metadata"]["name"], name)
        kept = {ordinal_of(base, n) for n in observed_names} - {None}
        for ordinal in sorted(set(pod_ordinals) | kept):
            result.append(new_claim(catset, template, claim_name(template, name, ordinal)))
    return result


def new_claim(catset, template, claim):
    """A PersistentVolumeClaim from a claim template, labelled like the pods."""
    template_meta = template.get("metadata") or {}
    # The pod labels win: they are the ones that match spec.selector.
    labels = dict(template_meta.get("labels") or {})
    labels.update(pod_labels(catset))
    metadata = {"name": claim}
    if labels:
        metadata["labels"] = labels
    if template_meta.get("annotations"):
        metadata["annotations"] = copy.deepcopy(template_meta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


# Hook name (as in KUBECTL_META_HOOK and the server's URL path) -> function.
HOOKS = {"sync": sync, "finalize": finalize}
