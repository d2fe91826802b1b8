#!/usr/bin/env bash
# tests/mcp/conformance_client.sh URL: run conformance_client.lua with lash
# (LASH: the binary; default build/bin/lash of this checkout).
here=$(cd "$(dirname "$0")" && pwd)
exec "${LASH:-$here/../../build/bin/lash}" eval "$(cat "$here/conformance_client.lua")" "$@"
