"""SnapshotSchedule: the hook logic, as plain functions (used by exec_hook.py and server.py).

The use case of Metacontroller's MapController design: for every PersistentVolumeClaim that
matches spec.selector (in the schedule's namespace; no selector means all of them), take a
VolumeSnapshot every spec.snapshotInterval and keep each snapshot for spec.snapshotTTL, also
after the claim itself is gone. The snapshots are owned by the schedule, not by the claim:
deleting the schedule deletes them, deleting a claim does not.

Time is cut into slots of snapshotInterval counted from the Unix epoch (6h: 00:00, 06:00,
12:00 and 18:00 UTC). A claim gets one snapshot per slot, named
`<schedule>-<claim>-<slot start, UTC yyyymmddhhmmss>-<6 hex digits>`; the hex digits are a hash
of the schedule's and the claim's uids, so a claim deleted and created again under the same
name (another input, another map key) never claims the name of one of its predecessor's
snapshots. A name that would be longer than 253 characters gets its `<schedule>-<claim>` part
cut short.

map (one claim): keep every observed snapshot younger than snapshotTTL, echoed back in its
desired form (apiVersion, kind, name, our labels and annotations, spec); take a new one if none
was taken in the current slot (not for a claim that is being deleted). The age of a snapshot
comes from its annotation snapshot.example.kubectl-meta.dev/taken-at (RFC 3339, UTC), else from
metadata.creationTimestamp; a snapshot with neither is kept. resyncAfterSeconds: one second
after the next slot starts or the next kept snapshot expires, whichever is first (at most a day).

tombstone (the claim is gone): keep its snapshots that are younger than snapshotTTL; the rest
are deleted. kubectl meta dev asks again on later syncs, so they expire on time.

kubectl meta dev (like Metacontroller would) adds the label metacontroller.k8s.io/map-key, the
annotation metacontroller.k8s.io/map-input and the ControllerRef to every output itself.

Durations (snapshotInterval, snapshotTTL) are like Go's and kubectl's: a sequence of numbers
with the units d, h, m, s, such as 30s, 5m, 6h, 10d or 1h30m (decimals like 1.5h are fine),
adding up to a whole number of seconds greater than zero; snapshotTTL must be at least
snapshotInterval. Anything else is an invalid parent (ValueError): the hook call fails with the
reason, the sync fails and nothing is deleted.

Testing: "now" is the current time, unless the environment variable SNAPSHOT_SCHEDULE_NOW
holds an RFC 3339 time (e.g. SNAPSHOT_SCHEDULE_NOW=2026-11-24T10:00:00Z), which is then used
instead. Both are taken to the whole second.
"""

import copy
import hashlib
import os
import re
import time
from datetime import datetime, timezone
from fractions import Fraction

API_VERSION = "snapshot.example.kubectl-meta.dev/v1"
KIND = "VolumeSnapshot"
# The key of the observed snapshots in the request's outputs map: <Kind>.<apiVersion>.
OUTPUTS_KEY = "%s.%s" % (KIND, API_VERSION)

# Labels and annotations of ours start with this; the echo of a snapshot keeps only those.
PREFIX = "snapshot.example.kubectl-meta.dev/"
TAKEN_AT = PREFIX + "taken-at"
SCHEDULE_LABEL = PREFIX + "schedule"
PVC_LABEL = PREFIX + "pvc"

NOW_ENV = "SNAPSHOT_SCHEDULE_NOW"
MAX_NAME = 253  # a DNS-1123 subdomain, as object names are
MAX_LABEL_VALUE = 63
MAX_RESYNC = 86400  # never ask for a resync further away than a day

DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
DURATION_HELP = "use numbers with the units d, h, m, s, such as 30s, 5m, 6h, 10d or 1h30m"


def map_hook(request):
    """Desired snapshots of one claim: {outputs, resyncAfterSeconds}."""
    interval, ttl = schedule_of(request["parent"])
    pvc = request.get("input") or {}
    if pvc.get("kind") != "PersistentVolumeClaim":
        raise ValueError(
            "the input is a %s, not a PersistentVolumeClaim; this hook snapshots claims "
            "(inputResources: [{apiVersion: v1, resource: persistentvolumeclaims}])"
            % (pvc.get("kind") or "object without a kind")
        )
    now = current_time()
    slot = now - now % interval  # start of the current slot
    outputs, expiries, taken_this_slot = [], [], False
    for snapshot, taken in observed_snapshots(request):
        in_slot = taken is not None and slot <= taken < slot + interval
        taken_this_slot = taken_this_slot or in_slot
        if taken is None or in_slot or now - taken < ttl:
            outputs.append(desired_form(snapshot))
            if taken is not None:
                expiries.append(taken + ttl)
    if not taken_this_slot and not pvc["metadata"].get("deletionTimestamp"):
        outputs.append(new_snapshot(request["parent"], pvc, slot, now))
        expiries.append(now + ttl)
    resync = resync_after(now, [slot + interval] + expiries)
    return {"outputs": outputs, "resyncAfterSeconds": resync}


def tombstone(request):
    """Snapshots of a vanished claim to keep: {outputs, resyncAfterSeconds if any are kept}."""
    _, ttl = schedule_of(request["parent"])
    now = current_time()
    outputs, expiries = [], []
    for snapshot, taken in observed_snapshots(request):
        if taken is None or now - taken < ttl:
            outputs.append(desired_form(snapshot))
            if taken is not None:
                expiries.append(taken + ttl)
    response = {"outputs": outputs}
    if expiries:
        response["resyncAfterSeconds"] = resync_after(now, expiries)
    return response


def schedule_of(parent):
    """(snapshotInterval, snapshotTTL) of a SnapshotSchedule in seconds; ValueError if invalid."""
    spec = parent.get("spec") or {}
    interval = parse_duration("spec.snapshotInterval", spec.get("snapshotInterval"))
    ttl = parse_duration("spec.snapshotTTL", spec.get("snapshotTTL"))
    if ttl < interval:
        raise ValueError(
            "spec.snapshotTTL (%s) is shorter than spec.snapshotInterval (%s): every snapshot "
            "would expire before the next one is taken; make snapshotTTL at least snapshotInterval"
            % (spec["snapshotTTL"], spec["snapshotInterval"])
        )
    return interval, ttl


def parse_duration(field, value):
    """`1h30m` -> 5400 (seconds, an int > 0); ValueError naming `field` otherwise."""
    if value is None or value == "":
        raise ValueError("%s is required; %s" % (field, DURATION_HELP))
    if not isinstance(value, str):
        raise ValueError(
            "%s must be a string such as \"6h\", got %r; %s" % (field, value, DURATION_HELP)
        )
    text = value.strip()
    total, pos = Fraction(0), 0
    while pos < len(text):
        part = DURATION_PART.match(text, pos)
        if part is None:
            raise ValueError("%s: %r is not a duration; %s" % (field, value, DURATION_HELP))
        total += Fraction(part.group(1)) * UNITS[part.group(2)]
        pos = part.end()
    if not text:
        raise ValueError("%s is empty; %s" % (field, DURATION_HELP))
    if total.denominator != 1:
        raise ValueError(
            "%s: %r is not a whole number of seconds; %s" % (field, value, DURATION_HELP)
        )
    if total <= 0:
        raise ValueError("%s: %r must be longer than zero; %s" % (field, value, DURATION_HELP))
    return int(total)


def current_time():
    """Now (or $SNAPSHOT_SCHEDULE_NOW) in whole seconds since the Unix epoch."""
    pinned = os.environ.get(NOW_ENV)
    if not pinned:
        return int(time.time())
    parsed = parse_time(pinned)
    if parsed is None:
        raise ValueError(
            "%s=%r is not an RFC 3339 time; use e.g. %s=2026-11-24T10:00:00Z, or unset it"
            % (NOW_ENV, pinned, NOW_ENV)
        )
    return parsed


def parse_time(text):
    """An RFC 3339 time (`2026-11-24T10:00:00Z`) in whole seconds since the epoch, else None."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    if text[-1] in "Zz":
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() // 1)


def format_time(seconds, layout="%Y-%m-%dT%H:%M:%SZ"):
    return time.strftime(layout, time.gmtime(seconds))


def observed_snapshots(request):
    """[(snapshot, taken at in epoch seconds or None)], oldest first."""
    observed = ((request.get("outputs") or {}).get(OUTPUTS_KEY) or {}).values()
    dated = [(snapshot, taken_at(snapshot)) for snapshot in observed]
    return sorted(dated, key=lambda st: (st[1] is None, st[1] or 0, st[0]["metadata"]["name"]))


def taken_at(snapshot):
    """When a snapshot was taken: our annotation, else its creationTimestamp, else None."""
    meta = snapshot.get("metadata") or {}
    taken = parse_time((meta.get("annotations") or {}).get(TAKEN_AT))
    return taken if taken is not None else parse_time(meta.get("creationTimestamp"))


def desired_form(snapshot):
    """An observed snapshot as this hook once asked for it (no status, uid, engine labels...)."""
    meta = snapshot["metadata"]
    desired_meta = {"name": meta["name"]}
    for field in ("labels", "annotations"):
        ours = {k: v for k, v in (meta.get(field) or {}).items() if k.startswith(PREFIX)}
        if ours:
            desired_meta[field] = ours
    desired = {"apiVersion": API_VERSION, "kind": KIND, "metadata": desired_meta}
    if "spec" in snapshot:
        desired["spec"] = copy.deepcopy(snapshot["spec"])
    return desired


def new_snapshot(schedule, pvc, slot, now):
    """A VolumeSnapshot of `pvc` for the slot starting at `slot`, taken `now`."""
    schedule_name, pvc_name = schedule["metadata"]["name"], pvc["metadata"]["name"]
    labels = {}
    # Label values are at most 63 characters; longer names are left out (the spec has the claim).
    for key, value in ((SCHEDULE_LABEL, schedule_name), (PVC_LABEL, pvc_name)):
        if len(value) <= MAX_LABEL_VALUE:
            labels[key] = value
    metadata = {
        "name": snapshot_name(schedule, pvc, slot),
        "annotations": {TAKEN_AT: format_time(now)},
    }
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {"source": {"persistentVolumeClaimName": pvc_name}},
    }


def snapshot_name(schedule, pvc, slot):
    """`<schedule>-<claim>-<yyyymmddhhmmss>-<hash>`, at most 253 characters, lowercase."""
    identity = "%s/%s" % (uid_or_name(schedule), uid_or_name(pvc))
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:6]
    suffix = "-%s-%s" % (format_time(slot, "%Y%m%d%H%M%S"), digest)
    prefix = ("%s-%s" % (schedule["metadata"]["name"], pvc["metadata"]["name"])).lower()
    # Object names are DNS-1123 subdomains, so only a cut can leave a '-' or '.' at the end.
    return prefix[: MAX_NAME - len(suffix)].rstrip("-.") + suffix


def uid_or_name(obj):
    meta = obj.get("metadata") or {}
    return meta.get("uid") or "%s/%s" % (meta.get("namespace", ""), meta.get("name", ""))


def resync_after(now, moments):
    """Seconds from `now` to one second after the first of `moments` still ahead (max a day)."""
    ahead = [m - now for m in moments if m > now]
    wait = min(ahead) + 1 if ahead else 1
    return float(min(wait, MAX_RESYNC))


# Hook name (as in KUBECTL_META_HOOK and the server's URL path) -> function.
HOOKS = {"map": map_hook, "tombstone": tombstone}
