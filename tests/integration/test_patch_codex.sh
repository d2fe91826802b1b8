#!/usr/bin/env bash
# tests/integration/test_patch_codex.sh: lash's apply_patch against Codex's
# own, the codex binary of the pinned @openai/codex (tests/peers, installed
# by `make deps`), on every case of tests/patch/cases.lua: the same files,
# the same patch, the same verdict and byte-identical trees
# (tests/patch/differential.lua). TAP; skips where the binary is missing.
. "$(dirname "$0")/../lib.sh"
codex=$(ls "$PWD"/tests/peers/node_modules/@openai/codex-linux-*/vendor/*/bin/codex 2>/dev/null | head -n 1)
[ -n "$codex" ] && [ -x "$codex" ] || skip_all "no codex binary in tests/peers (make deps installs it)"
exec lua5.4 tests/patch/differential.lua "$codex"
