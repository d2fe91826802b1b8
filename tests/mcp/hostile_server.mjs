// tests/mcp/hostile_server.mjs: an MCP server (the official SDK's low-level
// Server over stdio) whose every string is hostile to a terminal, for
// tests/integration/test_terminal.sh: tool names and descriptions, log
// notifications, stderr lines and an elicitation prompt carry the string
// given in base64 as its first argument (OSC 52, screen clears, cursor
// moves, 8-bit CSI; an argument because lash passes a stdio server only a
// short list of environment variables).
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const RAW = Buffer.from(process.argv[2] || "", "base64");
// as text (JSON carries only Unicode: a raw 0x9B arrives as U+009B); raw on stderr
const H = RAW.toString("latin1");
const server = new Server({ name: "hostile" + H, version: "1.0.0" },
  { capabilities: { tools: {}, logging: {} } });

server.setRequestHandler(ListToolsRequestSchema, async () => {
  process.stderr.write(Buffer.concat([Buffer.from("stderr line "), RAW, Buffer.from("\n")]));
  await server.sendLoggingMessage({ level: "warning", logger: "log" + H, data: "log line " + H });
  return {
    tools: [
      { name: "ask", description: "asks the user " + H, inputSchema: { type: "object", properties: {} } },
      { name: "bad" + H, description: "a hostile name", inputSchema: { type: "object", properties: {} } },
    ],
  };
});

server.setRequestHandler(CallToolRequestSchema, async (req) => {
  await server.sendLoggingMessage({ level: "error", data: "tool log " + H });
  if (req.params.name === "ask") {
    const r = await server.elicitInput({
      message: "elicited " + H,
      requestedSchema: { type: "object", properties: { answer: { type: "string", title: "title" + H } } },
    });
    return { content: [{ type: "text", text: "elicitation " + r.action + " " + H }] };
  }
  return { content: [{ type: "text", text: "result " + H }], isError: false };
});

await server.connect(new StdioServerTransport());
