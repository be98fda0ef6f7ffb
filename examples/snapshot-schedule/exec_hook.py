#!/usr/bin/env python3
"""snapshot-schedule hooks, exec form: `exec: {command: ["python3", "exec_hook.py"]}` (10-controller.yaml).

kubectl meta dev runs this program once per hook call, in this directory: the request JSON on
stdin, the hook's name (map or tombstone) in KUBECTL_META_HOOK, the response JSON on stdout.
Try it by hand:  KUBECTL_META_HOOK=map python3 exec_hook.py < request.json
(pin the hook's clock with SNAPSHOT_SCHEDULE_NOW=2026-11-24T10:00:00Z, see hook.py)
"""

import os
import sys

sys.dont_write_bytecode = True  # keep the example directory free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hook  # noqa: E402  (the logic, shared with server.py)
import hookkit  # noqa: E402  (the plumbing, shared by every example)

if __name__ == "__main__":
    sys.exit(hookkit.exec_main(hook.HOOKS))
