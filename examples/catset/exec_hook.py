#!/usr/bin/env python3
"""catset hooks, exec form: `exec: {command: ["python3", "exec_hook.py"]}`.

kubectl meta dev runs this program once per hook call, in the directory of the controller
file: the request JSON comes on stdin, the hook's name in the environment variable
KUBECTL_META_HOOK (sync or finalize), and the response JSON goes to stdout. On an
error it writes the reason to stderr and exits 1: the sync fails, nothing is changed, and the
parent gets a SyncError event.

Try it by hand:  KUBECTL_META_HOOK=sync python3 exec_hook.py < request.json
"""

import json
import os
import sys
import traceback

sys.dont_write_bytecode = True  # keep the example directory free of __pycache__
import hook  # noqa: E402  (the logic, shared with server.py)


def main():
    name = os.environ.get("KUBECTL_META_HOOK", "")
    handler = hook.HOOKS.get(name)
    if handler is None:
        print(
            "exec_hook.py: KUBECTL_META_HOOK=%r is not a hook of this example (expected one of: %s)"
            % (name, ", ".join(sorted(hook.HOOKS))),
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


if __name__ == "__main__":
    sys.exit(main())
