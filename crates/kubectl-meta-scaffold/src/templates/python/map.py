#!/usr/bin/env python3
"""The map hook of MapController {{CONTROLLER}}: the outputs of one input object of a
{{PARENT_KIND}}. The engine calls it once per input (in parallel), and writes the parent's status
itself. kit.py has the request and answer shapes; the hook contract is in kubectl-meta's docs.
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the hook
import kit  # noqa: E402
from kit import string_fields  # noqa: E402


def map_input(request: kit.MapRequest) -> kit.MapResponse:
    parent = request["parent"]
    source = request["input"]
    name = "%s-%s" % (source["metadata"]["name"], parent["metadata"]["name"])
    spec = parent.get("spec") or {}
    # Desired outputs of this input: the engine creates, updates or deletes objects to match.
    outputs = [
{{CHILDREN}}
    ]
    return {"outputs": outputs}


HOOKS = {"map": map_input}

if __name__ == "__main__":
    kit.main(HOOKS)
