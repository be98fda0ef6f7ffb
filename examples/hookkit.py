"""The plumbing every example's hooks share: serving them over HTTP, or running one per call.

An example keeps its logic in hook.py as plain functions, `HOOKS = {"sync": sync, ...}`, and
two short entry points call this module:

- exec_hook.py: `sys.exit(hookkit.exec_main(hook.HOOKS))`. kubectl meta dev runs it once per
  hook call, request JSON on stdin, the hook's name in KUBECTL_META_HOOK; the response JSON
  goes to stdout. On an error it writes the reason to stderr and exits 1: the sync fails,
  nothing is changed, and the parent gets a SyncError event.
- server.py: `sys.exit(hookkit.serve_main("hello-world", hook.HOOKS, 8081))`. POST /<hook>
  (request JSON in, response JSON out) and GET /healthz on 127.0.0.1, one line per request on
  stderr. A bad request gets 400, an invalid parent or a bug in the hook 500 with the reason in
  the body: the sync fails and nothing is changed.

Standard library only.
"""

import argparse
import json
import os
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

sys.dont_write_bytecode = True  # keep the example directories free of __pycache__


class Handler(BaseHTTPRequestHandler):
    server_version = "kubectl-meta-example-hooks/1"
    hooks = {}  # set by serve()

    def do_GET(self):
        start = time.monotonic()
        if urlsplit(self.path).path == "/healthz":
            self._reply(start, 200, "ok\n")
        else:
            self._reply(start, 404, "not found: GET %s (try GET /healthz)\n" % self.path)

    def do_POST(self):
        start = time.monotonic()
        name = urlsplit(self.path).path.strip("/")
        handler = self.hooks.get(name)
        if handler is None:
            routes = ", ".join("/" + h for h in sorted(self.hooks))
            self._reply(start, 404, "not found: POST %s (routes: %s)\n" % (self.path, routes))
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._reply(start, 411, "a Content-Length header is required\n")
            return
        try:
            request = json.loads(self.rfile.read(int(length)))
        except ValueError as e:
            self._reply(start, 400, "the request body is not JSON: %s\n" % e)
            return
        subject = describe(request)
        try:
            response = handler(request)
        except ValueError as e:  # an invalid parent: say why, without a traceback
            self._reply(start, 500, "%s: %s\n" % (name, e), subject)
            return
        except Exception:  # a bug in the hook: the traceback is the best report
            self._reply(start, 500, traceback.format_exc(), subject)
            return
        self._reply(start, 200, json.dumps(response), subject, "application/json")

    def _reply(self, start, status, body, subject="", content_type="text/plain; charset=utf-8"):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        line = "%s %s %s%s %.1fms" % (
            self.command,
            self.path,
            status,
            " " + subject if subject else "",
            (time.monotonic() - start) * 1000,
        )
        if status >= 400:
            line += ": " + body.strip().splitlines()[-1]
        print(line, file=sys.stderr, flush=True)

    def log_request(self, code="-", size="-"):
        pass  # _reply logs one line per request instead


def describe(request):
    """`namespace/name` (or `name`) of the parent (or decorator target) a request is about."""
    parent = (request.get("parent") or request.get("object")) if isinstance(request, dict) else None
    meta = (parent.get("metadata") if isinstance(parent, dict) else None) or {}
    name = meta.get("name", "")
    return "%s/%s" % (meta["namespace"], name) if meta.get("namespace") else name


def serve_main(example, hooks, default_port):
    """Serve `hooks` over HTTP on 127.0.0.1 (port from --port, $PORT, else `default_port`)."""
    parser = argparse.ArgumentParser(description="The %s hooks as an HTTP server on 127.0.0.1." % example)
    parser.add_argument(
        "--port",
        type=int,
        default=os.environ.get("PORT", str(default_port)),
        help="port to listen on (default: $PORT, else %d)" % default_port,
    )
    args = parser.parse_args()
    handler = type("Handler", (Handler,), {"hooks": hooks, "server_version": "%s-hooks/1" % example})
    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    except OSError as e:
        print("server.py: cannot listen on 127.0.0.1:%d: %s (use --port)" % (args.port, e), file=sys.stderr)
        return 1
    routes = ", ".join("POST /" + h for h in sorted(hooks))
    print(
        "%s hooks listening on http://127.0.0.1:%d (%s, GET /healthz)" % (example, args.port, routes),
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def exec_main(hooks):
    """Run the hook named by KUBECTL_META_HOOK once: request on stdin, response on stdout."""
    name = os.environ.get("KUBECTL_META_HOOK", "")
    handler = hooks.get(name)
    if handler is None:
        print(
            "exec_hook.py: KUBECTL_META_HOOK=%r is not a hook of this example (expected one of: %s)"
            % (name, ", ".join(sorted(hooks))),
            file=sys.stderr,
        )
        return 1
    try:
        request = json.load(sys.stdin)
    except ValueError as e:
        print("exec_hook.py: the %s request on stdin is not JSON: %s" % (name, e), file=sys.stderr)
        return 1
    try:
        response = handler(request)
    except ValueError as e:  # an invalid parent: say why, without a traceback
        print("%s: %s" % (name, e), file=sys.stderr)
        return 1
    except Exception:  # a bug in the hook: the traceback is the best report
        traceback.print_exc()
        return 1
    json.dump(response, sys.stdout)
    sys.stdout.write("\n")
    return 0
