#!/usr/bin/env bash
# tools/manpage.sh LASH > lash.1: the man page, made from the CLI's own help
# texts (one owner: `lash --help` and `lash CMD --help`), so the page never
# says something the program does not. Run by `make` (build/lash.1) and
# installed by `make install` as share/man/man1/lash.1.
set -euo pipefail
lash=$1
version=$("$lash" --version | awk '{print $2}')

# roff-safe text: backslashes escaped, a leading . or ' made literal.
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
# the help text without its exit code table (the page has one section for it)
body() { "$lash" "$@" --help 2>&1 | awk '/^exit codes:$/ { skip = 1 } !skip' | esc; }

cat <<HEAD
.TH LASH 1 "" "lash $version" "User Commands"
.SH NAME
lash \\- an embeddable, Lua-scriptable agent harness
.SH SYNOPSIS
.B lash
.I command
.RI [ options ]
.br
.B lash run
.RI [ SPEC ]
.RI [ PROMPT ]
.RI [ options ]
.br
.B lash sandbox
.I subcommand
.RI [ options ]
.SH DESCRIPTION
lash runs an LLM agent in a loop: it sends instructions, history and tool definitions to a model,
runs the tools the model calls (its shell commands and file edits in a sandbox, a bubblewrap jail by
default), feeds the results back, and stops with an answer. Agents are specs in Lua, YAML or JSON.
The same engine is a C library (lash.h) that games and tools embed.
.PP
The offline model
.B test
needs no key and no network:
.B lash run examples/sandbox_agent.yaml \\(dqx\\(dq \\-\\-model test
HEAD

echo '.SH GLOBAL OPTIONS'
echo '.nf'
"$lash" --help | awk '/^global options:$/ { on = 1; next } /^exit codes:$/ { on = 0 } on' | esc
echo '.fi'

echo '.SH COMMANDS'
for cmd in $("$lash" --help | awk '/^commands:$/ { on = 1; next } /^$/ { on = 0 } on { print $1 }'); do
  echo ".SS lash $cmd"
  echo '.nf'
  body "$cmd"
  echo '.fi'
done

echo '.SH EXIT STATUS'
"$lash" --help | awk '/^exit codes:$/ { on = 1; next } on && NF' | while read -r code meaning; do
  printf '.TP\n.B %s\n%s\n' "$code" "$meaning" | sed -e 's/\\/\\e/g'
done

cat <<'TAIL'
.SH ENVIRONMENT
.TP
.B ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL
the model providers' keys and servers.
.TP
.B LASH_MODEL
the model when neither the command line nor the spec names one.
.TP
.B LASH_CONFIG
the config file (else $XDG_CONFIG_HOME/lash/config.lua, else ~/.config/lash/config.lua).
.TP
.B LASH_SANDBOX_ROOT
where local sandboxes live (as root /var/lib/lash/sandboxes, else $XDG_STATE_HOME/lash/sandboxes).
.TP
.B LASH_SESSIONS_DB, LASH_NO_SAVE
where saved conversations go (else $XDG_STATE_HOME/lash/sessions.db); LASH_NO_SAVE=1 saves none.
.TP
.B MODAL_TOKEN_ID, MODAL_TOKEN_SECRET
credentials of the Modal backend (else ~/.modal.toml).
.TP
.B OTEL_EXPORTER_OTLP_ENDPOINT
export each run as OpenTelemetry traces.
.TP
.B LASH_LOG, NO_COLOR, LASH_MEMORY_LIMIT, LASH_SHUTDOWN_TIMEOUT
logging (info, debug), colour, the Lua heap's cap, the cleanup time after a signal.
.SH SEE ALSO
.BR bwrap (1).
The manual: README.md and docs/ in lash's source (docs/cli.md for this command, docs/agents.md for
specs, docs/sandboxes.md, docs/embedding.md for lash.h).
TAIL
