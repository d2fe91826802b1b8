-- luacheck's settings for lash's Lua (make test runs it on lua/, clean).
std = "lua54"
max_line_length = 120
-- A method keeps `self` in its signature even when it does not use it: the
-- models' and toolsets' vtables are called as obj:method(...).
self = false
ignore = {
  -- `not (x > 0)` is how a NaN is refused: `x <= 0` lets it through.
  "581",
  -- An empty branch with a comment says a case was considered and needs nothing.
  "542",
}
