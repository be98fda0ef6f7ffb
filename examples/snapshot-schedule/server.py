#!/usr/bin/env python3
"""snapshot-schedule hooks, webhook form: a small HTTP server for webhook/controller.yaml.

    python3 server.py [--port PORT]        (default: $PORT, else 8085; listens on 127.0.0.1)

Routes: POST /<hook> for map and tombstone (request JSON in, response JSON out) and GET /healthz.
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the example directory free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hook  # noqa: E402  (the logic, shared with exec_hook.py)
import hookkit  # noqa: E402  (the plumbing, shared by every example)

if __name__ == "__main__":
    sys.exit(hookkit.serve_main("snapshot-schedule", hook.HOOKS, 8085))
