"""Sync hook of the perturbation tests (tests/engine/perturb.rs): a Widget's ConfigMaps.

BUG (environment) plants one bug; empty is the fixed hook:
- count-status: counts what it creates from what it sees missing, adding to its status
  (a restart between writes loses creates from the count);
- count-memory: the same count kept in the server's memory (a lost answer or a conflict
  counts twice);
- memory-history: the values a Widget had, kept in the server's memory (a restart forgets);
- first-child: the leader is "the first" child of the observed JSON object, kept once chosen
  (another order picks another; fixed: the least of the names it wants);
- random-suffix: children named with a random suffix when not seen (no class shows it: the
  engine deletes the children no longer wanted and waits for its own writes to be seen);
- edge-started: status.started is set only when the hook sees spec.phase Running (an
  edge-triggered hook: it acts on a transition it must observe; when Running and Done come in
  one coalesced view it never starts; fixed: started once the phase is past Pending);
- sticky-children: a child keeps the data it was created with (as a Pod's spec does; fixed:
  every child from the current spec); a child recreated while the view of the Widget lags
  keeps the old value for good.
"""
import json
import os
import random
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUG = os.environ.get("BUG", "")
MEM = {}


def sync(req):
    p = req["parent"]
    name = p["metadata"]["name"]
    uid = p["metadata"].get("uid", name)
    spec = p.get("spec", {})
    value = str(spec.get("value", ""))
    count = int(spec.get("count", 0))
    old = p.get("status") or {}
    observed = (req.get("children") or {}).get("ConfigMap.v1") or {}
    if BUG == "random-suffix":
        names = sorted(observed)[:count]
        while len(names) < count:
            names.append(name + "-" + "".join(random.choice("bcdfghjkmnpqrstvwxz2456789") for _ in range(5)))
    else:
        names = ["%s-%d" % (name, i) for i in range(count)]
    missing = sum(1 for n in names if n not in observed)
    status = {}
    if BUG == "count-status":
        status["created"] = int(old.get("created", 0)) + missing
    elif BUG == "count-memory":
        MEM[uid] = MEM.get(uid, 0) + missing
        status["created"] = MEM[uid]
    else:
        status["created"] = len(names)
    if BUG == "memory-history":
        h = MEM.setdefault(uid, [])
        if not h or h[-1] != value:
            h.append(value)
        status["history"] = ",".join(h)
    else:
        h = [x for x in str(old.get("history", "")).split(",") if x]
        if not h or h[-1] != value:
            h.append(value)
        status["history"] = ",".join(h)
    phase = spec.get("phase")
    if phase is not None:
        started = bool(old.get("started", False))
        if BUG == "edge-started":
            started = started or phase == "Running"
        else:
            started = started or phase in ("Running", "Done")
        status["started"] = started
    if BUG == "first-child":
        leader = old.get("leader", "")
        if not leader and observed:
            leader = next(iter(observed))
    else:
        leader = min(names) if names else ""
    status["leader"] = leader
    def data(n):
        if BUG == "sticky-children" and n in observed:
            return observed[n].get("data") or {}
        return {"v": value}

    children = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": data(n)}
        for n in names
    ]
    if os.environ.get("HOOK_TRACE"):
        sys.stderr.write("hook call: rv=%s phase=%s value=%s observed=%d status=%s\n" % (p["metadata"].get("resourceVersion"), spec.get("phase"), value, len(observed), json.dumps(status)))
    return {"status": status, "children": children}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        out = json.dumps(sync(json.loads(body))).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    allow_reuse_address = True


if __name__ == "__main__":
    srv = Server(("127.0.0.1", int(sys.argv[1])), Handler)
    print("ready", flush=True)
    srv.serve_forever()
