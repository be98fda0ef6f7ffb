#!/usr/bin/env node
// The sync hook of CompositeController {{CONTROLLER}}: the children one {{PARENT_KIND}} should
// have, and its status. kit.js has the request and answer shapes; the hook contract (every
// field, the children keys, the defaults) is in kubectl-meta's docs.
"use strict";

const kit = require("./kit");
const { childKey, stringFields } = kit;

/** @param {import("./kit").SyncRequest} request @returns {import("./kit").SyncResponse} */
function sync(request) {
  const parent = request.parent;
  const name = parent.metadata.name;
  const spec = parent.spec || {};
  // Desired children: the engine creates, updates or deletes objects to match this list.
  const children = [
{{CHILDREN}}
  ];
  // The status reports what was observed, not what is about to be created.
  const observed = request.children;
{{STATUS}}
  return { status, children };
}

const HOOKS = { sync };

if (require.main === module) {
  kit.main(HOOKS);
}
module.exports = HOOKS;
