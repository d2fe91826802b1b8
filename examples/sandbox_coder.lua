-- sandbox_coder.lua: an agent that writes a small program and its test in
-- a real local sandbox (a bubblewrap jail: no network, nothing of yours
-- writable), runs the test, fixes what fails, reads the program back and
-- reports. Offline, with a scripted model that reads the real tool results
-- the way a model would:
--
--   lash run examples/sandbox_coder.lua "Write wordfreq.sh with a test"
--
-- With a key, the same spec drives a real model:
--
--   ANTHROPIC_API_KEY=... lash run examples/sandbox_coder.lua \
--     "Write wordfreq.sh with a test" --model anthropic:claude-sonnet-4-6
--
-- `--json` prints every event, tool results in full.
local lash = require "lash"

-- The first version forgets to fold case, so its test fails once.
local WORDFREQ_V1 = [[
#!/bin/sh
# wordfreq.sh [N]: the N most frequent words on standard input (default 3),
# one "word count" per line, most frequent first, ties in word order.
n=${1:-3}
tr -cs 'A-Za-z' '\n' | grep -v '^$' | sort | uniq -c |
  sort -k1,1nr -k2,2 | head -n "$n" | awk '{ print $2, $1 }'
]]

local WORDFREQ_V2 = [[
#!/bin/sh
# wordfreq.sh [N]: the N most frequent words on standard input (default 3),
# one "word count" per line, most frequent first, ties in word order.
# Case does not matter: "Go" and "go" are one word.
n=${1:-3}
tr -cs 'A-Za-z' '\n' | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c |
  sort -k1,1nr -k2,2 | head -n "$n" | awk '{ print $2, $1 }'
]]

local TEST = [[
#!/bin/sh
# test_wordfreq.sh: runs wordfreq.sh on fixed inputs, one line per case.
fail=0
check() { # name, input, N, expected output
  got=$(printf '%s' "$2" | sh wordfreq.sh "$3")
  if [ "$got" = "$4" ]; then
    echo "ok - $1"
  else
    echo "FAIL - $1: got '$got', want '$4'"
    fail=1
  fi
}
check "ranks the most frequent words" "the cat and the hat and the bat" 2 "the 3
and 2"
check "ignores case and punctuation" "Go, go! GO." 1 "go 3"
check "prints nothing for no words" "" 3 ""
[ "$fail" -eq 0 ] && echo "all 3 passed"
exit "$fail"
]]

-- The tool results of the last turn, by tool name (the last call wins).
local function last_results(messages)
  local out = {}
  for _, p in ipairs(messages[#messages].parts or {}) do
    if p.type == "tool_result" then out[p.name] = p.content end
  end
  return out
end

local function call(name, args)
  return { name = name, args = args }
end

-- The offline model: decides from what the tools really returned.
local function scripted(messages, info)
  local r = last_results(messages)
  if info.step == 1 then
    return { text = "I'll write wordfreq.sh and a test for it, then run the test.",
             tool_calls = { call("write_file", { path = "wordfreq.sh", content = WORDFREQ_V1 }),
                            call("write_file", { path = "test_wordfreq.sh", content = TEST }) } }
  end
  local test_out = r.run_command
  if test_out and test_out:find("FAIL - ", 1, true) then
    return { text = "The test fails:\n\n" .. test_out .. "\n\nUpper- and lower-case words are counted apart. "
               .. "I'll fold case first.",
             tool_calls = { call("write_file", { path = "wordfreq.sh", content = WORDFREQ_V2 }) } }
  end
  if r.write_file then
    return { tool_calls = { call("run_command", { command = "sh test_wordfreq.sh" }) } }
  end
  if test_out and test_out:find("all 3 passed", 1, true) then
    return { text = "The tests pass. Let me read the program back and try it on a line of Hamlet.",
             tool_calls = { call("read_file", { path = "wordfreq.sh" }),
                            call("run_command", { command = "printf 'To be, or not to be' | sh wordfreq.sh 2" }) } }
  end
  if r.read_file then
    local last_test
    for i = #messages, 1, -1 do
      for _, p in ipairs(messages[i].parts or {}) do
        if p.type == "tool_result" and p.name == "run_command" and p.content:find("all 3 passed", 1, true) then
          last_test = last_test or p.content
        end
      end
    end
    local lines = select(2, r.read_file:gsub("\n", "")) + 1
    return "wordfreq.sh is done: a " .. lines .. "-line POSIX sh pipeline (tr, sort, uniq, awk) that prints the "
      .. "N most frequent words of its input, case-folded. Its test, test_wordfreq.sh, passes:\n\n"
      .. last_test .. "\n\nOn \"To be, or not to be\" with N=2 it prints:\n\n" .. r.run_command
  end
  return "I could not finish: the last tool results were " .. lash.json.encode(r)
end

return lash.agent {
  name = "sandbox_coder",
  model = scripted,
  instructions = "You write small, portable POSIX shell programs. Write the program and a test script next to "
    .. "it, run the test, fix what fails, then read the final program back and report what it does and the test "
    .. "output.",
  capabilities = {
    lash.sandbox_capability { sandbox_timeout = 300, default_command_timeout = 30 },
  },
}
