#!/usr/bin/env node
// The map hook of MapController {{CONTROLLER}}: the outputs of one input object of a
// {{PARENT_KIND}}. The engine calls it once per input (in parallel), and writes the parent's
// status itself. kit.js has the request and answer shapes; the hook contract is in
// kubectl-meta's docs.
"use strict";

const kit = require("./kit");
const { stringFields } = kit;

/** @param {import("./kit").MapRequest} request @returns {import("./kit").MapResponse} */
function map(request) {
  const parent = request.parent;
  const name = `${request.input.metadata.name}-${parent.metadata.name}`;
  const spec = parent.spec || {};
  // Desired outputs of this input: the engine creates, updates or deletes objects to match.
  const outputs = [
{{CHILDREN}}
  ];
  return { outputs };
}

const HOOKS = { map };

if (require.main === module) {
  kit.main(HOOKS);
}
module.exports = HOOKS;
