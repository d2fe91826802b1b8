#!/usr/bin/env bash
# The Modal backend against the fake Modal on loopback (issue 6): one
# command's round trip in RPCs and time, sandbox creation, and 100 concurrent
# commands over one HTTP/2 connection (connections counted by the server).
cd "$(dirname "$0")/.."
B=${LASH_BUILD:-build}
"$B/bin/lash" eval "dofile('bench/modal_bench.lua')"
