-- hello_tools.lua: an agent with two real Lua tools, driven offline by a
-- scripted model (no key, no network):
--
--   lash run examples/hello_tools.lua "What is 72°F in Celsius, and how many words are in the pangram?"
--
-- The script makes one mistake on purpose (a wrong argument name) so the
-- retry prompt shows, then calls both tools at once and answers from
-- their real results. The same spec drives a real model:
--
--   lash run examples/hello_tools.lua "..." --model anthropic:claude-sonnet-4-6
local lash = require "lash"

local calculate = lash.tool {
  name = "calculate",
  description = "Evaluate an arithmetic expression (+ - * / % ^ and parentheses) and return the result.",
  parameters = {
    type = "object",
    properties = { expression = { type = "string", description = "e.g. (72 - 32) * 5 / 9", minLength = 1 } },
    required = { "expression" },
    additionalProperties = false,
  },
  handler = function(_, args)
    local e = args.expression
    if not e:match("^[%d%s%.%+%-%*/%%%^%(%)]+$") then
      return nil, "Only numbers, spaces, + - * / % ^ and parentheses are allowed."
    end
    local fn = load("return " .. e, "=expression", "t", {})
    if not fn then return nil, "That is not a valid arithmetic expression." end
    local ok, v = pcall(fn)
    if not ok or type(v) ~= "number" then return nil, "The expression could not be evaluated." end
    if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
    return string.format("%.4g", v)
  end,
}

local word_stats = lash.tool {
  name = "word_stats",
  description = "Count the words, distinct words and letters in a text, and find its longest word.",
  parameters = {
    type = "object",
    properties = { text = { type = "string" } },
    required = { "text" },
    additionalProperties = false,
  },
  handler = function(_, args)
    local words, distinct, letters, longest = 0, {}, 0, ""
    for w in args.text:gmatch("%a+") do
      words = words + 1
      distinct[w:lower()] = true
      letters = letters + #w
      if #w > #longest then longest = w end
    end
    local n = 0
    for _ in pairs(distinct) do n = n + 1 end
    return { words = words, distinct_words = n, letters = letters, longest = longest }
  end,
}

local PANGRAM = "The quick brown fox jumps over the lazy dog"

-- The offline model: reads the conversation like a real model would.
local function scripted(messages, info)
  if info.step == 1 then
    return { text = "I'll convert the temperature and count the words.",
             tool_calls = { { name = "calculate", args = { expr = "(72 - 32) * 5 / 9" } } } }
  elseif info.step == 2 then
    return { text = "Right, the argument is called expression.",
             tool_calls = { { name = "calculate", args = { expression = "(72 - 32) * 5 / 9" } },
                            { name = "word_stats", args = { text = PANGRAM } } } }
  end
  local results = {}
  for _, p in ipairs(messages[#messages].parts) do results[p.name] = p.content end
  local stats = lash.json.decode(results.word_stats)
  return string.format("72°F is %s°C. The pangram \"%s\" has %d words (%d distinct), %d letters, "
    .. "and its longest word is \"%s\".", results.calculate, PANGRAM, stats.words, stats.distinct_words,
    stats.letters, stats.longest)
end

return lash.agent {
  name = "hello_tools",
  model = scripted,
  instructions = "You are a careful assistant. Use {{ tools.calculate }} for arithmetic and "
    .. "{{ tools.word_stats }} to count words; never guess numbers.",
  tools = { calculate, word_stats },
}
