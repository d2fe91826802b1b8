// tests/mcp/sdk_client.mjs: drive `lash mcp serve` with the official
// TypeScript SDK client, over stdio (it starts LASH) or Streamable HTTP (at
// URL, with TOKEN). Prints TAP. Usage: node sdk_client.mjs LASH [URL TOKEN]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [lash, url, token] = process.argv.slice(2);
let n = 0, failed = 0;
function check(desc, cond, detail) {
  n++;
  if (cond) console.log(`ok ${n} - ${desc}`);
  else { failed++; console.log(`not ok ${n} - ${desc}`); if (detail !== undefined) console.log("#   " + JSON.stringify(detail)); }
}
const text = (r) => (r.content || []).map((c) => c.text).join("\n");

const transport = url
  ? new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })
  : new StdioClientTransport({ command: lash, args: ["mcp", "serve"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "sdk-test", version: "1.0.0" });
await client.connect(transport);
check("initialize: server info", client.getServerVersion()?.name === "lash", client.getServerVersion());
const instr = client.getInstructions() || "";
check("instructions are the capability's default text", instr.includes("`run_command`") && instr.includes("sandbox"), instr);
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check("four tools", JSON.stringify(names) === JSON.stringify(["list_directory", "read_file", "run_command", "write_file"]), names);
const rc = tools.find((t) => t.name === "run_command");
check("run_command's schema", rc.inputSchema.required?.includes("command"), rc.inputSchema);

let r = await client.callTool({ name: "run_command", arguments: { command: "echo hi; echo err >&2; exit 2" } });
check("run_command's exact format", text(r) === "[stdout]\nhi\n[stderr]\nerr\n[exit code: 2]" && !r.isError, text(r));
r = await client.callTool({ name: "write_file", arguments: { path: "a/b.txt", content: "one\ntwo\n" } });
check("write_file", /^Wrote 8 bytes to 'a\/b.txt'\.$/.test(text(r)), text(r));
r = await client.callTool({ name: "read_file", arguments: { path: "a/b.txt" } });
check("read_file returns the text as the capability does", text(r) === "one\ntwo", text(r));
r = await client.callTool({ name: "list_directory", arguments: {} });
check("list_directory", text(r).includes("a/"), text(r));
r = await client.callTool({ name: "read_file", arguments: { path: "/nope" } });
check("a sandbox error is isError with the capability's text", r.isError === true && text(r).startsWith("Could not read '/nope'"), r);
r = await client.callTool({ name: "run_command", arguments: {} });
check("bad arguments are isError naming the problem", r.isError === true && text(r).includes("command"), r);
r = await client.callTool({ name: "nope", arguments: {} });
check("an unknown tool is isError", r.isError === true && text(r).includes("Unknown tool"), r);
r = await client.callTool({ name: "run_command", arguments: { command: "pwd" } });
check("commands run in the sandbox's workdir", text(r).includes("/workspace"), text(r));
// a running command's output as progress notifications, when the client asks for progress
// (over stdio, and over HTTP as an event stream answering the call)
const progress = [];
r = await client.callTool({ name: "run_command", arguments: { command: "for i in 1 2 3; do echo line$i; sleep 0.3; done" } },
                          undefined, { onprogress: (p) => progress.push(p) });
check(`run_command streams its output as progress notifications${url ? " (HTTP: an event stream)" : ""}`,
      progress.length >= 2 && progress.map((p) => p.message).join("") === "line1\nline2\nline3\n"
      && progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), progress);
const plain = await client.callTool({ name: "run_command", arguments: { command: "for i in 1 2 3; do echo line$i; sleep 0.3; done" } });
check("... and its result is the same as without progress", text(r) === text(plain) && text(r).includes("line3"), [text(r), text(plain)]);
await client.ping();
check("ping", true);
if (url) await transport.terminateSession();
await client.close();

// a served session outlives its sandbox's lifetime (--timeout): the next
// call gets a fresh sandbox and a note saying so, never a dead session
if (!url) {
  const t2 = new StdioClientTransport({ command: lash, args: ["mcp", "serve", "--timeout", "3"], env: { ...process.env },
                                        stderr: "inherit" });
  const c2 = new Client({ name: "sdk-test-lifetime", version: "1.0.0" });
  await c2.connect(t2);
  r = await c2.callTool({ name: "write_file", arguments: { path: "before.txt", content: "x" } });
  check("a short-lived session's sandbox works", !r.isError, text(r));
  await new Promise((res) => setTimeout(res, 5000));
  r = await c2.callTool({ name: "run_command", arguments: { command: "echo again" } });
  check("past its lifetime the next call runs in a fresh sandbox", !r.isError && text(r).includes("[stdout]\nagain"), text(r));
  check("... with a note naming the flag (--timeout)", text(r).startsWith("[Note: this session's sandbox reached its "
    + "lifetime of 3s (lash mcp serve --timeout) and a fresh one was made"), text(r));
  r = await c2.callTool({ name: "read_file", arguments: { path: "before.txt" } });
  check("... the files from before are gone, as the note says", r.isError === true && !text(r).includes("[Note"), text(r));
  r = await c2.callTool({ name: "run_command", arguments: { command: "echo once more" } });
  check("the fresh sandbox goes on with no note", !r.isError && text(r).startsWith("[stdout]"), text(r));
  await c2.close();
}
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
