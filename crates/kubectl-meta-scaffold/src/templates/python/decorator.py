#!/usr/bin/env python3
"""The sync hook of DecoratorController {{CONTROLLER}}: for one {{PARENT_KIND}} (the target), the
labels to add and the attachments it should have. kit.py has the request and answer shapes; the
hook contract (every field, the attachments keys, the defaults) is in kubectl-meta's docs.
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the hook
import kit  # noqa: E402
from kit import child_key, string_fields  # noqa: E402,F401


def sync(request: kit.DecoratorRequest) -> kit.DecoratorResponse:
    target = request["object"]
    name = target["metadata"]["name"]
    spec = target.get("spec") or {}
    # Desired attachments: the engine creates, updates or deletes objects to match this list.
    attachments = [
{{CHILDREN}}
    ]
    # The status reports what was observed, not what is about to be created.
    observed = request["attachments"]
{{STATUS}}
    labels = {"{{DECORATED_LABEL}}": "true"}
    return {"labels": labels, "attachments": attachments, "status": status}


HOOKS = {"sync": sync}

if __name__ == "__main__":
    kit.main(HOOKS)
