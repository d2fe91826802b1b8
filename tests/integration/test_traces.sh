#!/usr/bin/env bash
# Traces through the real CLI, received by tests/otlp/receiver.py, which
# decodes every export into the real ExportTraceServiceRequest compiled
# from the pinned opentelemetry-proto files (protobuf re-encoded byte for
# byte; OTLP/JSON through protobuf's json_format): the span tree of a run
# (invoke_agent > chat, execute_tool) with the GenAI attributes, over
# http/protobuf and http/json, from a real provider's wire answers (fake
# OpenAI); errors as span status; TRACEPARENT; headers; batching; the
# config file; a collector that holds its answer does not hold up the run;
# an unreachable or failing collector is a warning, never a failed run.
. "$(dirname "$0")/../lib.sh"
LASH=$PWD/$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
PY=/usr/bin/python3
"$PY" -c "import google.protobuf" 2>/dev/null && command -v protoc >/dev/null \
  || skip_all "needs /usr/bin/python3 with python3-protobuf and protoc"
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
at_exit cleanup
unset LASH_CONFIG LASH_MODEL OPENAI_API_KEY OPENAI_BASE_URL ANTHROPIC_API_KEY ANTHROPIC_BASE_URL
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_EXPORTER_OTLP_PROTOCOL \
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL OTEL_EXPORTER_OTLP_HEADERS OTEL_EXPORTER_OTLP_TRACES_HEADERS \
  OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES OTEL_SDK_DISABLED OTEL_TRACES_EXPORTER TRACEPARENT \
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE OTEL_BSP_SCHEDULE_DELAY
export HOME=$T/home XDG_STATE_HOME=$T/state XDG_CONFIG_HOME=$T/cfg
mkdir -p "$HOME" "$XDG_CONFIG_HOME/lash"

wait_for() { for _ in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
# receiver NAME ARGS...: start one; its port in $T/NAME.port, its log $T/NAME.log
receiver() {
  local name=$1; shift
  : > "$T/$name.log"
  "$PY" tests/otlp/receiver.py "$T/$name.log" "$@" > "$T/$name.port" 2>"$T/$name.err" & PIDS+=($!)
  for _ in $(seq 200); do [ -s "$T/$name.port" ] && break; sleep 0.05; done
}
# spans NAME 'python expression over the list s of spans (dicts: name, kind,
# traceId, spanId, parentSpanId, attrs, status)' [extra python]
spans() {
  "$PY" - "$T/$1.log" "$2" <<'PY'
import json, sys
def val(v):
    if "arrayValue" in v: return [val(x) for x in v["arrayValue"].get("values", [])]
    if "intValue" in v: return int(v["intValue"])
    for k in ("stringValue", "boolValue", "doubleValue"):
        if k in v: return v[k]
    return None
reqs, s, res = [], [], []
for line in open(sys.argv[1]):
    d = json.loads(line)
    reqs.append(d)
    if "error" in d:
        print("RECEIVER ERROR:", d["error"]); sys.exit(0)
    for rs in d["resourceSpans"]:
        res.append({a["key"]: val(a["value"]) for a in rs["resource"].get("attributes", [])})
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                sp["attrs"] = {a["key"]: val(a["value"]) for a in sp.get("attributes", [])}
                sp["scope"] = ss["scope"]
                s.append(sp)
print(eval(sys.argv[2]))
PY
}

# -- http/protobuf (the default): the span tree of one run
receiver pb
PB=http://127.0.0.1:$(cat "$T/pb.port")
out=$(OTEL_EXPORTER_OTLP_ENDPOINT=$PB OTEL_SERVICE_NAME=spec-tests OTEL_EXPORTER_OTLP_HEADERS="x-tenant=acme%20co,x-other=2" \
  "$LASH" run examples/test_model.lua "hi" --json 2>"$T/pb.stderr" </dev/null); rc=$?
same "the run succeeds" "$rc" "0"
sid=$(printf '%s\n' "$out" | grep '"type":"exit"' | "$PY" -c 'import json,sys;print(json.load(sys.stdin)["session"])')
same "every export decoded into ExportTraceServiceRequest" "$(spans pb 'sum(1 for r in reqs if "error" in r)')" "0"
same "sent as application/x-protobuf" "$(spans pb 'sorted(set(r["content_type"] for r in reqs))')" "['application/x-protobuf']"
same "one batch (default batching) with the run's five spans" "$(spans pb 'len(reqs), len(s)')" "(1, 5)"
same "span names" "$(spans pb 'sorted(x["name"] for x in s)')" \
  "['chat test', 'chat test', 'execute_tool greet', 'execute_tool pick', 'invoke_agent agent']"
same "one trace" "$(spans pb 'len(set(x["traceId"] for x in s)), len(s[0]["traceId"])')" "(1, 32)"
same "the run is the root, every other span its child" \
  "$(spans pb '[x["name"] for x in s if "parentSpanId" not in x] + sorted(set(x["parentSpanId"] == [r for r in s if r["name"].startswith("invoke")][0]["spanId"] for x in s if "parentSpanId" in x))')" \
  "['invoke_agent agent', True]"
same "span kinds: chat CLIENT, the rest INTERNAL" "$(spans pb 'sorted(set((x["name"].split()[0], x["kind"]) for x in s))')" \
  "[('chat', 'SPAN_KIND_CLIENT'), ('execute_tool', 'SPAN_KIND_INTERNAL'), ('invoke_agent', 'SPAN_KIND_INTERNAL')]"
same "the run span: operation, agent, provider, model, usage, conversation" \
  "$(spans pb '[(a["gen_ai.operation.name"], a["gen_ai.agent.name"], a["gen_ai.provider.name"], a["gen_ai.request.model"], a["gen_ai.usage.input_tokens"] > 0, a["gen_ai.usage.output_tokens"] > 0, a["gen_ai.conversation.id"]) for a in [x["attrs"] for x in s if x["name"].startswith("invoke")]][0]')" \
  "('invoke_agent', 'agent', 'test', 'test', True, True, '$sid')"
same "chat spans: operation, finish reasons, usage" \
  "$(spans pb 'sorted((x["attrs"]["gen_ai.operation.name"], tuple(x["attrs"]["gen_ai.response.finish_reasons"]), x["attrs"]["gen_ai.usage.input_tokens"] > 0) for x in s if x["name"].startswith("chat"))')" \
  "[('chat', ('stop',), True), ('chat', ('tool_calls',), True)]"
same "tool spans: name, call id, type" \
  "$(spans pb 'sorted((x["attrs"]["gen_ai.operation.name"], x["attrs"]["gen_ai.tool.name"], x["attrs"]["gen_ai.tool.call.id"], x["attrs"]["gen_ai.tool.type"]) for x in s if x["name"].startswith("execute"))')" \
  "[('execute_tool', 'greet', 'test_greet_1', 'function'), ('execute_tool', 'pick', 'test_pick_1', 'function')]"
same "times: every span ends after it starts, inside the run" \
  "$(spans pb 'all(int(x["startTimeUnixNano"]) <= int(x["endTimeUnixNano"]) for x in s) and all(int(r["startTimeUnixNano"]) <= int(x["startTimeUnixNano"]) and int(x["endTimeUnixNano"]) <= int(r["endTimeUnixNano"]) for r in s if r["name"].startswith("invoke") for x in s)')" "True"
same "the resource names the service (OTEL_SERVICE_NAME) and the SDK" \
  "$(spans pb '(res[0]["service.name"], res[0]["telemetry.sdk.name"], s[0]["scope"]["name"])')" "('spec-tests', 'lash', 'lash')"
same "OTEL_EXPORTER_OTLP_HEADERS reach the collector (percent-decoded)" "$(spans pb 'reqs[0]["headers"]["x-tenant"]')" "acme co"
lacks "and are never printed" "$out$(cat "$T/pb.stderr")" "acme"
same "a successful export says nothing" "$(cat "$T/pb.stderr")" ""

# -- http/json, decoded by json_format into the same messages
receiver js
out=$(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:$(cat "$T/js.port")/v1/traces OTEL_EXPORTER_OTLP_PROTOCOL=http/json \
  "$LASH" run examples/test_model.lua "hi" --no-save 2>&1 </dev/null); rc=$?
same "http/json: the run succeeds" "$rc" "0"
same "http/json: decoded without error, as application/json" \
  "$(spans js '(sum(1 for r in reqs if "error" in r), sorted(set(r["content_type"] for r in reqs)))')" "(0, ['application/json'])"
same "http/json: the same five spans" "$(spans js 'sorted(x["name"] for x in s)')" \
  "['chat test', 'chat test', 'execute_tool greet', 'execute_tool pick', 'invoke_agent agent']"
same "http/json: ids are the right lengths" "$(spans js 'sorted(set((len(x["traceId"]), len(x["spanId"])) for x in s))')" "[(32, 16)]"
lacks "http/json: no conversation id under --no-save" "$(spans js '[x["attrs"].keys() for x in s]')" "gen_ai.conversation.id"

# -- a real provider's answer (fake OpenAI Chat Completions): what it said it ran and used
"$PY" tests/servers/fake_openai.py --fixture text --lifetime 60 > "$T/openai.port" 2>"$T/openai.err" & PIDS+=($!)
for _ in $(seq 200); do [ -s "$T/openai.port" ] && break; sleep 0.05; done
cat > "$T/plain.lua" <<'LUA'
local lash = require "lash"
return lash.agent { name = "plain", instructions = "Answer briefly." }
LUA
receiver prov
out=$(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/prov.port") OPENAI_BASE_URL=http://127.0.0.1:$(cat "$T/openai.port")/v1 \
  OPENAI_API_KEY=sk-test "$LASH" run "$T/plain.lua" "hi" --model openai:gpt-4.1 --no-stream --no-save 2>&1 </dev/null); rc=$?
same "a run on the OpenAI wire succeeds" "$rc" "0"
same "its chat span: provider, requested and answered model, id, finish, the wire's token counts" \
  "$(spans prov '[(a["gen_ai.provider.name"], a["gen_ai.request.model"], a["gen_ai.response.model"], a["gen_ai.response.id"], a["gen_ai.response.finish_reasons"], a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) for a in [x["attrs"] for x in s if x["name"].startswith("chat")]]')" \
  "[('openai', 'gpt-4.1', 'gpt-4.1-2025-04-14', 'chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT', ['stop'], 19, 10)]"
same "named after the requested model" "$(spans prov 'sorted(x["name"] for x in s)')" "['chat gpt-4.1', 'invoke_agent plain']"

# -- a failed run: error status and error.type
receiver err
out=$(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/err.port") "$LASH" run examples/test_model.lua "hi" --max-steps 1 --no-save 2>&1 </dev/null); rc=$?
same "a run past --max-steps fails (exit 8)" "$rc" "8"
same "its run span has status ERROR and error.type limit" \
  "$(spans err '[(x["status"].get("code"), x["attrs"].get("error.type"), "max_steps" in x["status"].get("message", "")) for x in s if x["name"].startswith("invoke")]')" \
  "[('STATUS_CODE_ERROR', 'limit', True)]"

# -- TRACEPARENT: the run joins the caller's trace
receiver tp
TP=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/tp.port") TRACEPARENT=$TP "$LASH" run examples/test_model.lua "hi" --no-save >/dev/null 2>&1 </dev/null
same "with TRACEPARENT the run span is the caller's child, in its trace" \
  "$(spans tp '[(x["traceId"], x.get("parentSpanId")) for x in s if x["name"].startswith("invoke")]')" \
  "[('0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331')]"

# -- batching: at most OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans per request
receiver batch
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/batch.port") OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2 \
  "$LASH" run examples/test_model.lua "hi" --no-save >/dev/null 2>&1 </dev/null
same "five spans in batches of at most two" "$(spans batch '(len(s), max(sum(len(ss["spans"]) for rs in r["resourceSpans"] for ss in rs["scopeSpans"]) for r in reqs), len(reqs) >= 3)')" "(5, 2, True)"

# -- the config file names the collector when the environment does not
receiver cfg
printf 'traces = { endpoint = "http://127.0.0.1:%s", protocol = "http/json", service_name = "from-config" }\n' \
  "$(cat "$T/cfg.port")" > "$XDG_CONFIG_HOME/lash/config.lua"
"$LASH" run examples/test_model.lua "hi" --no-save >/dev/null 2>&1 </dev/null
same "config traces: exported as JSON under its service name" \
  "$(spans cfg '(len(s), sorted(set(r["content_type"] for r in reqs)), res[0]["service.name"])')" "(5, ['application/json'], 'from-config')"
contains "lash config show names the endpoint and its source" "$("$LASH" config show)" "traces.endpoint"
printf 'traces = { endpoint = "http://x", colour = "red" }\n' > "$XDG_CONFIG_HOME/lash/config.lua"
out=$("$LASH" config check 2>&1); rc=$?
contains "an unknown traces setting is refused" "$out" "config.traces: unknown setting 'colour'"
rm -f "$XDG_CONFIG_HOME/lash/config.lua"

# -- a collector that holds its answer does not hold up the run
mkdir -p "$T/hold"
receiver hold --hold "$T/hold"
cat > "$T/wait.lua" <<LUA
local lash = require "lash"
-- the tool returns once the collector has the first span (the chat span,
-- exported alone with a batch size of 1) and is holding its answer
return lash.agent {
  name = "waiter",
  model = lash.script_model { { tool_calls = { { name = "wait_export", args = {} } } }, "answered while the collector held" },
  tools = { lash.tool { name = "wait_export", description = "Waits for the collector.",
    parameters = { type = "object", properties = {} },
    handler = function()
      for _ = 1, 1200 do
        local f = io.open("$T/hold/received")
        if f then f:close() return "the collector has it" end
        lash.sleep(0.05)
      end
      return "the collector never got it"
    end } },
}
LUA
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/hold.port") OTEL_BSP_MAX_EXPORT_BATCH_SIZE=1 OTEL_EXPORTER_OTLP_TIMEOUT=300000 \
  "$LASH" run "$T/wait.lua" "go" --trust --json --no-save > "$T/hold.out" 2>&1 </dev/null & hpid=$!; PIDS+=($hpid)
ended=no
for _ in $(seq 600); do grep -q '"type":"run_end"' "$T/hold.out" 2>/dev/null && { ended=yes; break; }; sleep 0.1; done
same "the run answered while the collector still held its first export" "$ended" "yes"
contains "after the collector had the span" "$(cat "$T/hold.out")" "the collector has it"
[ -e "$T/hold/release" ] && not_ok "the collector was released too early" || ok "the collector had not answered yet"
touch "$T/hold/release"
wait "$hpid"; rc=$?
same "lash exits 0 once the collector answers" "$rc" "0"
same "every span arrived, one per request" "$(spans hold '(len(s), len(reqs))')" "(4, 4)"

# -- an unreachable or failing collector: a warning, never a failed run
"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' > "$T/closed.port"
out=$(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/closed.port") "$LASH" run examples/test_model.lua "hi" --no-save 2>&1 </dev/null); rc=$?
same "unreachable collector: the run still succeeds" "$rc" "0"
contains "with a warning naming the collector" "$out" "lash: warning: traces: cannot reach the collector at http://127.0.0.1:$(cat "$T/closed.port")/v1/traces"
contains "saying the spans were dropped" "$out" "span(s) dropped"
same "said once" "$(printf '%s\n' "$out" | grep -c 'warning: traces')" "1"
receiver s503 --status 503
out=$(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/s503.port") OTEL_BSP_MAX_EXPORT_BATCH_SIZE=1 \
  "$LASH" run examples/test_model.lua "hi" --no-save 2>&1 </dev/null); rc=$?
same "a collector answering 503: the run still succeeds" "$rc" "0"
contains "with one warning giving the status" "$out" "answered HTTP 503"
same "once, though five exports failed" "$(printf '%s\n' "$out" | grep -c 'warning: traces')" "1"
out=$(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 OTEL_EXPORTER_OTLP_PROTOCOL=grpc "$LASH" run examples/test_model.lua "hi" --no-save 2>&1 </dev/null); rc=$?
same "an unsupported protocol: the run still succeeds" "$rc" "0"
contains "traces are off, saying why" "$out" "traces are off: OTLP protocol 'grpc' is not supported"
receiver off
OTEL_SDK_DISABLED=true OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/off.port") "$LASH" run examples/test_model.lua "hi" --no-save >/dev/null 2>&1 </dev/null
OTEL_TRACES_EXPORTER=none OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$T/off.port") "$LASH" run examples/test_model.lua "hi" --no-save >/dev/null 2>&1 </dev/null
same "OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none export nothing" "$(wc -l < "$T/off.log")" "0"

done_testing
