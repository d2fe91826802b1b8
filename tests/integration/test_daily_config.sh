#!/usr/bin/env bash
# The config file and `lash models` through the real CLI: `lash config
# show` with each source (cli, env, config, default) and no key ever
# printed; hostile config files refused with the cause; the config's
# default model, model settings, base URL and key source reaching a real
# request (the fake OpenAI server records it); a default backend; `lash
# models` against fake OpenAI-compatible and Anthropic model lists
# (paging, keys, failures). TAP output.
. "$(dirname "$0")/../lib.sh"
LASH=$PWD/$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
command -v python3 >/dev/null || skip_all "needs python3 for the fake servers"
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
at_exit cleanup
# a clean environment: nothing from the developer's own setup leaks in
unset LASH_CONFIG LASH_MODEL LASH_SANDBOX_BACKEND OPENAI_API_KEY OPENAI_BASE_URL ANTHROPIC_API_KEY ANTHROPIC_BASE_URL
export HOME=$T/home XDG_CONFIG_HOME=$T/cfg
mkdir -p "$HOME" "$XDG_CONFIG_HOME/lash"
CFG=$XDG_CONFIG_HOME/lash/config.lua

start() { # start NAME ARGS...: a fake server, its port in $T/NAME.port
  local name=$1; shift
  python3 "$@" > "$T/$name.port" 2>"$T/$name.err" & PIDS+=($!)
  for _ in $(seq 100); do [ -s "$T/$name.port" ] && break; sleep 0.05; done
}

# -- no config file: defaults
out=$("$LASH" config show 2>&1); rc=$?
same "config show without a file succeeds" "$rc" "0"
contains "it says the file is not there" "$out" "config file: $CFG (not found: using defaults)"
contains "the OpenAI base URL is the default" "$out" "providers.openai.base_url     https://api.openai.com/v1  (default)"
same "config path follows XDG_CONFIG_HOME" "$("$LASH" config path)" "$CFG"
same "lash config alone shows the settings" "$("$LASH" config 2>&1; echo "rc=$?")" "$("$LASH" config show 2>&1; echo "rc=$?")"
printf 'model: test\nsandbox:\n  backend: local\n' > "$T/config.yaml"
out=$(LASH_CONFIG=$T/config.yaml "$LASH" config show 2>&1)
contains "a YAML config file is told the format" "$out" "$T/config.yaml: the config file is Lua data, not YAML or JSON: write settings as \`model = \"anthropic:claude-sonnet-4-6\"\`"
same "LASH_CONFIG names another file" "$(LASH_CONFIG=/x/y.lua "$LASH" config path)" "/x/y.lua"

# -- a config file, with each source
echo "sk-from-a-file-123" > "$T/akey"
cat > "$CFG" <<LUA
-- comments work: it is Lua data
model = "test"
model_settings = { temperature = 0.25 }
providers = {
  openai = { base_url = "http://127.0.0.1:9/v1", api_key_env = "MY_OAI_KEY" },
  anthropic = { api_key_file = "$T/akey" },
}
sandbox = { backend = "local" }
mcp_servers = { fs = { command = { "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp" } } }
LUA
out=$(MY_OAI_KEY=sk-oai-secret-456 "$LASH" config show 2>&1); rc=$?
same "config show succeeds" "$rc" "0"
contains "the model comes from the config" "$out" "model                         test  (config)"
contains "model settings are shown" "$out" "model_settings.temperature    0.25  (config)"
contains "a configured base URL" "$out" "providers.openai.base_url     http://127.0.0.1:9/v1  (config)"
contains "a key from the variable the config names, not shown" "$out" "providers.openai.api_key      set (17 characters, not shown)  (env MY_OAI_KEY)"
contains "a key from a file, not shown" "$out" "providers.anthropic.api_key   set (18 characters, not shown)  (file $T/akey)"
contains "the sandbox backend" "$out" "sandbox.backend               local  (config)"
contains "MCP servers by name" "$out" "mcp_servers.fs                npx -y @modelcontextprotocol/server-filesystem /tmp  (config)"
lacks "the variable's key is never printed" "$out" "sk-oai-secret-456"
lacks "the file's key is never printed" "$out" "sk-from-a-file"
out=$(OPENAI_API_KEY=sk-env-secret-789 LASH_MODEL=openai:gpt-4.1 OPENAI_BASE_URL=http://env.example/v1 \
  "$LASH" config show --json 2>&1)
contains "env beats config for the model" "$out" '"model":{"source":"env LASH_MODEL","value":"openai:gpt-4.1"}'
contains "env beats config for the base URL" "$out" '"providers.openai.base_url":{"source":"env OPENAI_BASE_URL","value":"http://env.example/v1"}'
contains "the provider's own key variable beats the config's" "$out" '"providers.openai.api_key":{"source":"env OPENAI_API_KEY"'
lacks "--json never prints a key either" "$out" "sk-env-secret"
out=$(LASH_MODEL=openai:gpt-4.1 LASH_SANDBOX_BACKEND=modal "$LASH" config show --model anthropic:claude-x --backend local)
contains "the command line beats env for the model" "$out" "model                         anthropic:claude-x  (cli)"
contains "the command line beats env for the backend" "$out" "sandbox.backend               local  (cli)"
out=$(LASH_SANDBOX_BACKEND=modal "$LASH" config show)
contains "env beats config for the backend" "$out" "sandbox.backend               modal  (env LASH_SANDBOX_BACKEND)"
contains "an unset key variable is named" "$("$LASH" config show)" 'providers.openai.api_key      $MY_OAI_KEY (config api_key_env) is not set  (none)'

# -- hostile or wrong config files are refused with the cause, exit 1
refuse() { # refuse NAME TEXT EXPECTED
  printf '%s\n' "$2" > "$T/bad.lua"
  local o rc
  o=$(LASH_CONFIG=$T/bad.lua timeout 20 "$LASH" config show 2>&1); rc=$?
  same "$1: exit 1" "$rc" "1"
  contains "$1: says why" "$o" "$3"
}
refuse "no globals" 'os.execute("touch '"$T"'/pwned")' "a config file has no globals or functions"
[ -e "$T/pwned" ] && not_ok "the config file could not run a command" || ok "the config file could not run a command"
refuse "no string methods" 'x = ("a"):rep(1e10)' "attempt to call a nil value (method 'rep')"
refuse "a memory budget" 's = "aaaaaaaa" for i = 1, 40 do s = s .. s end' "used more than its memory budget"
refuse "an instruction budget" 'while true do end' "ran past its budget of 1000000 instructions"
refuse "no keys in the file" 'providers = { openai = { api_key = "sk-x" } }' "keys do not go in the config file; set api_key_env"
refuse "data only" 'model = function() end' "config.model is a function; a config file holds data only"
refuse "unknown settings named" 'modle = "test"' "unknown setting 'modle' (known: mcp_servers, model, model_settings, providers, sandbox, traces)"
refuse "unknown providers named" 'providers = { opneai = {} }' "unknown provider 'opneai' (known: anthropic, openai)"
refuse "bad backends named" 'sandbox = { backend = "docker" }' "unknown backend 'docker' (known: local, modal)"
refuse "MCP servers need a command or url" 'mcp_servers = { fs = {} }' "give exactly one of command"
refuse "syntax errors with the line" 'model = ' "bad.lua:2:"
o=$(LASH_CONFIG=$T/none.lua "$LASH" config show 2>&1); rc=$?
same "a missing LASH_CONFIG file fails" "$rc" "1"
contains "and says which variable named it" "$o" "(named by LASH_CONFIG)"
printf 'return { model = "test" }\n' > "$T/ret.lua"
same "a file may return one table" "$(LASH_CONFIG=$T/ret.lua "$LASH" config check)" "$T/ret.lua: ok"
printf 'modle = 1\n' > "$T/bad.lua"
o=$(LASH_CONFIG=$T/bad.lua "$LASH" run examples/test_model.lua hi 2>&1); rc=$?
same "lash run refuses a broken config (a spec error, 6)" "$rc" "6"
contains "naming the file and the cause" "$o" "lash run: $T/bad.lua: config: unknown setting 'modle'"

# -- the config reaches lash run
cat > "$T/nomodel.lua" <<'LUA'
local lash = require "lash"
return lash.agent { instructions = "Answer briefly." }
LUA
# its MCP server joins the run: one that cannot start is said and left out
sed -i 's|^mcp_servers = .*|mcp_servers = { fs = { command = { "/nonexistent/mcp-server" } } }|' "$CFG"
out=$("$LASH" run "$T/nomodel.lua" hi 2>&1); rc=$?
same "a spec without a model runs on the config's default" "$rc" "0"
contains "the config's test model answered" "$out" "success (no tool calls)"
contains "a config MCP server that cannot start is said, and the run goes on" "$out" \
  "lash: warning: the config's MCP server 'fs' ($CFG, mcp_servers.fs) did not start, so this run goes on without its tools"
start openai tests/servers/fake_openai.py --fixture text --lifetime 60
OPORT=$(cat "$T/openai.port")
cat > "$CFG" <<LUA
model = "openai:gpt-4.1"
model_settings = { temperature = 0.25, max_tokens = 77 }
providers = { openai = { base_url = "http://127.0.0.1:$OPORT/v1", api_key_env = "MY_OAI_KEY" } }
LUA
cat > "$T/settings.lua" <<'LUA'
local lash = require "lash"
return lash.agent { instructions = "Answer briefly.", model_settings = { max_tokens = 55 } }
LUA
out=$(MY_OAI_KEY=sk-cfg-key "$LASH" run --no-stream "$T/settings.lua" hi 2>&1); rc=$?
same "a run through the config's provider succeeds" "$rc" "0"
contains "the fake OpenAI answered" "$out" "Hello there, how may I assist you today?"
reqs=$(curl -s "http://127.0.0.1:$OPORT/_requests")
contains "the request went to the config's base URL" "$reqs" '"path": "/v1/chat/completions"'
contains "with the key from the variable the config names" "$reqs" '"authorization": "Bearer sk-cfg-key"'
contains "with the config's model settings" "$reqs" '"temperature": 0.25'
contains "the spec's own settings beat the config's" "$reqs" '"max_tokens": 55'
contains "the config's default model" "$reqs" '"model": "gpt-4.1"'
out=$(MY_OAI_KEY=sk-cfg-key "$LASH" run --model test "$T/settings.lua" hi 2>&1)
contains "--model beats the config" "$out" "success (no tool calls)"
printf 'sandbox = { backend = "modal" }\n' > "$CFG"
out=$("$LASH" run examples/test_model.lua hi 2>&1); rc=$?
same "a default backend leaves a spec without a sandbox alone" "$rc" "0"

# -- lash models
rm -f "$CFG"
start oai tests/servers/fake_models.py --lifetime 60
start oaikey tests/servers/fake_models.py --key sk-oai --lifetime 60
start ant tests/servers/fake_models.py --flavor anthropic --key sk-ant --lifetime 60
start fail tests/servers/fake_models.py --fail 503 --lifetime 60
O=http://127.0.0.1:$(cat "$T/oai.port")/v1; A=http://127.0.0.1:$(cat "$T/ant.port")
out=$("$LASH" models 2>&1); rc=$?
same "models with nothing configured succeeds" "$rc" "0"
contains "names what Anthropic needs" "$out" "anthropic  https://api.anthropic.com
  not asked: set ANTHROPIC_API_KEY"
contains "names what OpenAI needs" "$out" "not asked: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)"
contains "lists the offline providers" "$out" "test
  offline scripted model built into lash (no server)"
out=$(OPENAI_BASE_URL=$O ANTHROPIC_BASE_URL=$A ANTHROPIC_API_KEY=sk-ant "$LASH" models 2>&1); rc=$?
same "models against both servers succeeds" "$rc" "0"
contains "Anthropic's models, every page" "$out" "anthropic  $A
  anthropic:claude-sonnet-4-6  Claude Sonnet 4.6
  anthropic:claude-opus-4-1  Claude Opus 4.1
  anthropic:claude-haiku-4-5  Claude Haiku 4.5"
contains "an OpenAI-compatible server's models, no key needed" "$out" "openai  $O
  openai:gpt-4.1  openai
  openai:gpt-4.1-mini  openai
  openai:llama3.2  library"
out=$(OPENAI_BASE_URL=$O "$LASH" models openai --json)
same "--json" "$out" '{"providers":[{"base_url":"'"$O"'","models":[{"id":"gpt-4.1","model":"openai:gpt-4.1","name":"openai"},{"id":"gpt-4.1-mini","model":"openai:gpt-4.1-mini","name":"openai"},{"id":"llama3.2","model":"openai:llama3.2","name":"library"}],"name":"openai"}]}'
K=http://127.0.0.1:$(cat "$T/oaikey.port")/v1
printf 'providers = { openai = { base_url = "%s", api_key_env = "MY_OAI_KEY" } }\n' "$K" > "$CFG"
out=$(MY_OAI_KEY=sk-oai "$LASH" models openai 2>&1); rc=$?
same "models uses the config's base URL and key" "$rc" "0"
contains "and lists the models" "$out" "gpt-4.1-mini"
out=$(MY_OAI_KEY=wrong "$LASH" models openai 2>&1); rc=$?
same "a refused key fails" "$rc" "1"
contains "naming the status, the server's message and the fix" "$out" "lash models: openai: HTTP 401 invalid_request_error: Incorrect API key provided (GET $K/models); check the API key"
rm -f "$CFG"
out=$(ANTHROPIC_BASE_URL=$A ANTHROPIC_API_KEY=bad "$LASH" models anthropic 2>&1); rc=$?
same "Anthropic refusing the key fails" "$rc" "1"
contains "with Anthropic's error" "$out" "HTTP 401 authentication_error: invalid x-api-key"
out=$(OPENAI_BASE_URL=http://127.0.0.1:$(cat "$T/fail.port")/v1 "$LASH" models openai test 2>&1); rc=$?
same "a failing server fails the command" "$rc" "1"
contains "with its status" "$out" "HTTP 503 server_error: the fake fails on purpose"
contains "the other providers are still listed" "$out" "offline scripted model"
out=$(OPENAI_BASE_URL=http://127.0.0.1:1/v1 "$LASH" models openai --timeout 5 2>&1); rc=$?
same "an unreachable server fails" "$rc" "1"
contains "saying it cannot be reached" "$out" "openai: cannot reach http://127.0.0.1:1/v1/models"
out=$("$LASH" models nosuch 2>&1); rc=$?
same "an unknown provider is a usage error" "$rc" "2"
contains "naming the known ones" "$out" "unknown provider 'nosuch' (known: anthropic, openai, test, function)"

# the config's MCP servers join every run's toolsets (the reference server)
EV=$PWD/tests/mcp/node_modules/.bin/mcp-server-everything
if [ -x "$EV" ] && command -v node >/dev/null; then
  cat >"$T/mcpcfg.lua" <<EOF
mcp_servers = { everything = { command = { "$EV" } } }
EOF
  cat >"$T/calls_echo.lua" <<'EOF'
local lash = require "lash"
return lash.agent { name = "caller", model = lash.script_model {
  { tool_calls = { { name = "echo", args = { message = "from the config's server" } } } },
  function(messages)
    local last = messages[#messages].parts[1]
    return { text = "got: " .. tostring(last.content) }
  end,
} }
EOF
  out=$(cd "$T" && LASH_CONFIG=$T/mcpcfg.lua timeout 120 "$LASH" run --no-save calls_echo.lua go 2>&1); rc=$?
  same "a run with a config MCP server succeeds" "$rc" "0"
  contains "the server's tool was offered and called" "$out" "got: Echo: from the config's server"
  out=$(cd "$T" && LASH_CONFIG=$T/mcpcfg.lua timeout 120 "$LASH" chat --no-save --no-history calls_echo.lua \
    <<<"go" 2>&1); rc=$?
  contains "... in lash chat too" "$out" "got: Echo: from the config's server"
else
  skip "a run with a config MCP server succeeds" "no node or tests/mcp packages"
  skip "the server's tool was offered and called" "no node or tests/mcp packages"
  skip "... in lash chat too" "no node or tests/mcp packages"
fi

done_testing
