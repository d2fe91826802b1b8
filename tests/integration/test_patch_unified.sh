#!/usr/bin/env bash
# tests/integration/test_patch_unified.sh: lash's apply_patch on unified
# diffs made by diff -ruN and git diff, and on hand-written ones, against
# git apply's verdicts and results (tests/patch/unified.lua). TAP.
. "$(dirname "$0")/../lib.sh"
command -v git >/dev/null || skip_all "no git"
command -v diff >/dev/null || skip_all "no diff"
exec lua5.4 tests/patch/unified.lua
