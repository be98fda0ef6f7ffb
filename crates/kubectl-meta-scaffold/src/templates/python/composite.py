#!/usr/bin/env python3
"""The sync hook of CompositeController {{CONTROLLER}}: the children one {{PARENT_KIND}} should
have, and its status. kit.py has the request and answer shapes; the hook contract (every field,
the children keys, the defaults) is in kubectl-meta's docs.
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the hook
import kit  # noqa: E402
from kit import child_key, string_fields  # noqa: E402,F401


def sync(request: kit.SyncRequest) -> kit.SyncResponse:
    parent = request["parent"]
    name = parent["metadata"]["name"]
    spec = parent.get("spec") or {}
    # Desired children: the engine creates, updates or deletes objects to match this list.
    children = [
{{CHILDREN}}
    ]
    # The status reports what was observed, not what is about to be created.
    observed = request["children"]
{{STATUS}}
    return {"status": status, "children": children}


HOOKS = {"sync": sync}

if __name__ == "__main__":
    kit.main(HOOKS)
