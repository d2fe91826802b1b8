#!/usr/bin/env bash
# The lash host as a user meets it: --help, --version, eval, errors with a
# traceback and a non-zero exit, and the memory budget from the command line.
. "$(dirname "$0")/../lib.sh"
L=$BUILD/bin/lash
check() { # check NAME EXPECTED_RC PATTERN -- cmd...
  local name=$1 want_rc=$2 pat=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want_rc" ] && printf '%s' "$out" | grep -qE -- "$pat"; then
    ok "$name"
  else
    not_ok "$name (exit $rc, want $want_rc)" "$(printf '%s\n' "$out" | head -20)"
  fi
}
check "--version prints the version" 0 '^lash [0-9]+\.[0-9]+\.[0-9]+$' -- "$L" --version
check "--help lists the commands" 0 'eval .*run .*sandbox|sandbox' -- "$L" --help
check "no arguments is a short usage error" 2 "see 'lash --help'" -- "$L"
check "an unknown command names itself" 2 "unknown command 'frobnicate'" -- "$L" frobnicate
check "eval prints what the code returns" 0 '^42	true$' -- "$L" eval 'local t = lash.spawn(function(a) lash.sleep(0.01) return a * 2 end, 21) return t:join(), lash.now() > 0'
check "eval errors print a traceback" 1 'stack traceback' -- "$L" eval 'error("boom")'
check "the memory budget is named when exceeded" 1 'memory budget of 2097152 bytes was exceeded' -- "$L" --memory-limit 2M eval 'local t = {} for i = 1, 1e6 do t[i] = ("x"):rep(50) .. i end'
check "LASH_MEMORY_LIMIT sets it too" 1 'memory budget of 2097152 bytes' -- env LASH_MEMORY_LIMIT=2M "$L" eval 'local t = {} for i = 1, 1e6 do t[i] = ("x"):rep(50) .. i end'
check "lash.sys.memory reports the budget" 0 '^[0-9]+	67108864$' -- "$L" --memory-limit 64M eval 'return lash.sys.memory()'
check "a negative size is refused" 2 'is not a size' -- "$L" --memory-limit -5 --version
check "an overflowing size is refused" 2 'is not a size' -- "$L" --memory-limit 17179869184G --version
check "junk after a size is refused" 2 'is not a size' -- "$L" --memory-limit 12x --version
done_testing
