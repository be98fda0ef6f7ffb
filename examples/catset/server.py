#!/usr/bin/env python3
"""catset hooks, webhook form: a small HTTP server for webhook/controller.yaml.

    python3 server.py [--port PORT]        (default: $PORT, else 8082; listens on 127.0.0.1)

Routes: POST /sync and POST /finalize (request JSON in, response JSON out) and GET /healthz.
One line per request on stderr. A bad request gets 400, an invalid parent or a bug in the
hook 500 with the reason in the body: the sync fails and nothing is changed.
"""

import argparse
import json
import os
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

sys.dont_write_bytecode = True  # keep the example directory free of __pycache__
import hook  # noqa: E402  (the logic, shared with exec_hook.py)

DEFAULT_PORT = 8082


class Handler(BaseHTTPRequestHandler):
    server_version = "catset-hooks/1"

    def do_GET(self):
        start = time.monotonic()
        if urlsplit(self.path).path == "/healthz":
            self._reply(start, 200, "ok\n")
        else:
            self._reply(start, 404, "not found: GET %s (try GET /healthz)\n" % self.path)

    def do_POST(self):
        start = time.monotonic()
        name = urlsplit(self.path).path.strip("/")
        handler = hook.HOOKS.get(name)
        if handler is None:
            routes = ", ".join("/" + h for h in sorted(hook.HOOKS))
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
    """`namespace/name` (or `name`) of the parent a request is about, for the log."""
    parent = request.get("parent") if isinstance(request, dict) else None
    meta = (parent.get("metadata") if isinstance(parent, dict) else None) or {}
    name = meta.get("name", "")
    return "%s/%s" % (meta["namespace"], name) if meta.get("namespace") else name


def main():
    parser = argparse.ArgumentParser(description="The catset hooks as an HTTP server on 127.0.0.1.")
    parser.add_argument(
        "--port",
        type=int,
        default=os.environ.get("PORT", str(DEFAULT_PORT)),
        help="port to listen on (default: $PORT, else %d)" % DEFAULT_PORT,
    )
    args = parser.parse_args()
    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    except OSError as e:
        print("server.py: cannot listen on 127.0.0.1:%d: %s (use --port)" % (args.port, e), file=sys.stderr)
        return 1
    routes = ", ".join("POST /" + h for h in sorted(hook.HOOKS))
    print(
        "catset hooks listening on http://127.0.0.1:%d (%s, GET /healthz)" % (args.port, routes),
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


if __name__ == "__main__":
    sys.exit(main())
