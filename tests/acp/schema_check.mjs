// tests/acp/schema_check.mjs: every ACP message checked against the JSON
// Schema the official SDK ships (@agentclientprotocol/sdk,
// schema/v1/schema.json), by method: a request's or notification's params
// against its *Request / *Notification definition, a result against the
// method's *Response, an error against Error. Shared by the ACP tests.
import Ajv2020 from "ajv/dist/2020.js";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const schema = require("@agentclientprotocol/sdk/schema/v1/schema.json");
const schemaPath = require.resolve("@agentclientprotocol/sdk/schema/v1/schema.json");
export const SDK_VERSION = JSON.parse(fs.readFileSync(path.join(path.dirname(schemaPath), "../../package.json"), "utf8")).version;

const ajv = new Ajv2020({ strict: false, allErrors: true });
// the schema's integer formats, checked as ranges
const ranges = { int32: [-(2 ** 31), 2 ** 31 - 1], uint32: [0, 2 ** 32 - 1], int64: [-(2 ** 63), 2 ** 63],
  uint64: [0, 2 ** 64], uint16: [0, 65535] };
for (const [name, [lo, hi]] of Object.entries(ranges)) {
  ajv.addFormat(name, { type: "number", validate: (x) => Number.isInteger(x) && x >= lo && x <= hi });
}
ajv.addFormat("double", { type: "number", validate: () => true });
ajv.addFormat("uri", { type: "string", validate: (s) => /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(s) });
ajv.addSchema(schema, "acp");

const byMethod = {};
for (const [name, def] of Object.entries(schema.$defs)) {
  const m = def["x-method"];
  if (!m) continue;
  byMethod[m] = byMethod[m] || {};
  if (name.endsWith("Response")) byMethod[m].response = name;
  else byMethod[m].params = name;
}

const validators = {};
function validator(name) {
  if (!validators[name]) validators[name] = ajv.getSchema("acp#/$defs/" + name);
  return validators[name];
}

// A checker for one connection: feed it every line in each direction.
export function checker() {
  const pending = { toAgent: new Map(), toClient: new Map() };
  const problems = [];
  let count = 0;
  function fail(dir, msg, what, errors) {
    problems.push(`${dir} ${what}: ${ajv.errorsText(errors)} in ${JSON.stringify(msg).slice(0, 400)}`);
  }
  function check(dir, line) {
    if (!line.trim()) return;
    count++;
    let msg;
    try { msg = JSON.parse(line); } catch (e) { problems.push(`${dir}: not JSON: ${line.slice(0, 200)}`); return; }
    if (msg.jsonrpc !== "2.0") problems.push(`${dir}: jsonrpc is not "2.0": ${line.slice(0, 200)}`);
    const mine = dir === "client->agent" ? pending.toAgent : pending.toClient;
    const theirs = dir === "client->agent" ? pending.toClient : pending.toAgent;
    if (typeof msg.method === "string") {
      const m = byMethod[msg.method];
      if (!m || !m.params) {
        if (!msg.method.startsWith("_")) problems.push(`${dir}: a method the schema does not have: ${msg.method}`);
        return;
      }
      const v = validator(m.params);
      if (!v(msg.params)) fail(dir, msg, `${msg.method} params (${m.params})`, v.errors);
      if (msg.id !== undefined) mine.set(msg.id, msg.method);
    } else if (msg.id !== undefined) {
      const method = theirs.get(msg.id);
      theirs.delete(msg.id);
      if (msg.error !== undefined) {
        const v = validator("Error");
        if (!v(msg.error)) fail(dir, msg, "error", v.errors);
      } else if (method) {
        const name = byMethod[method].response;
        const v = validator(name);
        if (!v(msg.result)) fail(dir, msg, `${method} result (${name})`, v.errors);
      } else {
        problems.push(`${dir}: a response to no request: ${line.slice(0, 200)}`);
      }
    } else {
      problems.push(`${dir}: neither request, notification nor response: ${line.slice(0, 200)}`);
    }
  }
  return { check, problems, count: () => count };
}
