--- lash.url_redact: a URL as it may be printed or stored. A base URL may
-- carry a password (`http://user:pass@host`) or a key in its query
-- (`?api_key=...`); what lash shows on a terminal, in `--json`, in
-- `config show`, in an error or a trace warning says `***` in their place.
-- The one owner of that rule: every place that shows a configured URL asks
-- it.
-- @module lash.url_redact
local M = {}

-- query keys whose values are secrets
local SECRET_KEY = { "key", "token", "secret", "password", "passwd", "pwd", "auth", "sig", "signature",
                     "credential", "session" }

local function secret_name(name)
  name = name:lower()
  for _, k in ipairs(SECRET_KEY) do
    if name:find(k, 1, true) then return true end
  end
  return false
end

--- url with its userinfo and secret-looking query values replaced by `***`;
-- anything that is not a string comes back as it is.
-- @tparam string url
-- @treturn string
function M.redact(url)
  if type(url) ~= "string" then return url end
  -- userinfo: between "scheme://" and the first "@" before the path
  url = url:gsub("^([%a][%w+.-]*://)([^/?#]*)@", function(scheme, info)
    return scheme .. (info:find(":", 1, true) and (info:match("^[^:]*") .. ":***") or "***") .. "@"
  end)
  local head, query, frag = url:match("^([^?#]*)%?([^#]*)(.*)$")
  if not head then return url end
  query = query:gsub("([^&=]+)=([^&]*)", function(k, v)
    if secret_name(k) and v ~= "" then return k .. "=***" end
    return k .. "=" .. v
  end)
  return head .. "?" .. query .. frag
end

--- text with every URL in it redacted (a message quoting one).
-- @tparam string text
-- @treturn string
function M.redact_all(text)
  if type(text) ~= "string" then return text end
  return (text:gsub("[%a][%w+.-]*://[^%s\"'<>]+", M.redact))
end

return M
