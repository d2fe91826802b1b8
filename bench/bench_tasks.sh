#!/usr/bin/env bash
# Event loop and scheduler overhead (issue 2): 1,000 tasks sleeping and waking.
cd "$(dirname "$0")/.."
B=${LASH_BUILD:-build}
"$B/bin/lash" eval "_G.arg = {1000, 100}; dofile('bench/tasks_bench.lua')"
