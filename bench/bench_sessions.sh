#!/usr/bin/env bash
# bench/bench_sessions.sh: what saving a conversation and tracing a run
# cost per item, in one lash process (no model, no network):
#   sessions append   one message committed to the SQLite store (its own
#                     transaction, WAL, synchronous=NORMAL), a tool-calling
#                     assistant message as a run writes it
#   otlp encode       one span of a 512-span batch made into an OTLP
#                     protobuf / JSON request body
# N = LASH_BENCH_SESSIONS_N messages (default 2000); CPU time from os.clock,
# wall time from the loop's clock.
set -u
cd "$(dirname "$0")/.."
B=${LASH_BUILD:-build}
LASH_BIN=${LASH_BIN:-$B/bin/lash}
N=${LASH_BENCH_SESSIONS_N:-2000}
[ -x "$LASH_BIN" ] || { echo "bench_sessions: $LASH_BIN is missing (run make)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/lash-bench-sessions.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$LASH_BIN" eval '
local n, path = tonumber((...)), select(2, ...)
local sessions = require "lash.sessions"
local otlp = require "lash.otlp"
local store = sessions.open(path)
local s = store:start { kind = "run" }
s:begin { prompt = "bench" }
local msg = { role = "assistant", finish = "tool_calls", model = "openai:bench",
              usage = { input_tokens = 100, output_tokens = 10 },
              parts = { { type = "tool_call", id = "call_1", name = "run_command", args = { command = "echo step 1" } } } }
local c0, t0 = os.clock(), lash.now()
for _ = 1, n do s:append(msg) end
local c1, t1 = os.clock(), lash.now()
store:close()
local function row(name, v, unit, note) print(string.format("| %s | %.1f | %s | %s |", name, v, unit, note)) end
row("sessions append (cpu)", (c1 - c0) / n * 1e6, "us/message", n .. " messages, one transaction each")
row("sessions append (wall)", (t1 - t0) / n * 1e6, "us/message", "WAL, synchronous=NORMAL")
local spans = {}
for i = 1, 512 do
  spans[i] = { trace_id = string.rep("\1", 16), span_id = string.pack(">I8", i), parent_span_id = string.rep("\2", 8),
               name = "execute_tool run_command", kind = 1, start_ns = 1764633600000000000 + i, end_ns = 1764633600000500000 + i,
               attributes = { { "gen_ai.operation.name", "execute_tool" }, { "gen_ai.tool.name", "run_command" },
                              { "gen_ai.tool.call.id", "call_" .. i }, { "gen_ai.tool.type", "function" } },
               status = { code = 0 } }
end
local res, scope = { { "service.name", "lash" } }, { name = "lash", version = lash.version }
for _, proto in ipairs { "http/protobuf", "http/json" } do
  local reps = 20
  local c = os.clock()
  for _ = 1, reps do otlp.encode(proto, res, scope, spans) end
  row("otlp encode " .. proto, (os.clock() - c) / (reps * 512) * 1e6, "us/span", "batches of 512 spans")
end
' "$N" "$tmp/sessions.db"
