--- lash.options: the one checker of option tables for the Lua side, the
-- counterpart of the C bindings' lashA_checkoptions. Every "unknown option
-- (known: ...)" message of lash's Lua modules is made here, in one shape:
-- `who: unknown option 'k' (known: a, b, c)`, where "option" may be
-- another word (field, limit, key) and the list is sorted, so a message
-- names the same key and lists the same names every time.
-- @module lash.options
local M = {}

--- The names of a set (its keys) or of a list (its values), sorted and
-- joined with ", ".
-- @tparam table t a set (`{name = anything}`) or a list of names
-- @treturn string
function M.names(t)
  local out = {}
  if t[1] ~= nil then
    for i, name in ipairs(t) do out[i] = tostring(name) end
  else
    for name in pairs(t) do out[#out + 1] = tostring(name) end
  end
  table.sort(out)
  return table.concat(out, ", ")
end

--- The first key of `t` (in sorted order) that `known` does not have.
-- @tparam table t the options given
-- @tparam table known set of the names allowed
-- @return the key, or nil when every key is known
function M.unknown(t, known)
  local first
  for k in pairs(t) do
    if known[k] == nil and (first == nil or tostring(k) < tostring(first)) then first = k end
  end
  return first
end

--- The message for an unknown key.
-- @tparam string who e.g. "lash.prefix_tools"
-- @tparam string what "option", "field", "limit", "key"
-- @param key the unknown key
-- @tparam table known set (or list) of the names allowed
-- @tparam[opt] string known_what the word after "known" (e.g. "fields":
--   "(known fields: ...)"); nil: "(known: ...)"
-- @treturn string
function M.message(who, what, key, known, known_what)
  return string.format("%s: unknown %s '%s' (known%s: %s)", who, what, tostring(key),
                       known_what and (" " .. known_what) or "", M.names(known))
end

--- Raise for the first key of `t` that `known` does not have.
-- @tparam string who
-- @tparam table t the options given
-- @tparam table known set of the names allowed
-- @tparam[opt] table how `what` (default "option"), `known_what`, `level`
--   (of the caller's caller, as error() counts; default 0: no position)
-- @raise the message of M.message
function M.check(who, t, known, how)
  how = how or {}
  local k = M.unknown(t, known)
  if k == nil then return end
  local level = how.level or 0
  error(M.message(who, how.what or "option", k, known, how.known_what), level > 0 and level + 1 or 0)
end

return M
