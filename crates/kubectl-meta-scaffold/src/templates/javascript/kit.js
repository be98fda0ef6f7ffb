// The hook kit: the request and answer shapes (JSDoc types), the children-map key helper, and
// the plumbing that runs a hook once per call (exec) or serves it over HTTP (webhook). Node's
// standard library only.
//
//   node hook/hook.js                       exec: one call; the request JSON on stdin, the hook's
//                                           name in KUBECTL_META_HOOK, the answer on stdout
//   node hook/hook.js --serve [HOST:]PORT   webhook: POST /<hook>, GET /healthz (127.0.0.1 by default)
"use strict";

const http = require("node:http");

/** @typedef {Record<string, any>} KObject */
/**
 * Observed objects by type, then by name: {"ConfigMap.v1": {"sample": {...}}}. Every declared
 * type is present, even with nothing observed. Look a type up with childKey(), never by hand.
 * @typedef {Record<string, Record<string, KObject>>} ObjectMap
 */
/**
 * CompositeController sync: the parent and its children as observed.
 * @typedef {{controller: KObject, parent: KObject, children: ObjectMap, related: ObjectMap, finalizing: boolean}} SyncRequest
 * The answer: the parent's status and every child it should have.
 * @typedef {{status?: KObject, children?: KObject[], resyncAfterSeconds?: number, finalized?: boolean}} SyncResponse
 */
/**
 * DecoratorController sync: the target object and its attachments as observed.
 * @typedef {{controller: KObject, object: KObject, attachments: ObjectMap, related: ObjectMap, finalizing: boolean}} DecoratorRequest
 * The answer: labels and annotations merged into the target (null removes a key), its status
 * (null: leave it alone), every attachment it should have.
 * @typedef {{labels?: Record<string, string|null>, annotations?: Record<string, string|null>, status?: KObject|null, attachments?: KObject[], resyncAfterSeconds?: number, finalized?: boolean}} DecoratorResponse
 */
/**
 * MapController map: one input object and the outputs already made from it.
 * @typedef {{controller: KObject, parent: KObject, mapKey: string, input: KObject, outputs: ObjectMap}} MapRequest
 * The answer: every output this input should have.
 * @typedef {{outputs?: KObject[], resyncAfterSeconds?: number}} MapResponse
 */

/**
 * The key of a type in a request's object maps: `Kind.version` for the core group
 * (`ConfigMap.v1`), `Kind.group/version` otherwise (`Deployment.apps/v1`).
 * @param {string} kind @param {string} apiVersion @returns {string}
 */
function childKey(kind, apiVersion) {
  return `${kind}.${apiVersion}`;
}

/**
 * The string-valued fields of a spec (e.g. as a ConfigMap's data).
 * @param {KObject|undefined} spec @returns {Record<string, string>}
 */
function stringFields(spec) {
  return Object.fromEntries(Object.entries(spec || {}).filter(([, v]) => typeof v === "string"));
}

/** Serve `hooks` (`--serve [HOST:]PORT`) or answer one exec call. */
function main(hooks) {
  const args = process.argv.slice(2);
  if (args.length === 2 && args[0] === "--serve") {
    serve(hooks, args[1]);
  } else {
    runOnce(hooks);
  }
}

/** Exec: the hook named by KUBECTL_META_HOOK, request on stdin, answer on stdout. */
function runOnce(hooks) {
  const name = process.env.KUBECTL_META_HOOK || "";
  const hook = hooks[name];
  if (!hook) {
    console.error(`KUBECTL_META_HOOK=${JSON.stringify(name)} is not one of: ${Object.keys(hooks).join(", ")}`);
    process.exit(1);
  }
  const chunks = [];
  process.stdin.on("data", (c) => chunks.push(c));
  process.stdin.on("end", () => {
    try {
      const answer = hook(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      process.stdout.write(JSON.stringify(answer) + "\n");
    } catch (e) {
      // A bad request or a bug in the hook: the sync fails and nothing is changed.
      console.error(e && e.stack ? e.stack : String(e));
      process.exitCode = 1;
    }
  });
}

/** Webhook: POST /<hook> (request JSON in, answer JSON out), GET /healthz. */
function serve(hooks, address) {
  const i = address.lastIndexOf(":");
  const host = i > 0 ? address.slice(0, i) : "127.0.0.1";
  const port = Number(address.slice(i + 1));
  const server = http.createServer((req, res) => {
    const reply = (status, body, type = "text/plain; charset=utf-8") => {
      res.writeHead(status, { "Content-Type": type, "Content-Length": Buffer.byteLength(body) });
      res.end(body);
      console.error(`${req.method} ${req.url} ${status}`);
    };
    if (req.method === "GET" && req.url === "/healthz") return reply(200, "ok\n");
    const hook = req.method === "POST" && hooks[req.url.replace(/^\/+|\/+$/g, "")];
    if (!hook) return reply(404, `no hook at ${req.method} ${req.url}\n`);
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      try {
        reply(200, JSON.stringify(hook(JSON.parse(Buffer.concat(chunks).toString("utf8")))), "application/json");
      } catch (e) {
        reply(500, (e && e.stack ? e.stack : String(e)) + "\n");
      }
    });
  });
  server.listen(port, host, () => console.error(`hooks listening on http://${host}:${port} (POST /${Object.keys(hooks).join(", /")}, GET /healthz)`));
}

module.exports = { childKey, stringFields, main };
