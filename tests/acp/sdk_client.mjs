// tests/acp/sdk_client.mjs: `lash acp` driven by the official ACP client
// (@agentclientprotocol/sdk's client app, the successor of
// ClientSideConnection), every message in both directions checked against
// the SDK's JSON Schema (schema_check.mjs). Prints TAP.
//
// Usage: node sdk_client.mjs LASH SPEC WORKDIR
//   (LASH_SESSIONS_DB and LASH_SANDBOX_ROOT come from the environment)
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import fs from "node:fs";
import { checker, SDK_VERSION } from "./schema_check.mjs";

const [lash, spec, workdir] = process.argv.slice(2);
let n = 0;
let failed = 0;
function check(desc, cond, detail) {
  n++;
  if (cond) console.log(`ok ${n} - ${desc}`);
  else {
    failed++;
    console.log(`not ok ${n} - ${desc}`);
    if (detail !== undefined) console.log("#   " + String(typeof detail === "string" ? detail : JSON.stringify(detail)).slice(0, 1500).replace(/\n/g, "\n#   "));
  }
}
console.log(`# @agentclientprotocol/sdk ${SDK_VERSION}, protocol v${acp.PROTOCOL_VERSION}`);

// A lash acp process and the SDK's streams over it, each line checked.
function start(args) {
  const child = spawn(lash, ["acp", ...args], { stdio: ["pipe", "pipe", "pipe"], env: process.env });
  const sc = checker();
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d; });
  const exited = new Promise((res) => child.on("exit", (code, sig) => res({ code, sig })));
  let buf = "";
  const input = new ReadableStream({
    start(controller) {
      child.stdout.on("data", (d) => {
        buf += d.toString("utf8");
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          sc.check("agent->client", buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
        controller.enqueue(new Uint8Array(d));
      });
      child.stdout.on("end", () => { try { controller.close(); } catch { } });
    },
  });
  let obuf = "";
  const dec = new TextDecoder();
  const output = new WritableStream({
    write(chunk) {
      obuf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = obuf.indexOf("\n")) >= 0) {
        sc.check("client->agent", obuf.slice(0, i));
        obuf = obuf.slice(i + 1);
      }
      return new Promise((res, rej) => child.stdin.write(chunk, (e) => (e ? rej(e) : res())));
    },
    close() { child.stdin.end(); },
  });
  return { child, sc, exited, stream: acp.ndJsonStream(output, input), stderr: () => stderr };
}

// The client app: what lash sends is recorded; permission answers come
// from `answers` (a function of the request).
function clientApp(state) {
  return acp.client({ name: "lash-acp-test" })
    .onNotification(acp.methods.client.session.update, (c) => { state.updates.push(c.params); })
    .onRequest(acp.methods.client.session.requestPermission, async (c) => {
      state.permissions.push(c.params);
      return state.answer(c.params);
    });
}

const updatesOf = (state, kind) => state.updates.filter((u) => u.update.sessionUpdate === kind).map((u) => u.update);
const textOf = (state) => updatesOf(state, "agent_message_chunk").map((u) => u.content.text).join("");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function sleepers() {
  // processes running "sleep 61.5" (the slow command), anywhere on the host
  const out = [];
  for (const pid of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (cmd === "sleep\u000061.5\u0000") out.push(pid);
    } catch { }
  }
  return out;
}

async function main() {
  const state = { updates: [], permissions: [], answer: () => ({ outcome: { outcome: "cancelled" } }) };
  const conn = start([spec, "--context-window", "200000"]);
  let sessionId;
  await clientApp(state).connectWith(conn.stream, async (agent) => {
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "lash-acp-test", version: "1" },
    });
    check("initialize: protocol version 1, loadSession, images and embedded context",
      init.protocolVersion === 1 && init.agentCapabilities.loadSession === true
      && init.agentCapabilities.promptCapabilities.image === true
      && init.agentCapabilities.promptCapabilities.embeddedContext === true && init.agentInfo.name === "lash", init);

    const s = await agent.request(acp.methods.agent.session.new, { cwd: workdir, mcpServers: [] });
    sessionId = s.sessionId;
    check("session/new: an id, modes ask and auto (ask current), model and mode config options",
      typeof s.sessionId === "string" && s.modes.currentModeId === "ask"
      && s.modes.availableModes.map((m) => m.id).join() === "ask,auto"
      && s.configOptions.some((o) => o.category === "model") && s.configOptions.some((o) => o.category === "mode"), s);

    // ---- a turn with two calls that need permission: allow once, allow always
    const answers = ["allow_once", "allow_always"];
    state.answer = (p) => ({ outcome: { outcome: "selected", optionId: answers[state.permissions.length - 1] } });
    let r = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "write a file" }] });
    check("prompt: the turn ends with end_turn", r.stopReason === "end_turn", r);
    check("two permission requests, for write_file then run_command, with allow once/always and reject",
      state.permissions.length === 2 && state.permissions[0].toolCall.title === "Write hello.txt"
      && state.permissions[1].toolCall.kind === "execute"
      && state.permissions[0].options.map((o) => o.kind).join() === "allow_once,allow_always,reject_once",
      state.permissions);
    const perm0 = state.permissions[0];
    check("the write's permission request shows the change as a diff",
      perm0 && perm0.toolCall.content && perm0.toolCall.content[0].type === "diff"
      && perm0.toolCall.content[0].newText === "hi from lash\n" && perm0.toolCall.content[0].path === "/workspace/hello.txt",
      perm0 && perm0.toolCall);
    const usage = updatesOf(state, "usage_update");
    check("usage_update after each model response: the context used, the window (--context-window)",
      usage.length >= 2 && usage.every((u) => Number.isInteger(u.used) && u.size === 200000), usage);
    check("the model's text streams as agent_message_chunk", textOf(state).startsWith("Writing."), textOf(state));
    const calls = updatesOf(state, "tool_call");
    const ups = updatesOf(state, "tool_call_update");
    check("tool_call updates: kind, title, status pending, locations, raw input",
      calls.length === 2 && calls[0].kind === "edit" && calls[0].status === "pending"
      && calls[0].locations[0].path === "/workspace/hello.txt" && calls[1].rawInput.command === "cat hello.txt", calls);
    // (a running command's output arrives as in_progress updates with content, counted apart)
    const statuses = (id) => ups.filter((u) => u.toolCallId === id && !(u.status === "in_progress" && u.content))
      .map((u) => u.status).filter(Boolean).join(",");
    check("tool_call_update: in_progress once allowed, then completed",
      calls.length === 2 && statuses(calls[0].toolCallId) === "in_progress,completed"
      && statuses(calls[1].toolCallId) === "in_progress,completed", ups);
    const live = ups.filter((u) => calls[1] && u.toolCallId === calls[1].toolCallId && u.status === "in_progress" && u.content);
    check("the running command's output shows as in_progress content before its result",
      live.length >= 1 && live[live.length - 1].content[0].content.text === "hi from lash\n", live);
    const catDone = ups.find((u) => calls[1] && u.toolCallId === calls[1].toolCallId && u.status === "completed");
    check("the command ran in the sandbox and its output is the call's content",
      catDone && JSON.stringify(catDone.content).includes("hi from lash"), catDone);
    check("the model saw both results", textOf(state).includes("run_command=ok") && textOf(state).includes("hi from lash"),
      textOf(state));

    // ---- the same turn again: write_file rejected, run_command always allowed
    state.updates.length = 0;
    state.permissions.length = 0;
    state.answer = () => ({ outcome: { outcome: "selected", optionId: "reject_once" } });
    r = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "write again" }] });
    check("after allow always, only the write asks; rejected, it fails and the command still runs",
      r.stopReason === "end_turn" && state.permissions.length === 1 && state.permissions[0].toolCall.kind === "edit"
      && textOf(state).includes("write_file=denied") && textOf(state).includes("run_command=ok"),
      { permissions: state.permissions.length, text: textOf(state) });
    const failedWrite = updatesOf(state, "tool_call_update").find((u) => u.status === "failed");
    check("the rejected call's update is failed", failedWrite !== undefined, updatesOf(state, "tool_call_update"));

    // ---- a plan
    state.updates.length = 0;
    r = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "plan it" }] });
    const plans = updatesOf(state, "plan");
    check("update_plan becomes a plan update with its entries",
      plans.length === 1 && plans[0].entries.length === 2 && plans[0].entries[1].status === "in_progress"
      && plans[0].entries[1].priority === "high", plans);

    // ---- prompt content: text, a resource link, an embedded resource, an image
    state.updates.length = 0;
    const png = fs.readFileSync(new URL("./pixel.png", import.meta.url)).toString("base64");
    r = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [
      { type: "text", text: "parts please" },
      { type: "resource_link", uri: "file:///src/main.c", name: "main.c" },
      { type: "resource", resource: { uri: "file:///src/notes.md", text: "note ``` with a fence", mimeType: "text/markdown" } },
      { type: "image", data: png, mimeType: "image/png" },
    ] });
    const pt = textOf(state);
    check("text, resource link, embedded resource and image reach the model as text, text, text and image",
      /^parts: text\[12\],text\[\d+\],text\[\d+\],image\(image\/png\)/.test(pt)
      && pt.includes("[@main.c](file:///src/main.c)") && pt.includes("Context from file:///src/notes.md") && pt.includes("````"), pt);

    // ---- mode: auto runs without asking
    state.updates.length = 0;
    state.permissions.length = 0;
    await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
    check("set_mode sends current_mode_update", updatesOf(state, "current_mode_update").some((u) => u.currentModeId === "auto"),
      state.updates);
    r = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "write in auto mode" }] });
    check("in auto mode the same calls run without a permission request",
      state.permissions.length === 0 && textOf(state).includes("write_file=ok"), textOf(state));
    const co = await agent.request(acp.methods.agent.session.setConfigOption, { sessionId, configId: "mode", value: "ask" });
    check("set_config_option mode answers the options with the new value",
      co.configOptions.find((o) => o.id === "mode").currentValue === "ask", co);
    let bad;
    try { await agent.request(acp.methods.agent.session.setConfigOption, { sessionId, configId: "model", value: "no-such" }); }
    catch (e) { bad = e; }
    check("an unknown model is Invalid params naming the choices", bad && bad.code === -32602 && /no model 'no-such'/.test(bad.message), bad);

    // ---- cancel mid-turn: the command in the sandbox is killed
    await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
    state.updates.length = 0;
    const t0 = Date.now();
    const slow = agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "slow one" }] });
    let seen = false;
    for (let i = 0; i < 300 && !seen; i++) { await sleep(100); seen = sleepers().length > 0; }
    check("the slow command is running (sleep 61.5 in the sandbox)", seen);
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    r = await slow;
    check("session/cancel: the prompt answers cancelled at once", r.stopReason === "cancelled" && Date.now() - t0 < 30000, r);
    let gone = false;
    for (let i = 0; i < 50 && !gone; i++) { gone = sleepers().length === 0; if (!gone) await sleep(100); }
    check("the cancelled command was killed (no sleep 61.5 left)", gone, sleepers());
    const ended = updatesOf(state, "tool_call_update").filter((u) => u.status === "failed");
    check("the cancelled call is reported failed", ended.length === 1, updatesOf(state, "tool_call_update"));
    state.updates.length = 0;
    r = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "still there?" }] });
    check("the session goes on after a cancel", r.stopReason === "end_turn" && textOf(state).startsWith("echo: still there?"),
      textOf(state));

    // ---- cancel while a permission request is open: the client answers cancelled
    await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "ask" });
    state.updates.length = 0;
    state.permissions.length = 0;
    let release;
    state.answer = () => new Promise((res) => { release = res; });
    const asked = agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "write, but cancel" }] });
    for (let i = 0; i < 100 && !release; i++) await sleep(50);
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    if (release) release({ outcome: { outcome: "cancelled" } });
    r = await asked;
    check("cancel during a permission request: the turn ends cancelled", r.stopReason === "cancelled", r);
  });
  conn.child.stdin.end();
  await conn.exited;
  check("every message of the first connection matches the SDK's schema (" + conn.sc.count() + " messages)",
    conn.sc.problems.length === 0, conn.sc.problems.slice(0, 5).join("\n"));

  // ---- a second connection loads the session
  const st2 = { updates: [], permissions: [], answer: () => ({ outcome: { outcome: "cancelled" } }) };
  const conn2 = start([spec]);
  await clientApp(st2).connectWith(conn2.stream, async (agent) => {
    await agent.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    const l = await agent.request(acp.methods.agent.session.load, { sessionId, cwd: workdir, mcpServers: [] });
    const users = updatesOf(st2, "user_message_chunk").map((u) => u.content.text);
    check("session/load replays the conversation (user messages, agent text, tool calls)",
      users[0] === "write a file" && textOf(st2).includes("Writing.") && updatesOf(st2, "tool_call").length >= 4
      && l.modes.currentModeId === "ask", { users, l });
    st2.updates.length = 0;
    const r = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "after load" }] });
    const m = textOf(st2).match(/history: (\d+) messages/);
    check("a prompt in the loaded session has the saved history", r.stopReason === "end_turn" && m && Number(m[1]) > 10,
      textOf(st2));
    let bad;
    try { await agent.request(acp.methods.agent.session.load, { sessionId: "nosuchsession", cwd: workdir, mcpServers: [] }); }
    catch (e) { bad = e; }
    check("loading an unknown session is Resource not found", bad && bad.code === -32002, bad);
  });
  conn2.child.stdin.end();
  const ex2 = await conn2.exited;
  check("lash acp exits 0 when the client closes its stdin", ex2.code === 0, ex2);
  check("every message of the second connection matches the SDK's schema (" + conn2.sc.count() + " messages)",
    conn2.sc.problems.length === 0, conn2.sc.problems.slice(0, 5).join("\n"));
  await editorFlows();
  console.log(`1..${n}`);
}

// ---- EditorTools: the model's files and commands are the client's (a real
// directory and real processes here, as an editor would give)
async function editorFlows() {
  const dir = fs.mkdtempSync(workdir + "/editor-");
  const editorSpec = spec.replace(/[^/]*$/, "editor_spec.lua");
  const st = { updates: [], permissions: [], fsCalls: [], terms: new Map(), next: 0, killed: [],
               answer: () => ({ outcome: { outcome: "selected", optionId: "allow_always" } }) };
  const app = clientApp(st)
    .onRequest(acp.methods.client.fs.readTextFile, async (c) => {
      st.fsCalls.push(["read", c.params.path]);
      return { content: fs.readFileSync(c.params.path, "utf8") };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, async (c) => {
      st.fsCalls.push(["write", c.params.path]);
      fs.writeFileSync(c.params.path, c.params.content);
      return {};
    })
    .onRequest(acp.methods.client.terminal.create, async (c) => {
      const id = "t" + (++st.next);
      const p = spawn(c.params.command, c.params.args || [], { cwd: c.params.cwd, stdio: ["ignore", "pipe", "pipe"] });
      const t = { p, out: "", status: null, cmd: c.params };
      t.exit = new Promise((res) => p.on("exit", (code, sig) => { t.status = { exitCode: code, signal: sig }; res(t.status); }));
      p.stdout.on("data", (d) => { t.out += d; });
      p.stderr.on("data", (d) => { t.out += d; });
      st.terms.set(id, t);
      return { terminalId: id };
    })
    .onRequest(acp.methods.client.terminal.waitForExit, async (c) => st.terms.get(c.params.terminalId).exit)
    .onRequest(acp.methods.client.terminal.output, async (c) => {
      const t = st.terms.get(c.params.terminalId);
      return { output: t.out, truncated: false, exitStatus: t.status };
    })
    .onRequest(acp.methods.client.terminal.kill, async (c) => {
      st.killed.push(c.params.terminalId);
      st.terms.get(c.params.terminalId).p.kill("SIGKILL");
      return {};
    })
    .onRequest(acp.methods.client.terminal.release, async (c) => { st.terms.delete(c.params.terminalId); return {}; });
  const conn = start([editorSpec]);
  await app.connectWith(conn.stream, async (agent) => {
    await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
    });
    const s = await agent.request(acp.methods.agent.session.new, { cwd: dir, mcpServers: [] });
    const r = await agent.request(acp.methods.agent.session.prompt,
      { sessionId: s.sessionId, prompt: [{ type: "text", text: "edit the file" }] });
    check("EditorTools: the turn ends with end_turn", r.stopReason === "end_turn", r);
    const text = fs.existsSync(dir + "/hello.txt") && fs.readFileSync(dir + "/hello.txt", "utf8");
    check("EditorTools: write_file and edit_file changed the editor's file (fs/write_text_file, fs/read_text_file)",
      text === "hello from lash\n" && st.fsCalls.filter((c) => c[0] === "write").length === 2
      && st.fsCalls.some((c) => c[0] === "read" && c[1] === dir + "/hello.txt"), { text, fs: st.fsCalls });
    const last = textOf(st);
    check("EditorTools: run_command ran in the editor's terminal, in the session's cwd",
      st.next === 1 && last.includes("run_command=ok:Exit status 0.") && last.includes("hello from lash")
      && last.includes(dir), last);
    const ups = updatesOf(st, "tool_call_update");
    check("EditorTools: the command's tool call shows the terminal", ups.some((u) => (u.content || []).some(
      (c) => c.type === "terminal" && c.terminalId === "t1")), ups);
    check("EditorTools: the edit's tool call shows a diff against the editor's text",
      st.permissions.some((p) => p.toolCall.content && p.toolCall.content[0].type === "diff"
        && p.toolCall.content[0].path === dir + "/hello.txt"), st.permissions.map((p) => p.toolCall));
    check("EditorTools: the terminal was released", st.terms.size === 0, [...st.terms.keys()]);

    // cancel mid-command: the editor's terminal is killed and released
    const slow = agent.request(acp.methods.agent.session.prompt,
      { sessionId: s.sessionId, prompt: [{ type: "text", text: "slow" }] });
    for (let i = 0; i < 100 && st.next < 2; i++) await sleep(100);
    await sleep(300);
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: s.sessionId });
    const sr = await slow;
    check("EditorTools: cancel mid-command ends the turn as cancelled", sr.stopReason === "cancelled", sr);
    for (let i = 0; i < 50 && st.terms.size > 0; i++) await sleep(100);
    check("EditorTools: the cancelled command's terminal was killed and released",
      st.killed.includes("t2") && st.terms.size === 0, { killed: st.killed, left: [...st.terms.keys()] });
  });
  conn.child.stdin.end();
  const ex = await conn.exited;
  check("EditorTools: lash acp exits 0", ex.code === 0, { ex, stderr: conn.stderr().slice(-500) });
  check("EditorTools: every message matches the SDK's schema (" + conn.sc.count() + " messages)",
    conn.sc.problems.length === 0, conn.sc.problems.slice(0, 5).join("\n"));
}

main().catch((e) => {
  check("the SDK client ran to its end", false, e && e.stack || String(e));
  console.log(`1..${n}`);
});
