"""The hook kit: the request and answer shapes, the children-map key helper, and the plumbing
that runs a hook once per call (exec) or serves it over HTTP (webhook). Standard library only.

    python3 hook/hook.py                       exec: one call; the request JSON on stdin, the
                                               hook's name in KUBECTL_META_HOOK, the answer on stdout
    python3 hook/hook.py --serve [HOST:]PORT   webhook: POST /<hook>, GET /healthz (127.0.0.1 by default)
"""

import json
import os
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, TypedDict

sys.dont_write_bytecode = True  # no __pycache__ next to the hook

Object = Dict[str, Any]
# Observed objects by type, then by name: {"ConfigMap.v1": {"sample": {...}}}. Every declared
# type is present, even with nothing observed. Look a type up with child_key(), never by hand.
ObjectMap = Dict[str, Dict[str, Object]]


def child_key(kind: str, api_version: str) -> str:
    """The key of a type in a request's object maps: `Kind.version` for the core group
    (`ConfigMap.v1`), `Kind.group/version` otherwise (`Deployment.apps/v1`)."""
    return "%s.%s" % (kind, api_version)


def string_fields(spec: Optional[Object]) -> Dict[str, str]:
    """The string-valued fields of a spec (e.g. as a ConfigMap's data)."""
    return {k: v for k, v in (spec or {}).items() if isinstance(v, str)}


class SyncRequest(TypedDict):
    """CompositeController sync: the parent and its children as observed."""

    controller: Object
    parent: Object
    children: ObjectMap
    related: ObjectMap
    finalizing: bool


class SyncResponse(TypedDict, total=False):
    """CompositeController answer: the parent's status and every child it should have."""

    status: Object
    children: List[Object]
    resyncAfterSeconds: float
    finalized: bool


class DecoratorRequest(TypedDict):
    """DecoratorController sync: the target object and its attachments as observed."""

    controller: Object
    object: Object
    attachments: ObjectMap
    related: ObjectMap
    finalizing: bool


class DecoratorResponse(TypedDict, total=False):
    """DecoratorController answer: labels and annotations merged into the target (a None value
    removes a key), its status (None: leave it alone), every attachment it should have."""

    labels: Dict[str, Optional[str]]
    annotations: Dict[str, Optional[str]]
    status: Optional[Object]
    attachments: List[Object]
    resyncAfterSeconds: float
    finalized: bool


class MapRequest(TypedDict):
    """MapController map: one input object and the outputs already made from it."""

    controller: Object
    parent: Object
    mapKey: str
    input: Object
    outputs: ObjectMap


class MapResponse(TypedDict, total=False):
    """MapController answer: every output this input should have."""

    outputs: List[Object]
    resyncAfterSeconds: float


Hooks = Dict[str, Callable[[Any], Any]]


def main(hooks: Hooks) -> None:
    """Serve `hooks` (`--serve [HOST:]PORT`) or answer one exec call."""
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        sys.exit(serve(hooks, sys.argv[2]))
    sys.exit(run_once(hooks))


def run_once(hooks: Hooks) -> int:
    """Exec: the hook named by KUBECTL_META_HOOK, request on stdin, answer on stdout. An error
    goes to stderr with exit code 1: the sync fails and nothing is changed."""
    name = os.environ.get("KUBECTL_META_HOOK", "")
    hook = hooks.get(name)
    if hook is None:
        print("KUBECTL_META_HOOK=%r is not one of: %s" % (name, ", ".join(sorted(hooks))), file=sys.stderr)
        return 1
    try:
        request = json.load(sys.stdin)
    except ValueError as e:
        print("the %s request on stdin is not JSON: %s" % (name, e), file=sys.stderr)
        return 1
    try:
        answer = hook(request)
    except Exception:  # a bug in the hook: the traceback is the best report
        traceback.print_exc()
        return 1
    json.dump(answer, sys.stdout)
    sys.stdout.write("\n")
    return 0


def serve(hooks: Hooks, address: str) -> int:
    """Webhook: POST /<hook> (request JSON in, answer JSON out), GET /healthz."""
    host, _, port = address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self._reply(200 if self.path == "/healthz" else 404, "ok\n" if self.path == "/healthz" else "not found\n")

        def do_POST(self):
            hook = hooks.get(self.path.strip("/"))
            if hook is None:
                self._reply(404, "no hook at %s (hooks: %s)\n" % (self.path, ", ".join(sorted(hooks))))
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                answer = json.dumps(hook(request))
            except Exception:  # a bad request or a bug in the hook: the sync fails, nothing changes
                self._reply(500, traceback.format_exc())
                return
            self._reply(200, answer, "application/json")

        def _reply(self, status, body, content_type="text/plain; charset=utf-8"):
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):
            print("%s %s" % (self.address_string(), format % args), file=sys.stderr, flush=True)

    server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
    print("hooks listening on http://%s:%s (POST /%s, GET /healthz)" % (host or "127.0.0.1", port, ", /".join(sorted(hooks))), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
