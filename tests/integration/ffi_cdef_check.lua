-- ffi_cdef_check.lua HEADER BINDING: the declarations lash_ffi.lua gives
-- ffi.cdef are lash.h's, in order, but for comments, preprocessor lines,
-- LASH_API and the extern "C" guards. Exits 1 (saying where they part)
-- otherwise. Run with lua5.4; prints nothing on success.
local function read(path) local f = assert(io.open(path)); local s = f:read("a"); f:close(); return s end

local function normalize(text)
  text = text:gsub("/%*.-%*/", " "):gsub("//[^\n]*", " ")
  local out = {}
  local in_guard = false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%s*#%s*ifdef%s+__cplusplus") then in_guard = true
    elseif in_guard and line:match("^%s*#%s*endif") then in_guard = false
    elseif not in_guard and not line:match("^%s*#") then out[#out + 1] = line end
  end
  text = table.concat(out, " "):gsub("LASH_API", " ")
  text = text:gsub("%s+", " "):gsub(" ?([%(%)%*,;{}]) ?", "%1")
  return (text:gsub("^ ", ""):gsub(" $", ""))
end

-- every numeric LASH_* constant is in the binding's table, same value
local bad = 0
local binding_text = read(arg[2])
for name, value in read(arg[1]):gmatch("#define LASH_([%u_]+) (%-?[%dx]+)u?") do
  local want = math.tointeger(tonumber(value))
  local got = binding_text:match("[%s{,]" .. name .. " = (%-?%d+)")
  if tonumber(got) ~= want then
    io.stderr:write(string.format("constant LASH_%s: header %s, binding %s\n", name, want, got or "missing"))
    bad = bad + 1
  end
end
if bad > 0 then os.exit(1) end

local header = normalize(read(arg[1]))
local cdef = read(arg[2]):match("ffi%.cdef%s*%[%[(.-)%]%]")
if not cdef then io.stderr:write(arg[2], ": no ffi.cdef [[...]] block\n"); os.exit(1) end
cdef = normalize(cdef)
if header == cdef then os.exit(0) end
local i = 1
while i <= #header and header:sub(i, i) == cdef:sub(i, i) do i = i + 1 end
io.stderr:write(string.format("the binding's declarations differ from %s at character %d:\n  header:  ...%s\n  binding: ...%s\n",
  arg[1], i, header:sub(math.max(1, i - 60), i + 60), cdef:sub(math.max(1, i - 60), i + 60)))
os.exit(1)
