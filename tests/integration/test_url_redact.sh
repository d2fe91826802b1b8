#!/usr/bin/env bash
# tests/integration/test_url_redact.sh: a password or key in a configured
# URL (http://user:pass@host, ?api_key=...) is never printed or stored:
# lash config show, lash models (text and --json), a run's output, --json
# events and the sessions database, and a trace exporter's warning all show
# *** in its place (lash.url_redact).
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"
command -v sqlite3 >/dev/null || skip_all "sqlite3 is missing"

new_tmp work
export HOME=$work OPENAI_API_KEY=k
unset XDG_STATE_HOME XDG_CONFIG_HOME LASH_CONFIG LASH_SESSIONS_DB
export OPENAI_BASE_URL='http://user:hunter2@127.0.0.1:9/v1?api_key=zzsecret&x=1'
SPEC=$(pwd)/examples/hello_tools.lua
leaks() { printf '%s' "$1" | grep -c 'hunter2\|zzsecret'; }

out=$("$LASH" config show 2>&1)
same "config show: no password or key" "$(leaks "$out")" 0
contains "  the URL shown redacted" "$out" "http://user:***@127.0.0.1:9/v1?api_key=***&x=1"
out=$("$LASH" config show --json 2>&1)
same "config show --json: no password or key" "$(leaks "$out")" 0
out=$("$LASH" models 2>&1)
same "lash models: no password or key" "$(leaks "$out")" 0
contains "  the URL shown redacted" "$out" "user:***@"
out=$("$LASH" models --json 2>&1)
same "lash models --json: no password or key" "$(leaks "$out")" 0
out=$("$LASH" run --trust "$SPEC" --model openai:gpt-4o hi 2>&1)
same "a failing run's output: no password or key" "$(leaks "$out")" 0
out=$("$LASH" run --json --trust "$SPEC" --model openai:gpt-4o hi 2>&1)
same "its --json events: no password or key" "$(leaks "$out")" 0
db=$(sqlite3 "$work/.local/state/lash/sessions.db" .dump 2>&1)
same "the sessions database: no password or key" "$(leaks "$db")" 0
out=$(OTEL_EXPORTER_OTLP_ENDPOINT='http://u:hunter2@127.0.0.1:9' "$LASH" run --trust "$SPEC" hi 2>&1)
contains "a trace exporter's warning names the collector" "$out" "collector at http://u:***@127.0.0.1:9"
same "  with no password" "$(leaks "$out")" 0
done_testing
