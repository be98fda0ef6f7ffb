#!/usr/bin/env node
// The sync hook of DecoratorController {{CONTROLLER}}: for one {{PARENT_KIND}} (the target), the
// labels to add and the attachments it should have. kit.js has the request and answer shapes;
// the hook contract (every field, the attachments keys, the defaults) is in kubectl-meta's docs.
"use strict";

const kit = require("./kit");
const { childKey, stringFields } = kit;

/** @param {import("./kit").DecoratorRequest} request @returns {import("./kit").DecoratorResponse} */
function sync(request) {
  const target = request.object;
  const name = target.metadata.name;
  const spec = target.spec || {};
  // Desired attachments: the engine creates, updates or deletes objects to match this list.
  const attachments = [
{{CHILDREN}}
  ];
  // The status reports what was observed, not what is about to be created.
  const observed = request.attachments;
{{STATUS}}
  const labels = { "{{DECORATED_LABEL}}": "true" };
  return { labels, attachments, status };
}

const HOOKS = { sync };

if (require.main === module) {
  kit.main(HOOKS);
}
module.exports = HOOKS;
